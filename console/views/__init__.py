"""The web console (docs/admin/console.md): one module per area; access goes through
:mod:`accounts.access` and :mod:`responses_api.access.objects`."""
