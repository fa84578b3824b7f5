"""Creating an organisation and changing its settings: its name, retention,
the default limits and spend limits of its keys, whether requests may
name their own MCP servers, and its file quota."""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from accounts.audit import CLI, Actor, audit_record
from accounts.limits import SPEND_FIELDS, audit_value, spend_limit_clean
from accounts.models import Organisation
from accounts.signals import organisation_settings_changed
from accounts.validation import (
    Check,
    choice_field,
    fields_clean,
    flag_field,
    optional_count,
    required_count,
    text_field,
)


@transaction.atomic
def organisation_ensure(
    *, slug: str, name: str | None = None, actor: Actor = CLI
) -> tuple[Organisation, bool]:
    """Create the organisation, or rename it; idempotent, for provisioning."""
    try:
        validate_slug(slug)
    except ValidationError as exc:
        raise ValidationError({"slug": exc.messages}) from exc
    org, created = Organisation.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    if created:
        audit_record(organisation=org, actor=actor, action="organisation.create", target=org.name)
    elif name and org.name != name:
        before = org.name
        org.name = name
        org.save(update_fields=["name"])
        audit_record(
            organisation=org,
            actor=actor,
            action="organisation.settings",
            target=org.name,
            details={"changed": {"name": [before, name]}},
        )
    return org, created


def currency_field(field: str, value: object) -> str:
    """An ISO 4217 code: three letters, kept in capitals."""
    code = value.strip().upper() if isinstance(value, str) else ""
    if len(code) != 3 or not code.isascii() or not code.isalpha():
        raise ValidationError({field: "A currency is a three-letter ISO 4217 code, e.g. USD."})
    return code


# The settings a change may name, in the order the console shows them.
SETTINGS_CHECKS: dict[str, Check] = {
    "name": lambda field, value: text_field(
        value, field=field, message="The organisation needs a name."
    ),
    "retention_policy": lambda field, value: choice_field(
        value,
        field=field,
        choices=Organisation.Retention.values,
        message="Pick one of the retention policies.",
    ),
    "store_ttl_hours": required_count,
    "usage_retention_days": required_count,
    # Empty: no default limit for the organisation's keys.
    "default_rpm": optional_count,
    "default_tpm": optional_count,
    "default_concurrency": optional_count,
    "currency": currency_field,
    **dict.fromkeys(SPEND_FIELDS, spend_limit_clean),
    # Bytes of uploaded files it may keep; empty: SWITCHYARD_FILES_QUOTA_BYTES.
    "file_quota_bytes": optional_count,
    # Off: a request's mcp tool reaches only the registered servers.
    "allow_client_mcp_servers": lambda field, value: flag_field(value, field=field),
}
SETTINGS_FIELDS = tuple(SETTINGS_CHECKS)


@transaction.atomic
def organisation_settings_update(
    *, organisation: Organisation, actor: Actor, data: Mapping[str, object]
) -> Organisation:
    """Change some of the organisation's settings (only the keys given); a
    change that changes nothing writes nothing.

    Every key of the organisation carries its limits and retention in the
    API's cache, hence the signal."""
    clean = fields_clean(data, SETTINGS_CHECKS)
    organisation = Organisation.objects.select_for_update().get(pk=organisation.pk)
    changes = {
        field: [audit_value(getattr(organisation, field)), audit_value(value)]
        for field, value in clean.items()
        if getattr(organisation, field) != value
    }
    if not changes:
        return organisation
    for field in changes:
        setattr(organisation, field, clean[field])
    organisation.save(update_fields=list(changes))
    organisation_settings_changed.send(sender=Organisation, organisation_id=organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="organisation.settings",
        target=organisation.name,
        details={"changed": changes},
    )
    return organisation
