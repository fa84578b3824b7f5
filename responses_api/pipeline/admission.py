"""Admitting a request under its caller's limits: rate limits
(``ratelimit``) and monthly spend limits (``spend``, ``holds``), in one step.

With Redis both are one round trip: the rate limits' Lua script and the
spend reservation's go in the same pipeline. A caller with neither kind of
limit costs nothing. A spend limit already reached wins over a rate limit
(it will not clear in a minute); a rate admission already counted is then
given back. A spend hold taken for a request the rate limits refuse is
given back by that request's usage row, like any other.

A request that makes no backend generate (``generate: false``, the input
token count) is admitted under the rate limits only: one request, no
tokens, and no spend hold. A background response is checked when it is
created (:func:`check`) and admitted again, holding its spend, when a
worker runs it (docs/api/background.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from responses_api.pipeline.exchange import prompt_tokens
from responses_api.protocol.errors import ApiError
from responses_api.runtime import redis_conn
from responses_api.usage.holds import (
    MISSING,
    REFUSED,
    reserve,
    reserve_call,
    reserve_local,
    reserve_result,
    spend_settle,
)
from responses_api.usage.ratelimit import (
    Admission,
    admit_result,
    admit_script,
    limits_local,
    limits_outcome,
    limits_plan,
    limits_settle,
)
from responses_api.usage.spend import (
    SpendPlan,
    spend_outcome,
    spend_plan,
    spend_rebuild,
    worst_case,
)

if TYPE_CHECKING:
    from responses_api.pipeline.exchange import Exchange
    from responses_api.translate.request import ChatDraft

# The output a request reserves under a budget when neither it nor its model
# limits the output (docs/admin/budgets.md).
UNLIMITED_OUTPUT_RESERVE = 4096


async def admit(
    *, exchange: Exchange, estimate: int, draft: ChatDraft, generate: bool = True, calls: int = 1
) -> Admission | None:
    """Count the request against its caller's limits, or raise the 429.

    Returns the rate-limit admission to settle when the request ends (None
    without rate limits). The exchange records what it was admitted under:
    its usage row settles the spend it held, and its responses carry the
    rate-limit headers. Without ``generate`` no backend produces tokens:
    the request counts as one, with no tokens, and holds no spend. A
    request that may make ``calls`` backend calls (compacting first, then
    answering) holds the worst case of each: its prompt and output limit
    as many times, an upper bound since the answer's prompt is the shorter."""
    caller = exchange.caller
    assert caller is not None
    exchange.translated(draft)
    rate = limits_plan(caller=caller, estimate=estimate if generate else 0)
    spend = spend_plan(caller=caller, created_at=exchange.timing.created_at) if generate else None
    if rate is None and spend is None:
        return None
    if spend is not None:
        spend = _reserving(spend, exchange, draft, calls)
    verdict: tuple[int, str] | None = None
    used: list = []
    reply: list[Any] = []
    if redis_conn.enabled():
        scripts = [admit_script(rate)] if rate is not None else []
        if spend is not None:
            scripts.append(reserve_call(spend))
        results, _ = await redis_conn.run_batch((), scripts)
        if rate is not None:
            verdict, used = admit_result(rate, results[0])
        reply = results[-1]
    else:
        if rate is not None:
            verdict, used = limits_local(rate)
        if spend is not None:
            reply = reserve_local(spend, asyncio.current_task())
    if spend is not None:
        try:
            await _spend_verdict(exchange, spend, reply)
        except BaseException:
            if rate is not None and verdict is None:
                given_back = limits_outcome(rate, None, used)
                await asyncio.shield(limits_settle(admission=given_back, tokens=0))
            raise
    admission = limits_outcome(rate, verdict, used) if rate is not None else None
    exchange.admitted(limit_headers=admission.headers if admission else ())
    return admission


