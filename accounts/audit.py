"""The audit trail: who changed what, through which door.

Every service that changes state records one entry, so the trail is the same
whether the change came from the console, the REST API or a management
command. A command has no signed-in person: its actor is :data:`CLI`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accounts.models import AuditEntry, Organisation

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a change: a person (console, REST API), or nobody in
    particular when it is the command line."""

    user: User | None
    source: AuditEntry.Source

    @classmethod
    def console(cls, user: User) -> Actor:
        return cls(user=user, source=AuditEntry.Source.CONSOLE)

    @classmethod
    def api(cls, user: User) -> Actor:
        return cls(user=user, source=AuditEntry.Source.API)

    @property
    def name(self) -> str:
        return self.user.get_username() if self.user is not None else ""


# Whoever runs a management command: shell access, no login.
CLI = Actor(user=None, source=AuditEntry.Source.CLI)


def audit_record(
    *,
    organisation: Organisation | None,
    actor: Actor,
    action: str,
    target: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    """Record that ``actor`` did ``action`` to ``target``. ``details`` must
    never hold a secret (keys, passwords, upstream credentials).

    ``organisation`` is None for platform-wide changes (shared backends)."""
    return AuditEntry.objects.create(
        organisation=organisation,
        actor=actor.user,
        actor_name=actor.name,
        source=actor.source,
        action=action,
        target=target[:300],
        details=details or {},
    )
