"""Admitting a request under its caller's limits: rate limits
(``ratelimit``) and monthly spend limits (``spend``), in one step.

With Redis both are one round trip: the rate limits' Lua script and the
spend counters' ``MGET`` go in the same pipeline. A caller with neither
kind of limit costs nothing. A spend limit already reached wins over a rate
limit (it will not clear in a minute); a rate admission already counted is
then given back.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from responses_api.runtime import redis_conn
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
    read_command,
    read_result,
    spend_counts,
    spend_local,
    spend_outcome,
    spend_plan,
)

if TYPE_CHECKING:
    from responses_api.gateway.exchange import Exchange


async def admit(*, exchange: Exchange, estimate: int) -> Admission | None:
    """Count the request against its caller's limits, or raise the 429.

    Returns the rate-limit admission to settle when the request ends (None
    without rate limits). The exchange records what it was admitted under:
    its usage row settles the month's spend counters, and its responses
    carry the rate-limit headers."""
    caller = exchange.caller
    assert caller is not None
    rate = limits_plan(caller=caller, estimate=estimate)
    spend = spend_plan(caller=caller, created_at=exchange.timing.created_at)
    if rate is None and spend is None:
        return None
    verdict: tuple[int, str] | None = None
    used: list = []
    counts: list[int | None] = []
    if redis_conn.enabled() and spend is None:
        assert rate is not None
        verdict, used = admit_result(rate, await redis_conn.run_call(admit_script(rate)))
    elif redis_conn.enabled():
        scripts = [admit_script(rate)] if rate is not None else []
        commands = [read_command(spend)] if spend is not None else []
        script_results, command_results = await redis_conn.run_batch(commands, scripts)
        if rate is not None:
            verdict, used = admit_result(rate, script_results[0])
        if spend is not None:
            counts = read_result(command_results[0])
    else:
        if rate is not None:
            verdict, used = limits_local(rate)
        if spend is not None:
            counts = spend_local(spend)
    if spend is not None:
        try:
            notices = spend_outcome(spend, await spend_counts(spend, counts))
        except BaseException:
            if rate is not None and verdict is None:
                given_back = limits_outcome(rate, None, used)
                await asyncio.shield(limits_settle(admission=given_back, tokens=0))
            raise
        for code, message in notices:
            exchange.notice(code, message)
    admission = limits_outcome(rate, verdict, used) if rate is not None else None
    exchange.admitted(spend=spend, limit_headers=admission.headers if admission else ())
    return admission
