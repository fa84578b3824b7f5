"""The web console (SPEC §7): one module per area; access goes through
:mod:`accounts.access` and :mod:`responses_api.access`."""
