"""The search provider an organisation binds to ``web_search``: the one
write path of the console, the management API and ``apply -f``. The API key
is write-only and stored encrypted; only platform staff may let a provider
sit on a private address, as for backends and MCP servers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.audit import Actor, audit_record
from accounts.models import Organisation
from accounts.validation import FieldErrors, choice_field, flag_field, refuse_unknown
from responses_api.catalogue import catalog
from responses_api.catalogue.addresses import base_url_error
from responses_api.catalogue.mcp_rules import HEADER_VALUE_MAX, label_error
from responses_api.catalogue.services.backends import may_allow_private
from responses_api.models import WebSearchProvider
from responses_api.runtime.secrets import encrypt

PROVIDER_FIELDS = ("kind", "base_url", "mcp_server_label", "mcp_tool", "enabled", "allow_private")
TOOL_NAME_MAX = 128


def web_search_provider_of(organisation: Organisation) -> WebSearchProvider | None:
    """The organisation's binding: another organisation's is never it."""
    return WebSearchProvider.objects.filter(organisation=organisation).first()


def _clean(values: dict[str, Any], *, check_address: bool) -> dict[str, Any]:
    errors = FieldErrors()
    kind = errors.check(
        lambda: choice_field(values["kind"], field="kind", choices=WebSearchProvider.Kind.values),
        None,
    )
    allow_private = errors.check(
        lambda: flag_field(values["allow_private"], field="allow_private"), False
    )
    errors.check(lambda: flag_field(values["enabled"], field="enabled"), None)
    url = values["base_url"].strip() if isinstance(values["base_url"], str) else None
    label = values["mcp_server_label"]
    tool = values["mcp_tool"]
    if kind == WebSearchProvider.Kind.MCP:
        url = ""
        if message := label_error(label):
            errors.add("mcp_server_label", message)
        if not isinstance(tool, str) or not tool.strip() or len(tool) > TOOL_NAME_MAX:
            errors.add("mcp_tool", f"The search tool's name, at most {TOOL_NAME_MAX} characters.")
    elif kind is not None:
        label, tool = "", ""
        if url is None:
            errors.add("base_url", "Use an http:// or https:// URL.")
        elif message := base_url_error(url, allow_private=allow_private if check_address else None):
            errors.add("base_url", message.replace("backend", "search provider"))
    errors.raise_any()
    return {**values, "base_url": url, "mcp_server_label": label, "mcp_tool": tool.strip()}


def _api_key(provider: WebSearchProvider, data: Mapping[str, Any]) -> str | None:
    """A value replaces the key, None removes it, absent or empty keeps it;
    what changed is named, never the value."""
    key = data.get("api_key", "")
    if key is None:
        if provider.api_key_encrypted:
            provider.api_key_encrypted = ""
            return "cleared"
        return None
    if not isinstance(key, str) or len(key) > HEADER_VALUE_MAX:
        raise ValidationError({"api_key": f"Text of at most {HEADER_VALUE_MAX} characters."})
    if any(ord(c) < 32 for c in key):
        raise ValidationError({"api_key": "No line break or control character."})
    if key.strip():
        provider.api_key_encrypted = encrypt(key.strip())
        return "set"
    return None


@transaction.atomic
def web_search_bind(
    *, organisation: Organisation, actor: Actor, data: Mapping[str, Any]
) -> WebSearchProvider:
    """Bind the organisation's search provider, or change its binding (only
    the keys given; a first binding needs ``kind`` and where it searches).
    ``allow_private`` is for platform staff only, and a new URL given by
    anyone else drops it. A change that changes nothing writes nothing."""
    refuse_unknown(data, (*PROVIDER_FIELDS, "api_key"))
    provider = (
        WebSearchProvider.objects.select_for_update().filter(organisation=organisation).first()
    )
    created = provider is None
    if provider is None:
        provider = WebSearchProvider(organisation=organisation, kind="")
    current = {f: getattr(provider, f) for f in PROVIDER_FIELDS}
    wanted = {f: data[f] for f in PROVIDER_FIELDS if f in data}
    staff = may_allow_private(actor)
    if (
        not staff
        and wanted.get("allow_private", current["allow_private"]) != current["allow_private"]
    ):
        raise ValidationError({"allow_private": "Only platform staff may change this."})
    new_url = "base_url" in wanted and str(wanted["base_url"]).strip() != current["base_url"]
    if new_url and not staff:
        wanted["allow_private"] = False
    values = _clean({**current, **wanted}, check_address=new_url or created)
    changed = [f for f in PROVIDER_FIELDS if values[f] != current[f]]
    for name in changed:
        setattr(provider, name, values[name])
    key = _api_key(provider, data)
    if not changed and key is None and not created:
        return provider
    provider.updated_at = timezone.now()
    provider.save()
    catalog.forget(organisation.pk)
    details: dict[str, Any] = {f: values[f] for f in changed}
    if key is not None:
        details["api_key"] = key
    audit_record(
        organisation=organisation,
        actor=actor,
        action="web_search.bind" if created else "web_search.update",
        target=provider.get_kind_display(),
        details={"web_search_provider_id": str(provider.id), **details},
    )
    return provider


@transaction.atomic
def web_search_unbind(*, organisation: Organisation, actor: Actor) -> bool:
    """Remove the binding: ``web_search`` is dropped with a notice again.
    False when there was none."""
    provider = web_search_provider_of(organisation)
    if provider is None:
        return False
    kind, provider_id = provider.get_kind_display(), str(provider.id)
    provider.delete()
    catalog.forget(organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="web_search.unbind",
        target=kind,
        details={"web_search_provider_id": provider_id},
    )
    return True
