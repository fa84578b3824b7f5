"""The web console (SPEC §7): one module per area; access goes through
:mod:`accounts.access`."""
