from django.contrib.auth import views as auth_views
from django.urls import path

from console.views import (
    admin_keys,
    backends,
    catalogue,
    codex,
    dashboard,
    files,
    keys,
    mcp_servers,
    organisation,
    sessions,
    signin,
    support,
    usage,
    vector_stores,
    web_search,
)
from console.views.base import member_view, signed_in_view

app_name = "console"

urlpatterns = [
    path("login/", signin.SignInView.as_view(), name="login"),
    # Single sign-on: the provider's redirect URL is oidc/callback/.
    path("oidc/start/", signin.SsoStartView.as_view(), name="oidc_start"),
    path("oidc/callback/", signin.SsoCallbackView.as_view(), name="oidc_callback"),
    path("logout/", signin.SignOutView.as_view(), name="logout"),
    path("account/password/", signin.PasswordChangePage.as_view(), name="password"),
    path(
        "account/password/done/",
        auth_views.PasswordChangeDoneView.as_view(template_name="console/password_done.html"),
        name="password_done",
    ),
    path("", member_view()(dashboard.dashboard_page), name="dashboard"),
    path("organisation/switch/", signed_in_view(organisation.organisation_switch), name="switch"),
    # API keys
    path("keys/", member_view()(keys.key_list), name="keys"),
    path("keys/new/", member_view("key_create")(keys.key_create), name="key_create"),
    path("keys/<uuid:key_id>/edit/", member_view()(keys.key_edit), name="key_edit"),
    path("keys/<uuid:key_id>/revoke/", member_view()(keys.key_revoke), name="key_revoke"),
    path("keys/<uuid:key_id>/codex/", member_view()(codex.key_codex), name="key_codex"),
    # Admin API keys (the management API's)
    path(
        "admin-keys/", member_view("admin_key_manage")(admin_keys.admin_key_list), name="admin_keys"
    ),
    path(
        "admin-keys/new/",
        member_view("admin_key_manage")(admin_keys.admin_key_new),
        name="admin_key_create",
    ),
    path(
        "admin-keys/<uuid:key_id>/revoke/",
        member_view("admin_key_manage")(admin_keys.admin_key_revoke_page),
        name="admin_key_revoke",
    ),
    # Backends
    path("backends/", member_view()(backends.backend_list), name="backends"),
    path(
        "backends/new/", member_view("backend_manage")(backends.backend_edit), name="backend_create"
    ),
    path("backends/<uuid:backend_id>/", member_view()(backends.backend_detail), name="backend"),
    path(
        "backends/<uuid:backend_id>/edit/",
        member_view()(backends.backend_edit),
        name="backend_edit",
    ),
    path(
        "backends/<uuid:backend_id>/test/",
        member_view()(backends.backend_check),
        name="backend_test",
    ),
    # Models
    path("models/", member_view()(catalogue.model_list), name="models"),
    path("models/new/", member_view("model_manage")(catalogue.model_edit), name="model_create"),
    path("models/<uuid:model_id>/", member_view()(catalogue.model_edit), name="model_edit"),
    path(
        "models/<uuid:model_id>/deploy/", member_view()(catalogue.model_deploy), name="model_deploy"
    ),
    path(
        "models/<uuid:model_id>/check/",
        member_view()(catalogue.model_check_start),
        name="model_check",
    ),
    path(
        "models/<uuid:model_id>/undeploy/<uuid:backend_id>/",
        member_view()(catalogue.model_undeploy),
        name="model_undeploy",
    ),
    # MCP servers
    # Files (the Files API's)
    path("files/", member_view()(files.file_list), name="files"),
    path(
        "files/<str:file_id>/delete/",
        member_view("file_manage")(files.file_remove),
        name="file_remove",
    ),
    path("vector-stores/", member_view()(vector_stores.store_list), name="vector_stores"),
    path(
        "vector-stores/<str:store_id>/",
        member_view()(vector_stores.store_detail),
        name="vector_store",
    ),
    path("mcp-servers/", member_view()(mcp_servers.mcp_server_list), name="mcp_servers"),
    path(
        "mcp-servers/new/",
        member_view("mcp_manage")(mcp_servers.mcp_server_edit),
        name="mcp_server_create",
    ),
    path(
        "mcp-servers/<uuid:server_id>/edit/",
        member_view()(mcp_servers.mcp_server_edit),
        name="mcp_server_edit",
    ),
    path(
        "mcp-servers/<uuid:server_id>/remove/",
        member_view()(mcp_servers.mcp_server_remove),
        name="mcp_server_remove",
    ),
    # Web search
    path("web-search/", member_view("mcp_manage")(web_search.web_search_edit), name="web_search"),
    path(
        "web-search/remove/",
        member_view("mcp_manage")(web_search.web_search_remove),
        name="web_search_remove",
    ),
    # Usage and traces
    path("usage/", member_view()(usage.usage_list), name="usage"),
    path("usage/export.csv", member_view()(usage.usage_export), name="usage_export"),
    # A client's session id is free text (bounded), slashes included.
    path("usage/sessions/<path:session_id>/", member_view()(sessions.session_page), name="session"),
    path("trace/", signed_in_view(usage.trace_search), name="trace_search"),
    path("trace/<uuid:request_id>/", member_view()(usage.trace_page), name="trace"),
    # Members, settings, audit
    path("members/", member_view()(organisation.members_page), name="members"),
    path(
        "members/add/",
        member_view("member_manage")(organisation.member_add_page),
        name="member_add",
    ),
    path(
        "members/invite/",
        member_view("member_manage")(organisation.member_invite),
        name="member_invite",
    ),
    path(
        "members/<uuid:member_id>/role/",
        member_view()(organisation.member_role),
        name="member_role",
    ),
    path(
        "members/<uuid:member_id>/remove/",
        member_view()(organisation.member_delete),
        name="member_remove",
    ),
    path(
        "invitations/<uuid:invitation_id>/withdraw/",
        member_view()(organisation.invitation_cancel),
        name="invitation_withdraw",
    ),
    path("invitation/<str:token>/", organisation.invitation_accept_page, name="invitation_accept"),
    path("settings/", member_view()(organisation.settings_page), name="settings"),
    path(
        "settings/stored-responses/delete/",
        member_view("settings_manage")(organisation.stored_delete_page),
        name="stored_delete",
    ),
    path("audit/", member_view("audit_view")(organisation.audit_page), name="audit"),
    # Platform support staff
    path("support/", signed_in_view(support.support_page), name="support"),
    path(
        "support/dead-letters/",
        signed_in_view(support.deadletters_page),
        name="support_deadletters",
    ),
    path(
        "support/trace/<uuid:request_id>/",
        signed_in_view(usage.support_trace_page),
        name="support_trace",
    ),
]
