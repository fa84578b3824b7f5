"""Summarise a py-spy ``--format raw`` profile (collapsed stacks).

    python bench/profile_summary.py bench/results/<stamp>-profile-<scenario>.txt [N]

Prints the functions with the most samples, by self time and by inclusive
time (a function counted once per stack), as a share of all samples.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path


def _short(frame: str) -> str:
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split('/')[-1]}"


def summarise(path: str, top: int = 25) -> str:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    out = [f"{total} samples", "", "self:"]
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    out += ["", "inclusive:"]
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(out)


if __name__ == "__main__":
    print(summarise(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25))
