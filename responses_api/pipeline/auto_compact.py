"""Compacting ahead of an answer (docs/api/compaction.md): a request whose
``context_management`` threshold its input passes is summarised first, by
its own model, and answered from the summary and its last turn; the
answer's first output item is the compaction item, and a notice says so.

The input is counted here too: by the backend's tokenizer where its dialect
has one (``translate.dialects.TOKENIZE``), else by the estimate of
``translate.compaction``; not at all when it cannot reach the threshold
(:func:`surely_under`). The summary has the first-token deadline of any
answer (``failover.first_token_deadline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from responses_api.backends.client import BackendError, post_json
from responses_api.catalogue.addresses import backend_policy
from responses_api.catalogue.catalog import ModelEntry, Route
from responses_api.pipeline import failover
from responses_api.pipeline.call import Call
from responses_api.pipeline.relay import read_answer
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.items import CompactionTriggerItem, MessageItem
from responses_api.store.seal import cache_salt, reasoning_seal
from responses_api.translate import compaction
from responses_api.translate.dialects import TOKENIZE
from responses_api.translate.items import new_id
from responses_api.translate.request import ChatDraft, ChatPlan, prepare_chat
from responses_api.translate.stream import StreamTranslator

# Seconds a count waits for the backend's tokenizer before estimating.
TOKENIZE_WITHIN = 10.0


@dataclass(frozen=True, slots=True)
class Ahead:
    """A request compacted before its answer."""

    request: CreateResponse
    draft: ChatDraft
    item: dict[str, Any]
    translator: compaction.CompactionTranslator

    def answer(self, base: StreamTranslator) -> StreamTranslator:
        return compaction.AheadTranslator(base, item=self.item, usage=self.translator.final_usage())


async def ahead(
    call: Call,
    *,
    model: ModelEntry,
    request: CreateResponse,
    draft: ChatDraft,
    affinity: str | None,
) -> Ahead | None:
    """The request compacted first, when its input passes its threshold."""
    limit = compaction.threshold(request, model.limits.context_window)
    if limit is None or not model.routes:
        return None
    route = model.routes[0]
    plan = draft.for_route(
        upstream_model=route.upstream_name,
        dialect=route.backend.dialect,
        extra_body=route.backend.extra_body,
    )
    if surely_under(plan, limit):
        return None
    counted = await count_tokens(route, plan)
    if counted <= limit:
        return None
    exchange = call.exchange
    assert exchange.caller is not None
    seal = reasoning_seal(exchange.caller.organisation_id)
    salt = cache_salt(exchange.caller.organisation_id)
    items = (
        [MessageItem(role="user", content=request.input)]
        if isinstance(request.input, str)
        else list(request.input)
    )
    trigger = CompactionTriggerItem(type="compaction_trigger")
    asked = compaction.resolve(
        request.model_copy(update={"input": [*items, trigger]}),
        seal=seal,
        model_id=model.public_id,
    )
    summary = prepare_chat(asked.request, limits=model.limits, seal=seal, cache_salt=salt)
    base = StreamTranslator(
        response_id=new_id("resp"),
        model=request.model,
        echo={},
        quiet=True,
        max_output_tokens=summary.max_output_tokens,
    )
    translator = compaction.CompactionTranslator(
        base, seal=seal, model_id=model.public_id, kept=[], compacted=False
    )
    pinned = call.headers.get(b"x-backend-id")
    upstream = failover.upstream(
        exchange,
        draft=summary,
        model=model,
        pinned=pinned.decode("latin-1").strip() if pinned else None,
        affinity=affinity,
    )
    # The summary has the answer's first-token deadline: the client, whose
    # stream has not started yet, hears nothing while the backend is silent.
    waiting = failover.first_token_deadline(exchange, model.first_token_timeout)
    async with waiting as deadline, upstream as attempt:
        await read_answer(attempt.answer, translator, attempt.route.backend.name, deadline)
    translator.close_items()
    assert translator.compaction is not None
    compacted = compaction.after_compaction(request, translator.summary())
    exchange.notice(
        "context_compacted",
        f"The input ({counted} tokens) passed the compaction threshold ({limit} tokens): "
        "the conversation was compacted first. The first output item is its compaction item; "
        "send it back in place of the items before it.",
    )
    return Ahead(
        compacted,
        prepare_chat(compacted, limits=model.limits, seal=seal, cache_salt=salt),
        translator.compaction,
        translator,
    )


# Tokens a chat template may add around the messages and tools: role
# markers, a default system line, the tools' instructions.
TEMPLATE_TOKENS = 1024


def surely_under(plan: ChatPlan, limit: int) -> bool:
    """Whether the prompt cannot reach ``limit`` tokens, whatever the
    backend's tokenizer: then it is not asked (a round trip, two for
    llama.cpp, of up to ``TOKENIZE_WITHIN`` each). The estimate is a
    quarter of the JSON's bytes, but a tokenizer may count more (code,
    digits, non-Latin scripts): the bound is that no token is shorter than
    a byte (byte-level BPE and byte-fallback vocabularies alike), so the
    prompt has at most as many tokens as its JSON has bytes, four times the
    estimate, plus what the template adds. Below that, no count can pass."""
    estimate = compaction.estimate_tokens(plan.body["messages"], plan.body.get("tools"))
    return 4 * (estimate + 1) + TEMPLATE_TOKENS <= limit


# More tokens than any context window holds: a tokenizer answering more is wrong.
MAX_COUNT = 100_000_000


async def count_tokens(route: Route, plan: ChatPlan) -> int:
    """The chat request's input tokens: from the backend's tokenizer when
    its dialect has one and it answers, else the estimate."""
    messages = plan.body["messages"]
    tools = plan.body.get("tools")
    counted = None
    if TOKENIZE.get(route.backend.dialect):
        try:
            counted = await _tokenize(route, plan)
        except BackendError:
            counted = None
    return counted if counted is not None else compaction.estimate_tokens(messages, tools)


async def _tokenize(route: Route, plan: ChatPlan) -> int | None:
    backend = route.backend
    root = backend.base_url.rstrip("/").removesuffix("/v1")
    policy = backend_policy(allow_private=getattr(backend, "allow_private", False))
    kind = TOKENIZE[backend.dialect]
    messages = plan.body["messages"]
    if kind == "chat":
        # vLLM: the chat template applied, tools included.
        request: dict[str, Any] = {"model": plan.body["model"], "messages": messages}
        if plan.body.get("tools"):
            request["tools"] = plan.body["tools"]
        status, answer = await post_json(
            root,
            "/tokenize",
            request,
            api_key=backend.api_key,
            within=TOKENIZE_WITHIN,
            policy=policy,
        )
        count = answer.get("count") if status == 200 and isinstance(answer, dict) else None
        # The backend's word, taken only when it is a count a prompt can
        # have: not a boolean, a negative or an absurd number.
        return count if type(count) is int and 0 <= count <= MAX_COUNT else None
    # llama.cpp: the template applied first, then its text tokenized.
    status, answer = await post_json(
        root,
        "/apply-template",
        {"messages": messages},
        api_key=backend.api_key,
        within=TOKENIZE_WITHIN,
        policy=policy,
    )
    prompt = answer.get("prompt") if status == 200 and isinstance(answer, dict) else None
    if not isinstance(prompt, str):
        return None
    status, answer = await post_json(
        root,
        "/tokenize",
        {"content": prompt, "add_special": True},
        api_key=backend.api_key,
        within=TOKENIZE_WITHIN,
        policy=policy,
    )
    tokens = answer.get("tokens") if status == 200 and isinstance(answer, dict) else None
    return len(tokens) if isinstance(tokens, list) else None
