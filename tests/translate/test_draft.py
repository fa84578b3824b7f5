"""A request is translated once; each failover route only adds its own part."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from responses_api.protocol.body import CreateResponse
from responses_api.translate import history as translate_history
from responses_api.translate import request as translate_request
from responses_api.translate.request import ModelLimits, build_chat_request, prepare_chat

CODEX = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
DIALECTS = ("openai", "vllm", "sglang", "llamacpp", "ollama")
WITH_REASONING = [
    {"role": "user", "content": "q"},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
    {"role": "assistant", "content": "answer"},
    {"role": "user", "content": "more"},
]


def codex_request(name: str = "turn2_after_exec_request") -> CreateResponse:
    return CreateResponse.model_validate(orjson.loads((CODEX / f"{name}.json").read_bytes()))


def test_two_routes_share_one_translation_with_their_own_model_names():
    draft = prepare_chat(codex_request(), limits=ModelLimits(context_window=131072))
    first = draft.for_route(upstream_model="qwen-a", dialect="vllm", extra_body=None)
    second = draft.for_route(upstream_model="qwen-b", dialect="sglang", extra_body={"top_k": 20})
    assert (first.body["model"], second.body["model"]) == ("qwen-a", "qwen-b")
    assert first.body["messages"] is second.body["messages"]
    assert first.body["tools"] is second.body["tools"]
    assert first.tools is second.tools
    assert second.body["top_k"] == 20 and "top_k" not in first.body
    assert "separate_reasoning" in second.body and "separate_reasoning" not in first.body


def test_for_route_translates_no_message_or_tool_again(monkeypatch):
    draft = prepare_chat(codex_request(), limits=ModelLimits())

    def translated_again(*args, **kwargs):
        raise AssertionError("translated again")

    monkeypatch.setattr(translate_request, "add_item", translated_again)
    monkeypatch.setattr(translate_request.ChatTools, "add", translated_again)
    monkeypatch.setattr(translate_history, "user_content", translated_again)
    for dialect in DIALECTS:
        plan = draft.for_route(upstream_model="up", dialect=dialect, extra_body=None)
        assert plan.body["messages"] and plan.body["tools"]


@pytest.mark.parametrize("name", sorted(p.stem for p in CODEX.glob("*_request.json")))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_route_plan_is_the_single_route_translation(name, dialect):
    request = codex_request(name)
    limits = ModelLimits(context_window=131072, max_output_tokens=8192)
    extra = {"top_k": 20, "chat_template_kwargs": {"x": 1}}
    draft = prepare_chat(request, limits=limits)
    draft.for_route(upstream_model="other", dialect="ollama", extra_body=None)
    plan = draft.for_route(upstream_model="up", dialect=dialect, extra_body=extra)
    alone = build_chat_request(
        request, upstream_model="up", dialect=dialect, limits=limits, extra_body=extra
    )
    assert plan.body == alone.body
    assert (plan.tools, plan.notices, plan.max_output_tokens, plan.thinking_budget) == (
        alone.tools,
        alone.notices,
        alone.max_output_tokens,
        alone.thinking_budget,
    )


def test_reasoning_is_renamed_for_a_dialect_on_copies_of_those_messages_only():
    request = CreateResponse.model_validate({"model": "m", "input": WITH_REASONING})
    draft = prepare_chat(request, limits=ModelLimits())
    vllm = draft.for_route(upstream_model="up", dialect="vllm", extra_body=None)
    ollama = draft.for_route(upstream_model="up", dialect="ollama", extra_body=None)
    assert vllm.body["messages"][1] == {
        "role": "assistant",
        "content": "answer",
        "reasoning_content": "t",
    }
    assert ollama.body["messages"][1] == {
        "role": "assistant",
        "content": "answer",
        "reasoning": "t",
    }
    assert ollama.body["messages"] is not vllm.body["messages"]
    assert ollama.body["messages"][0] is vllm.body["messages"][0]
    # The draft is unchanged for the next route.
    again = draft.for_route(upstream_model="up", dialect="vllm", extra_body=None)
    assert again.body["messages"][1] == vllm.body["messages"][1]


def test_what_one_route_changes_does_not_reach_the_next():
    request = CreateResponse.model_validate(
        {
            "model": "m",
            "input": "hi",
            "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}],
            "tool_choice": {"type": "function", "name": "b"},
            "reasoning": {"effort": "high", "max_tokens": 64},
            "max_output_tokens": 500,
        }
    )
    draft = prepare_chat(request, limits=ModelLimits(max_output_tokens=100))
    shared = {"chat_template_kwargs": {"x": 1}}
    llamacpp = draft.for_route(upstream_model="up", dialect="llamacpp", extra_body=shared)
    assert [t["function"]["name"] for t in llamacpp.body["tools"]] == ["b"]
    assert llamacpp.body["tool_choice"] == "required"
    llamacpp.notice("thinking_budget_reached", "x")
    vllm = draft.for_route(upstream_model="up", dialect="vllm", extra_body=shared)
    assert [t["function"]["name"] for t in vllm.body["tools"]] == ["a", "b"]
    assert vllm.body["tool_choice"] == {"type": "function", "function": {"name": "b"}}
    assert [n["code"] for n in vllm.notices] == ["max_output_tokens_capped"]
    assert vllm.thinking_budget == 64 and vllm.body["max_tokens"] == 100
    assert shared == {"chat_template_kwargs": {"x": 1}}


def test_errors_are_raised_when_the_draft_is_prepared():
    from responses_api.protocol.errors import ApiError

    request = CreateResponse.model_validate(
        {"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}
    )
    with pytest.raises(ApiError) as caught:
        prepare_chat(request, limits=ModelLimits())
    assert caught.value.param == "input[0]"


def test_the_organisations_cache_salt_reaches_vllm_only_and_beats_extra_body():
    from responses_api.store.seal import cache_salt

    salt = cache_salt(7)
    draft = prepare_chat(codex_request(), limits=ModelLimits(), cache_salt=salt)
    shared = {"cache_salt": "everyone"}  # a backend setting cannot join two caches
    assert (
        draft.for_route(upstream_model="up", dialect="vllm", extra_body=shared).body["cache_salt"]
        == salt
    )
    for dialect in ("openai", "sglang", "llamacpp", "ollama"):
        assert (
            "cache_salt"
            not in draft.for_route(upstream_model="up", dialect=dialect, extra_body=None).body
        )
    unsalted = prepare_chat(codex_request(), limits=ModelLimits())
    assert (
        "cache_salt"
        not in unsalted.for_route(upstream_model="up", dialect="vllm", extra_body=None).body
    )


def test_a_cache_salt_is_stable_per_organisation_and_keyed_with_the_secret(settings):
    from responses_api.store.seal import cache_salt

    assert cache_salt(7) == cache_salt(7) != cache_salt(8)
    assert len(cache_salt(7)) == 64
    before = cache_salt(7)
    settings.SECRET_KEY = "another-secret-" * 4
    assert cache_salt(7) != before
