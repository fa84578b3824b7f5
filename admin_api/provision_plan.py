"""What ``manage.py apply`` reports (``admin_api.provision``): the plan of
changes, one line per entry, and the error that names a bad entry."""

from __future__ import annotations

from dataclasses import dataclass, field


class ProvisionError(Exception):
    """A file entry that cannot be applied; the message names where."""


@dataclass(frozen=True, slots=True)
class Change:
    verb: str  # create, update, unchanged, delete
    kind: str
    name: str
    fields: tuple[str, ...] = ()

    def line(self) -> str:
        changed = f" ({', '.join(self.fields)})" if self.fields else ""
        return f"{self.verb:<9} {self.kind} {self.name}{changed}"


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    # (label, full key) of each API key created: shown once.
    secrets: list[tuple[str, str]] = field(default_factory=list)

    def add(self, verb: str, kind: str, name: str, fields: list[str] | None = None) -> None:
        self.changes.append(Change(verb, kind, name, tuple(fields or ())))

    def count(self, verb: str) -> int:
        return sum(1 for change in self.changes if change.verb == verb)
