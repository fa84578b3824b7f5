"""How each kind of inference server wants thinking switched and budgeted.

SPEC §3: the dialect decides how reasoning and thinking budgets are passed.
Pure functions on the chat request body; no I/O.
"""

from __future__ import annotations

from typing import Any

DIALECTS = ("openai", "vllm", "sglang", "llamacpp", "ollama")

# The assistant-message field a server reads prior reasoning from. vLLM and
# SGLang take `reasoning_content` (vLLM also emits `reasoning` since 0.10);
# llama.cpp reads `reasoning_content`; Ollama's OpenAI layer uses `reasoning`.
REASONING_FIELD = {
    "openai": "reasoning_content",
    "vllm": "reasoning_content",
    "sglang": "reasoning_content",
    "llamacpp": "reasoning_content",
    "ollama": "reasoning",
}


def apply_reasoning(
    body: dict[str, Any], dialect: str, *, effort: str | None, budget: int | None
) -> bool:
    """Switch thinking on or off in ``body``; returns whether a budget was sent."""
    thinking = effort in {"low", "medium", "high", "xhigh"}
    if dialect == "openai":
        # A plain OpenAI-compatible server: say what the client said, nothing more.
        if effort is not None:
            body["reasoning_effort"] = "high" if effort == "xhigh" else effort
        return False
    if dialect in {"vllm", "sglang", "llamacpp"}:
        # Qwen3, DeepSeek and GLM templates read `enable_thinking` (and some
        # `thinking`) from the chat template kwargs.
        kwargs = body.setdefault("chat_template_kwargs", {})
        kwargs["enable_thinking"] = thinking
        kwargs["thinking"] = thinking
        if dialect == "sglang":
            body["separate_reasoning"] = True
        if thinking and effort:
            body["reasoning_effort"] = "high" if effort == "xhigh" else effort
        if thinking and budget is not None:
            if dialect == "vllm":
                body["thinking_token_budget"] = budget
            elif dialect == "sglang":
                body["thinking_budget"] = budget
            else:
                body["thinking_budget_tokens"] = budget
            return True
        return False
    if dialect == "ollama":
        body["think"] = thinking
        if thinking and effort:
            body["reasoning_effort"] = "high" if effort == "xhigh" else effort
        return False
    raise ValueError(f"unknown dialect {dialect!r}")
