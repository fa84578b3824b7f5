"""The web console (README, "Console"): one module per area; access goes through
:mod:`accounts.access` and :mod:`responses_api.access.objects`."""
