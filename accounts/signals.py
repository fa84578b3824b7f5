"""What accounts announces to the apps above it.

The API keeps per-process caches of keys and of organisation settings;
accounts must not import the API, so its services send these signals and the
API connects to them (``responses_api.apps``)."""

from django.dispatch import Signal

# A key was revoked or its limits changed. Keyword argument: ``key_hash``.
api_key_changed = Signal()

# An organisation's settings changed (limits, retention), which every key of
# it carries. Keyword argument: ``organisation_id``.
organisation_settings_changed = Signal()
