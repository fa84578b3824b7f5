"""Routing's settings (docs/operations/routing.md): the
weights of the terms a backend is scored by, and the bounds of the prefix
index. Kept apart from ``settings.py`` so that they can be read, and
tested, on their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def routing_settings(read: Callable[[str], Any]) -> dict[str, float]:
    """``SWITCHYARD_ROUTING``, from the ``SWITCHYARD_ROUTING_*`` variables.

    A backend's score is ``prefix_weight`` × the part of the prompt it is
    expected to have cached, plus ``affinity_weight`` when it served the
    conversation (or its turn) last, minus ``load_weight`` × its load: its
    in-flight requests and the requests it reports waiting, over its
    ``max_concurrency`` (``load_scale`` when it has none), plus the part of
    its KV cache (or of its slots) in use, minus ``balance_weight`` × how far
    its share of the requests placed in the last ``recent_seconds`` is above
    an even share."""
    values = {
        "prefix_weight": read("SWITCHYARD_ROUTING_PREFIX_WEIGHT"),
        "affinity_weight": read("SWITCHYARD_ROUTING_AFFINITY_WEIGHT"),
        "load_weight": read("SWITCHYARD_ROUTING_LOAD_WEIGHT"),
        "load_scale": read("SWITCHYARD_ROUTING_LOAD_SCALE"),
        "balance_weight": read("SWITCHYARD_ROUTING_BALANCE_WEIGHT"),
        "recent_seconds": read("SWITCHYARD_ROUTING_RECENT_SECONDS"),
        "prefix_blocks": read("SWITCHYARD_ROUTING_PREFIX_BLOCKS"),
        "prefix_ttl_seconds": read("SWITCHYARD_ROUTING_PREFIX_TTL_SECONDS"),
        "kv_events_blocks": read("SWITCHYARD_ROUTING_KV_EVENTS_BLOCKS"),
    }
    negative = [name for name, value in values.items() if value < 0]
    if (
        negative
        or values["load_scale"] <= 0
        or values["prefix_blocks"] < 1
        or values["kv_events_blocks"] < 1
        or not values["recent_seconds"]
    ):
        raise ImproperlyConfigured(
            "SWITCHYARD_ROUTING_* must be non-negative, with LOAD_SCALE above 0 and "
            f"PREFIX_BLOCKS and KV_EVENTS_BLOCKS at least 1 (got {values})."
        )
    return values
