"""``model_catalog.json`` of the Codex kit: tells the Codex CLI (0.171) what
each Switchyard model can do (context window, reasoning efforts, the
apply_patch tool), in the shape ``codex debug models`` prints, so that Codex
treats a model it does not know as it treats its own.

Computed from objects already loaded: no database, file or network access.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from responses_api.catalogue.codex_prompt import BASE_INSTRUCTIONS

if TYPE_CHECKING:
    from responses_api.models import ServedModel

# Used when a model has no context window set.
FALLBACK_CONTEXT_WINDOW = 128_000
AUTO_COMPACT_PERCENT = 90

# What Codex shows next to each reasoning effort (its own wording where it has one).
EFFORT_DESCRIPTIONS = {
    "minimal": "Minimal reasoning for the fastest responses",
    "low": "Fast responses with lighter reasoning",
    "medium": "Balances speed and reasoning depth for everyday tasks",
    "high": "Greater reasoning depth for complex problems",
    "xhigh": "Extra high reasoning depth for complex problems",
}


def reasoning_levels(model: ServedModel) -> list[dict[str, str]]:
    return [
        {"effort": effort, "description": EFFORT_DESCRIPTIONS.get(effort, effort)}
        for effort in model.effort_levels()
    ]


def catalog_entry(model: ServedModel, *, priority: int = 1) -> dict[str, Any]:
    """One ``models`` entry, in the shape ``codex debug models`` prints, with the
    defaults that suit a model served through Switchyard (no OpenAI-only tools)."""
    window = model.context_window or FALLBACK_CONTEXT_WINDOW
    default_effort = model.effort_default()
    return {
        "slug": model.public_id,
        "display_name": model.public_id,
        "description": f"{model.public_id}, served by Switchyard",
        "default_reasoning_level": default_effort,
        "supported_reasoning_levels": reasoning_levels(model),
        "shell_type": "unified_exec",
        "visibility": "list",
        "supported_in_api": True,
        "priority": priority,
        "additional_speed_tiers": [],
        "service_tiers": [],
        "availability_nux": None,
        "upgrade": None,
        "base_instructions": BASE_INSTRUCTIONS,
        "model_messages": None,
        "include_skills_usage_instructions": False,
        "include_plugin_usage_instructions": False,
        "include_apps_usage_instructions": False,
        "default_reasoning_summary": "none",
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": "freeform",
        "web_search_tool_type": "text",
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "supports_image_detail_original": False,
        "context_window": window,
        "max_context_window": window,
        "auto_compact_token_limit": window * AUTO_COMPACT_PERCENT // 100,
        "comp_hash": None,
        "effective_context_window_percent": 95,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"] if model.supports_vision else ["text"],
        "supports_search_tool": False,
        "supports_experimental_context": False,
        "use_responses_lite": False,
        "supports_reasoning_effort_updates": False,
        "node_repl_auto_review_required": False,
        "node_repl_disabled": True,
    }


def model_catalog(models: Iterable[ServedModel]) -> dict[str, Any]:
    return {"models": [catalog_entry(model, priority=n) for n, model in enumerate(models, start=1)]}


def model_catalog_json(models: Iterable[ServedModel]) -> str:
    return json.dumps(model_catalog(models), indent=2, ensure_ascii=False) + "\n"
