"""The audit trail: one entry per state-changing console action."""

from __future__ import annotations

from typing import Any

from accounts.models import AuditEntry, Organisation


def audit_record(
    *,
    organisation: Organisation,
    actor,
    action: str,
    target: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    """Record that ``actor`` did ``action`` to ``target``. ``details`` must
    never hold a secret (keys, passwords, upstream credentials)."""
    return AuditEntry.objects.create(
        organisation=organisation,
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_name=actor.get_username() if actor is not None and actor.is_authenticated else "",
        action=action,
        target=target[:300],
        details=details or {},
    )
