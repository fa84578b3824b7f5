"""The audit trail: who changed what, through which door.

Every service that changes state records one entry, so the trail is the same
whether the change came from the console, the REST API or a management
command. A command has no signed-in person: its actor is :data:`CLI`. On the
management API the actor is the admin key that called it, named in the entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accounts.models import AdminApiKey, AuditEntry, Organisation

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a change: a person (console), an admin key (management
    API), or nobody in particular when it is the command line."""

    user: User | None
    source: AuditEntry.Source
    admin_key: AdminApiKey | None = None

    @classmethod
    def console(cls, user: User) -> Actor:
        return cls(user=user, source=AuditEntry.Source.CONSOLE)

    @classmethod
    def api(cls, user: User) -> Actor:
        return cls(user=user, source=AuditEntry.Source.API)

    @classmethod
    def admin_api(cls, admin_key: AdminApiKey) -> Actor:
        return cls(user=None, source=AuditEntry.Source.API, admin_key=admin_key)

    @classmethod
    def scim(cls, admin_key: AdminApiKey) -> Actor:
        """An identity provider provisioning over SCIM with ``admin_key``."""
        return cls(user=None, source=AuditEntry.Source.SCIM, admin_key=admin_key)

    @property
    def name(self) -> str:
        if self.admin_key is not None:
            return f"admin key {self.admin_key.name} ({self.admin_key.prefix}…)"[:200]
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
        admin_key=actor.admin_key,
        actor_name=actor.name,
        source=actor.source,
        action=action,
        target=target[:300],
        details=details or {},
    )
