"""The ``mcp_servers`` and the ``web_search`` provider of an organisation in
``manage.py apply``'s file
(``admin_api.provision``): validated by the management API's serializer and
written by the MCP server services, compared first so that a file applied
twice changes nothing.

Secrets are never written in the file: ``authorization_env: NAME`` names
the environment variable holding the authorization, and ``headers_env``
maps each header name to the variable holding its value. ``allow_private:
true`` is taken, as for backends: whoever runs ``apply`` is platform staff.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from rest_framework import serializers

from accounts.audit import CLI
from accounts.models import Organisation
from admin_api.errors import first_error, from_service
from admin_api.provision_plan import Plan, ProvisionError
from admin_api.serializers.mcp import McpServerSerializer
from admin_api.serializers.web_search import WebSearchProviderSerializer
from responses_api.catalogue.mcp_entries import mcp_headers
from responses_api.catalogue.services.mcp_servers import (
    mcp_server_create,
    mcp_server_delete,
    mcp_server_update,
)
from responses_api.catalogue.services.web_search import (
    web_search_bind,
    web_search_provider_of,
    web_search_unbind,
)
from responses_api.models import McpServer
from responses_api.runtime.secrets import decrypt


def _refusal(path: str, exc: serializers.ValidationError) -> ProvisionError:
    param, text = first_error(exc.detail) or ("", "Invalid.")
    return ProvisionError(f"{path}.{param}: {text}" if param else f"{path}: {text}")


def _call(path: str, write: Callable[..., Any], /, **kwargs: Any) -> Any:
    try:
        return write(**kwargs)
    except ValidationError as exc:
        raise _refusal(path, from_service(exc)) from None


def _variable(environ: Mapping[str, str], name: object, path: str) -> str:
    if not isinstance(name, str) or name not in environ:
        raise ProvisionError(f"{path}: the variable {name} is not set.")
    return environ[name]


def _secrets_from_environment(data: dict[str, Any], path: str, environ: Mapping[str, str]) -> None:
    for inline in ("authorization", "headers"):
        if inline in data:
            raise ProvisionError(
                f"{path}.{inline}: never write a secret in the file; put it in an environment "
                f"variable and name that with {inline}_env."
            )
    if "authorization_env" in data:
        name = data.pop("authorization_env")
        data["authorization"] = _variable(environ, name, f"{path}.authorization_env")
    if "headers_env" in data:
        names = data.pop("headers_env")
        if not isinstance(names, dict):
            raise ProvisionError(f"{path}.headers_env: a mapping of header names to variables.")
        data["headers"] = {
            header: _variable(environ, name, f"{path}.headers_env.{header}")
            for header, name in names.items()
        }


def mcp_server_apply(
    entry: dict[str, Any],
    path: str,
    plan: Plan,
    organisation: Organisation,
    environ: Mapping[str, str],
) -> str:
    """Create or update one declared server; its label."""
    data = dict(entry)
    _secrets_from_environment(data, path, environ)
    allow_private = data.pop("allow_private", None)
    if allow_private is not None and not isinstance(allow_private, bool):
        raise ProvisionError(f"{path}.allow_private: true or false.")
    serializer = McpServerSerializer(data=data, context={"organisation": organisation})
    if not serializer.is_valid():
        raise _refusal(path, serializers.ValidationError(serializer.errors))
    clean = dict(serializer.validated_data)
    if allow_private is not None:
        clean["allow_private"] = allow_private
    label = clean["label"]
    name = f"{organisation.slug}/{label}"
    server = McpServer.objects.filter(organisation=organisation, label=label).first()
    if server is None:
        _call(path, mcp_server_create, organisation=organisation, actor=CLI, **clean)
        plan.add("create", "mcp_server", name)
        return str(label)
    changed = {key: value for key, value in clean.items() if _differs(server, key, value)}
    if changed:
        _call(path, mcp_server_update, server=server, actor=CLI, data=changed)
    plan.add("update" if changed else "unchanged", "mcp_server", name, sorted(changed))
    return str(label)


def _differs(server: McpServer, key: str, value: Any) -> bool:
    if key == "headers":
        return mcp_headers(server) != (value or {})
    if key == "authorization":
        return decrypt(server.authorization_encrypted) != (value or "").strip()
    if key in ("allowed_tools", "approval_exceptions") and value is not None:
        value = list(dict.fromkeys(name.strip() for name in value))
    if key in ("server_url", "description"):
        value = value.strip()
    return bool(getattr(server, key) != value)


def mcp_servers_prune(plan: Plan, organisation: Organisation, *, kept: list[str]) -> None:
    for server in McpServer.objects.filter(organisation=organisation).exclude(label__in=kept):
        mcp_server_delete(server=server, actor=CLI)
        plan.add("delete", "mcp_server", f"{organisation.slug}/{server.label}")


def web_search_apply(
    entry: object,
    path: str,
    plan: Plan,
    organisation: Organisation,
    environ: Mapping[str, str],
) -> None:
    """Bind the organisation's declared web search provider (``web_search``):
    its key from ``api_key_env``, never the file. With ``prune``, an
    organisation whose entry leaves it out is unbound (``web_search_prune``)."""
    if not isinstance(entry, dict):
        raise ProvisionError(f"{path}: a mapping of the provider's fields.")
    data = dict(entry)
    if "api_key" in data:
        raise ProvisionError(
            f"{path}.api_key: never write a key in the file; put it in an environment "
            "variable and name that with api_key_env."
        )
    if "api_key_env" in data:
        data["api_key"] = _variable(environ, data.pop("api_key_env"), f"{path}.api_key_env")
    allow_private = data.pop("allow_private", None)
    if allow_private is not None and not isinstance(allow_private, bool):
        raise ProvisionError(f"{path}.allow_private: true or false.")
    serializer = WebSearchProviderSerializer(data=data, partial=True)
    if not serializer.is_valid():
        raise _refusal(path, serializers.ValidationError(serializer.errors))
    clean = dict(serializer.validated_data)
    if allow_private is not None:
        clean["allow_private"] = allow_private
    current = web_search_provider_of(organisation)
    if current is not None:
        key = clean.get("api_key")
        if key is not None and decrypt(current.api_key_encrypted) == key.strip():
            clean.pop("api_key")
        clean = {k: v for k, v in clean.items() if k == "api_key" or getattr(current, k) != v}
        if not clean:
            plan.add("unchanged", "web_search", organisation.slug)
            return
    _call(path, web_search_bind, organisation=organisation, actor=CLI, data=clean)
    plan.add(
        "create" if current is None else "update",
        "web_search",
        organisation.slug,
        [] if current is None else sorted(clean),
    )


def web_search_prune(plan: Plan, organisation: Organisation) -> None:
    if web_search_unbind(organisation=organisation, actor=CLI):
        plan.add("delete", "web_search", organisation.slug)
