"""How each kind of inference server wants thinking switched and budgeted.

The dialect decides how reasoning and thinking budgets are passed (docs/api/backends.md).
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

# The servers that count a chat request's tokens (``POST /v1/responses/input_tokens``,
# compaction thresholds), at the root of their address: vLLM's ``/tokenize``
# takes the chat request itself ("chat"); llama-server's takes text, so its
# ``/apply-template`` renders the messages first ("template"). The others
# have no tokenizer endpoint, and the input is estimated.
TOKENIZE = {"vllm": "chat", "llamacpp": "template"}


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
    if dialect == "llamacpp":
        return _llamacpp_reasoning(body, thinking=thinking, effort=effort, budget=budget)
    if dialect in {"vllm", "sglang"}:
        # Qwen3, DeepSeek and GLM templates read `enable_thinking` (and some
        # `thinking`) from the chat template kwargs.
        kwargs = _template_kwargs(body)
        kwargs["enable_thinking"] = thinking
        kwargs["thinking"] = thinking
        if dialect == "sglang":
            body["separate_reasoning"] = True
        if thinking and effort:
            body["reasoning_effort"] = "high" if effort == "xhigh" else effort
        if thinking and budget is not None:
            if dialect == "vllm":
                body["thinking_token_budget"] = budget
            else:
                body["thinking_budget"] = budget
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


def _template_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The body's own copy of ``chat_template_kwargs`` (a backend's extra_body
    may supply one; it is shared between requests and must not be changed)."""
    kwargs = dict(body.get("chat_template_kwargs") or {})
    body["chat_template_kwargs"] = kwargs
    return kwargs


def _llamacpp_reasoning(
    body: dict[str, Any], *, thinking: bool, effort: str | None, budget: int | None
) -> bool:
    # Measured against llama-server (llama.cpp b1-0c1e570, tools/server/server-common.cpp):
    # `enable_thinking` must be a JSON boolean (a string is a 400 "invalid type
    # for enable_thinking"); it switches the template's thinking block.
    kwargs = _template_kwargs(body)
    kwargs["enable_thinking"] = thinking
    kwargs["thinking"] = thinking
    # Split `<think>…</think>` into `reasoning_content` whatever
    # --reasoning-format the server was started with (`none` leaves the raw
    # tags in `content`, where they would reach output_text).
    body["reasoning_format"] = "deepseek"
    if thinking and effort:
        # Handed to the template as a kwarg (gpt-oss reads it).
        body["reasoning_effort"] = "high" if effort == "xhigh" else effort
    if thinking and budget is not None:
        # The per-request form of --reasoning-budget; `thinking_budget_tokens`
        # is read as a fallback name. It applies only to templates that
        # declare their thinking tags.
        body["reasoning_budget_tokens"] = budget
        return True
    return False


def apply_cache_salt(body: dict[str, Any], dialect: str, salt: str | None) -> None:
    """Keep one organisation's prompts out of another's prefix cache.

    vLLM's prefix cache is shared by every request it serves: a prompt that
    hits it comes back faster, which tells the sender that someone sent the
    same prefix before. A per-organisation ``cache_salt`` (a field of vLLM's
    chat request) is mixed into the hash of the first cached block, so only requests
    with the same salt share cached blocks. Sent after the backend's
    ``extra_body``, so no backend setting can join two organisations' caches.
    """
    if dialect == "vllm" and salt:
        body["cache_salt"] = salt


def apply_tool_choice(body: dict[str, Any], dialect: str) -> None:
    """Express a named-function ``tool_choice`` the way the backend understands it."""
    choice = body.get("tool_choice")
    if dialect != "llamacpp" or not isinstance(choice, dict):
        return
    # llama-server reads tool_choice only as a string ("auto", "none",
    # "required"); an object is ignored with a log warning and treated as
    # "auto" (measured), so the call would be optional and could name any
    # tool. "required" over just the named tool means the same thing.
    name = (choice.get("function") or {}).get("name")
    body["tools"] = [
        tool for tool in body.get("tools") or () if (tool.get("function") or {}).get("name") == name
    ]
    body["tool_choice"] = "required"
