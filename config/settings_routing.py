"""Routing's settings (README, "Routing, limits and usage guarantees"): the
weights of the terms a backend is scored by, and the bounds of the prefix
index. Kept apart from ``settings.py`` so that they can be read, and
tested, on their own."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured


def routing_settings(env: Any) -> dict[str, float]:
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
        "prefix_weight": env.float("SWITCHYARD_ROUTING_PREFIX_WEIGHT", default=1.0),
        "affinity_weight": env.float("SWITCHYARD_ROUTING_AFFINITY_WEIGHT", default=0.5),
        "load_weight": env.float("SWITCHYARD_ROUTING_LOAD_WEIGHT", default=1.0),
        "load_scale": env.float("SWITCHYARD_ROUTING_LOAD_SCALE", default=8.0),
        "balance_weight": env.float("SWITCHYARD_ROUTING_BALANCE_WEIGHT", default=1.0),
        "recent_seconds": env.float("SWITCHYARD_ROUTING_RECENT_SECONDS", default=30.0),
        "prefix_blocks": env.int("SWITCHYARD_ROUTING_PREFIX_BLOCKS", default=65536),
        "prefix_ttl_seconds": env.float("SWITCHYARD_ROUTING_PREFIX_TTL_SECONDS", default=3600.0),
    }
    negative = [name for name, value in values.items() if value < 0]
    if (
        negative
        or values["load_scale"] <= 0
        or values["prefix_blocks"] < 1
        or not values["recent_seconds"]
    ):
        raise ImproperlyConfigured(
            "SWITCHYARD_ROUTING_* must be non-negative, with LOAD_SCALE above 0 and "
            f"PREFIX_BLOCKS at least 1 (got {values})."
        )
    return values
