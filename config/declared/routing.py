"""Routing: the weights a backend is scored by, and the prefix index's bounds
(``config/settings_routing.py`` checks them together)."""

from __future__ import annotations

from config.declared.spec import UPSTREAM, Setting

TITLE = "Routing"

SETTINGS = (
    Setting(
        "SWITCHYARD_ROUTING_PREFIX_WEIGHT",
        "float",
        1.0,
        "Weight of the part of the prompt a backend is expected to have cached.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_AFFINITY_WEIGHT",
        "float",
        0.5,
        "Weight of having served the conversation (or its turn) last.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_LOAD_WEIGHT",
        "float",
        1.0,
        "Weight of a backend's load: its in-flight and waiting requests over its "
        "`max_concurrency`, plus the part of its KV cache or slots in use.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_LOAD_SCALE",
        "float",
        8.0,
        "The requests that make a backend without `max_concurrency` fully loaded (above 0).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_BALANCE_WEIGHT",
        "float",
        1.0,
        "Weight of how far a backend's share of recent requests is above an even share.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_RECENT_SECONDS",
        "float",
        30.0,
        "The window, in seconds, of the recent requests the balance term counts.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_PREFIX_BLOCKS",
        "int",
        65536,
        "Prompt blocks the prefix index keeps per organisation and backend (at least 1).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_PREFIX_TTL_SECONDS",
        "float",
        3600.0,
        "Seconds a prompt block stays in the prefix index after it was last sent.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_ROUTING_KV_EVENTS_BLOCKS",
        "int",
        262144,
        "Blocks the index of a precise backend's KV-cache events keeps per endpoint and "
        "process (at least 1), oldest stored dropped first.",
        UPSTREAM,
    ),
)
