#!/usr/bin/env python3
"""Write the configuration reference from the declarations in config/declared/.

Writes ``docs/reference/settings.md`` and the settings table of
``platform/README.md`` (between ``<!-- settings:begin -->`` and
``<!-- settings:end -->``). With ``--check`` it writes nothing and exits 1
when either file differs from what it would write, naming it.

Usage: ``python scripts/settings_reference.py [--check] [--root ROOT]``
(ROOT: the repository, by default the one holding this script).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from config.declared.reference import reference, with_platform_table  # noqa: E402

REFERENCE = Path("docs/reference/settings.md")
GUIDE = Path("platform/README.md")


def expected(root: Path) -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    guide = (root / GUIDE).read_text(encoding="utf-8")
    return {root / REFERENCE: reference(), root / GUIDE: with_platform_table(guide)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--root", type=Path, default=REPO)
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected(args.root).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path.relative_to(args.root))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(args.root)}")
    for path in stale:
        print(
            f"{path} differs from the declarations in config/declared/: "
            "run python scripts/settings_reference.py",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
