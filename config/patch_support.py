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
