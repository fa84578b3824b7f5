"""MCP servers: list, add, edit, remove. Headers are shown by name only."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.access import is_platform_staff
from accounts.audit import Actor
from console.forms.common import errors_onto
from console.forms.mcp import McpServerForm
from responses_api.access.objects import get_mcp_server_for_member, mcp_servers_for_member
from responses_api.catalogue.services.mcp_servers import (
    mcp_header_names,
    mcp_server_create,
    mcp_server_delete,
    mcp_server_update,
)


def mcp_server_list(request: HttpRequest, membership) -> HttpResponse:
    servers = [
        (server, mcp_header_names(server))
        for server in mcp_servers_for_member(membership=membership)
    ]
    return render(
        request,
        "console/mcp_servers.html",
        {"servers": servers, "client_servers": membership.organisation.allow_client_mcp_servers},
    )


@require_http_methods(["GET", "POST"])
def mcp_server_edit(request: HttpRequest, membership, server_id=None) -> HttpResponse:
    server = None
    if server_id is not None:
        server = get_mcp_server_for_member(membership=membership, server_id=server_id, manage=True)
    form = McpServerForm(
        request.POST or None, instance=server, staff=is_platform_staff(request.user)
    )
    if request.method == "POST" and form.is_valid():
        actor = Actor.console(membership.user)
        try:
            if server is None:
                saved = mcp_server_create(
                    organisation=membership.organisation, actor=actor, **form.service_data()
                )
            else:
                saved = mcp_server_update(server=server, actor=actor, data=form.service_data())
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            messages.success(request, f"MCP server “{saved.label}” saved.")
            return redirect("console:mcp_servers")
    context = {
        "form": form,
        "server": server,
        "header_names": mcp_header_names(server) if server else [],
        "has_authorization": bool(server and server.authorization_encrypted),
    }
    return render(request, "console/mcp_server_form.html", context)


@require_http_methods(["GET", "POST"])
def mcp_server_remove(request: HttpRequest, membership, server_id) -> HttpResponse:
    server = get_mcp_server_for_member(membership=membership, server_id=server_id, manage=True)
    if request.method == "POST":
        mcp_server_delete(server=server, actor=Actor.console(membership.user))
        messages.success(request, f"MCP server “{server.label}” removed.")
        return redirect("console:mcp_servers")
    return render(request, "console/mcp_server_delete.html", {"server": server})
