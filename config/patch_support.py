"""What every server patch is made of (``config.patches`` lists them)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

logger = logging.getLogger("switchyard.server")


@dataclass(frozen=True)
class Patch:
    """Third-party attributes to replace, only if what they rely on is there."""

    name: str
    written_for: dict[str, str]
    # Why the internals it relies on are not there (empty: they are).
    check: Callable[[], list[str]]
    # (owner, attribute, value) to set.
    build: Callable[[], list[tuple[Any, str, Any]]]
    # What it bounds that stock daphne does not (empty: it only saves work).
    # In production such a patch is applied or explicitly dropped, never
    # left out for a version it was not written for.
    protects: str = ""

    def problems(self) -> list[str]:
        """Why this patch cannot be applied here: versions first, then attributes."""
        found = [
            f"{dist} is {installed}, not {wanted}"
            for dist, wanted in self.written_for.items()
            if (installed := version(dist)) != wanted
        ]
        return found or self.check()


def missing(owner: Any, *names: str) -> list[str]:
    return [f"{owner.__name__}.{n} is missing" for n in names if not hasattr(owner, n)]


def unused_by(function: Any, *names: str) -> list[str]:
    """The names among ``names`` that ``function``'s code no longer refers to."""
    code = function.__code__
    return [
        f"{function.__qualname__} no longer uses {n}"
        for n in names
        if n not in code.co_names and n not in code.co_varnames
    ]


class Refused(Exception):
    """Patches that bound what a client can make the process hold cannot be
    applied, and production does not serve without them unless told to."""


def refusal(env: str, blocked: list[tuple[Patch, list[str]]], drop_value: str) -> str:
    """What a production start refused says: each patch, why, and both ways out."""
    lines = [
        "Refusing to start: SWITCHYARD_PRODUCTION is set, and these server patches, "
        "which bound what a client can make the process hold, cannot be applied to "
        "the installed versions:"
    ]
    pins: dict[str, str] = {}
    for patch, problems in blocked:
        written_for = ", ".join(f"{d} {v}" for d, v in patch.written_for.items())
        lines.append(f"  {patch.name} ({patch.protects}), written for {written_for}:")
        lines.append(f"    {'; '.join(problems)}")
        pins.update(patch.written_for)
    lines += [
        "Either pin the versions they were written for:",
        "  " + " ".join(f"{d}=={v}" for d, v in pins.items()),
        "or drop them explicitly, behind a reverse proxy that enforces the same limits "
        "(platform/nginx/switchyard.conf):",
        f"  {env}={drop_value}",
    ]
    return "\n".join(lines)
