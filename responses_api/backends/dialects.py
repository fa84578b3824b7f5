"""How each kind of inference server wants thinking switched and budgeted.

SPEC §3: the dialect decides how reasoning and thinking budgets are passed.
Pure functions on the chat request body; no I/O.

What each server accepts (from their OpenAI-compatible request models; all
four ignore request fields they do not know, which is what makes sending the
budget fields of newer versions safe against older ones):

- vLLM: ``chat_template_kwargs`` reach the Jinja template (Qwen3/GLM read
  ``enable_thinking``, DeepSeek-V3.1 reads ``thinking``); ``reasoning_effort``
  is read by gpt-oss (harmony) models; ``thinking_token_budget`` is the
  per-request budget of recent versions. Unknown fields are logged and ignored.
- SGLang: the same ``chat_template_kwargs``; ``separate_reasoning`` asks for
  reasoning in ``reasoning_content`` rather than inline ``<think>`` text;
  ``thinking_budget`` is an assumption (SGLang budgets thinking through a
  custom logit processor; where absent the field is ignored).
- llama.cpp server (``--jinja``): ``chat_template_kwargs`` per request;
  ``thinking_budget_tokens`` is an assumption for the per-request form of
  ``--reasoning-budget``; ignored where unsupported.
- Ollama: its OpenAI layer maps ``reasoning_effort`` (including ``"none"``) to
  its ``think`` switch; ``think`` is also sent for versions that read it
  directly. No budget.
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
        elif not thinking:
            # Without it, thinking models served by Ollama think by default.
            body["reasoning_effort"] = "none"
        return False
    raise ValueError(f"unknown dialect {dialect!r}")