async def check(*, exchange: Exchange, estimate: int, draft: ChatDraft) -> None:
    """Raise the 429 that :func:`admit` would, for a request whose work
    runs later (a background response, admitted again by its worker).

    The request counts under the requests-per-minute limits now, as any
    request does when it arrives; its tokens, its concurrency slot and its
    spend hold are the worker's to take, so the check gives them back at
    once (its spend is checked with a hold of nothing)."""
    caller = exchange.caller
    assert caller is not None
    rate = limits_plan(caller=caller, estimate=estimate)
    spend = spend_plan(caller=caller, created_at=exchange.timing.created_at)
    if spend is not None:
        spend = dataclasses.replace(spend, hold_id=uuid.uuid4().hex)
    exchange.translated(draft)
    verdict: tuple[int, str] | None = None
    used: list = []
    if rate is not None:
        if redis_conn.enabled():
            results, _ = await redis_conn.run_batch((), [admit_script(rate)])
            verdict, used = admit_result(rate, results[0])
        else:
            verdict, used = limits_local(rate)
    admission: Admission | None = None
    try:
        # A spend limit reached wins over a rate limit, as in ``admit``.
        notices = spend_outcome(spend, await _spend_check(spend)) if spend is not None else []
    finally:
        if rate is not None and verdict is None:
            admission = limits_outcome(rate, None, used)
            await asyncio.shield(limits_settle(admission=admission, tokens=0))
    if rate is not None and verdict is not None:
        limits_outcome(rate, verdict, used)  # raises its 429
    for code, message in notices:
        exchange.notice(code, message)
    exchange.admitted(limit_headers=admission.headers if admission else ())


_NOTHING = {"cost": 0, "input_tokens": 0, "output_tokens": 0}


async def _spend_check(spend: SpendPlan) -> list[int]:
    """What was spent and held, per scope: a reservation of nothing, given
    back in the same round trip (it would be refused past a limit, but
    ``spend_outcome`` says so from the counts)."""
    for _ in range(4):
        if redis_conn.enabled():
            settle = spend_settle(spend, _NOTHING)
            results, _ = await redis_conn.run_batch((), [reserve_call(spend), *settle])
            reply = results[0]
        else:
            reply = reserve_local(spend)
            spend_settle(spend, _NOTHING)
        if int(reply[0]) != MISSING:
            return [int(v) for v in reply[1:]]
        await spend_rebuild(spend)
    raise ApiError(503, "Spend limits cannot be checked now; retry.", code="unavailable")


async def admit_turn(*, exchange: Exchange, draft: ChatDraft) -> None:
    """Hold the worst case of one more backend call of an admitted request
    (a tool loop's next turn, whose prompt carries the turns before it)
    under its spend limits, or raise their 429: a loop stops at the budget
    as requests do, overspending it by at most one call's hold. Its row
    gives the whole hold back."""
    spend = exchange.spend
    if spend is None:
        return
    more = _reserving(spend, exchange, draft, 1, hold_id=spend.hold_id)
    # The hold's lease is renewed already, under its id, while the request runs.
    reply = await reserve(more)
    status, counts = int(reply[0]), [int(v) for v in reply[1:]]
    if status == MISSING:
        # The month's counters are being rebuilt: this turn goes unheld,
        # its cost still counted by the row.
        return
    if status == REFUSED:
        spend_outcome(more, counts)  # raises the limit's 429


def _reserving(
    spend: SpendPlan, exchange: Exchange, draft: ChatDraft, calls: int, *, hold_id: str = ""
) -> SpendPlan:
    """The plan with the request's worst case to hold: its prompt and its
    output limit at the model's prices, for each of its backend calls."""
    entry = exchange.model_entry
    max_output = draft.max_output_tokens
    output = max_output if max_output is not None else UNLIMITED_OUTPUT_RESERVE
    prompt = prompt_tokens(draft)
    units, tokens = (
        worst_case(entry.cost, input_tokens=prompt, output_tokens=output)
        if entry is not None
        else (0, prompt + output)
    )
    return dataclasses.replace(
        spend, hold_id=hold_id or uuid.uuid4().hex, units=units * calls, tokens=tokens * calls
    )


async def _spend_verdict(exchange: Exchange, spend: SpendPlan, reply: list[Any]) -> None:
    """Raise the spend limits' 429, or record the hold (its row gives it
    back) and the notices. The hold lasts no longer than the task serving
    the request, admission's own."""
    owner = asyncio.current_task()
    status, counts = reserve_result(spend, reply, owner)
    rebuilds = 0
    while status == MISSING:
        if rebuilds == 3:
            # Counters gone again as soon as rebuilt: Redis is being flushed.
            raise ApiError(503, "Spend limits cannot be checked now; retry.", code="unavailable")
        rebuilds += 1
        await spend_rebuild(spend)
        status, counts = reserve_result(spend, await reserve(spend, owner), owner)
    if status != REFUSED:
        exchange.reserved(spend)
    for code, message in spend_outcome(spend, counts):
        exchange.notice(code, message)
