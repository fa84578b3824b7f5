"""A bounded loopback load test: 250 requests, half streamed, 24 at a time,
a fifth of them cancelled at random points, some over a rate limit — then
300 more streams, which would hang if cancelled or finished exchanges leaked
upstream connections or backend slots: the two backends have 24 slots
between them, fewer than the 50 cancelled exchanges and far fewer than the
finished ones, so were half the cancelled ones (or a tenth of the finished
ones) to keep their slot, later requests would wait out the queue bound.

Afterwards the usage log must hold exactly one row per request, with the
status the client saw, and the tokens must add up with what the simulators
say they produced:

- a completed request (200) has exactly the tokens asked for
  (``[[tokens:N]]``), and the simulators produced exactly that many for it;
- a cancelled request (499) counts the tokens that reached Switchyard before
  the client left. The simulator may have produced a few more that were in
  flight (sent, not yet read), and never more than N. So for the cancelled
  ones together: Σ row tokens ≤ (simulator total − Σ completed) ≤ Σ N.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass

import httpx
import orjson
import pytest

from tests.conftest import usage_rows, wait_for
from tests.routing.conftest import sim_stats

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

REQUESTS = 250
# As many at a time as the backends have slots (2 × SLOTS): none waits out
# the queue bound unless a slot leaked.
SLOTS = 12
CONCURRENCY = 2 * SLOTS
LIMITED_RPM = 10


@dataclass
class Plan:
    index: int
    stream: bool
    tokens: int
    limited: bool
    cancel_after: float | None
    status: int | None = None
    completed: bool = False
    received_deltas: int = 0


def make_plans(rng: random.Random) -> list[Plan]:
    plans = []
    for index in range(REQUESTS):
        cancel = index % 5 == 0
        plans.append(
            Plan(
                index=index,
                stream=index % 2 == 0 if not cancel else rng.random() < 0.5,
                tokens=rng.randint(40, 80) if cancel else rng.randint(3, 40),
                limited=index % 8 == 3,
                cancel_after=rng.uniform(0.02, 0.6) if cancel else None,
            )
        )
    return plans


async def run(plan: Plan, client: httpx.AsyncClient, url: str, key: str) -> None:
    # Cancelled requests are paced so that the cancel lands mid-answer.
    pace = " [[rate:100]]" if plan.cancel_after is not None else ""
    body = {
        "model": "sim-model",
        "input": f"load {plan.index} [[tokens:{plan.tokens}]]{pace}",
        "stream": plan.stream,
    }
    headers = {"authorization": f"Bearer {key}", "user-agent": f"load/{plan.index}"}
    if plan.cancel_after is not None:
        await run_and_leave(plan, url, headers, body)
    elif plan.stream:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            plan.status = response.status_code
            async for line in response.aiter_lines():
                plan.received_deltas += '"response.output_text.delta"' in line
                plan.completed |= '"response.completed"' in line
            plan.completed |= response.status_code != 200
    else:
        response = await client.post(url, json=body, headers=headers)
        plan.status = response.status_code
        plan.completed = True


async def run_and_leave(plan: Plan, url: str, headers: dict, body: dict) -> None:
    """Send the whole request, read for ``cancel_after`` seconds, close the
    connection. Over a bare connection, so the request surely arrived whole
    before the client leaves (a client gone mid-request sent no request)."""
    host, _, rest = url.removeprefix("http://").partition(":")
    port, _, path = rest.partition("/")
    payload = orjson.dumps(body)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"POST /{path} HTTP/1.1\r\nhost: {host}\r\n{head}content-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
        + payload
    )
    await writer.drain()
    received = b""

    async def read_to_end() -> None:
        nonlocal received
        while chunk := await reader.read(65536):
            received += chunk

    try:
        await asyncio.wait_for(read_to_end(), timeout=plan.cancel_after)
        plan.completed = True  # the server finished and closed first
    except TimeoutError:
        pass
    finally:
        writer.close()
    if received.startswith(b"HTTP/1.1 "):
        plan.status = int(received[9:12])
    plan.received_deltas = received.count(b'"response.output_text.delta"')


async def drive(plans: list[Plan], urls: list[str], keys: dict[bool, str]) -> None:
    limits = httpx.Limits(max_connections=CONCURRENCY * 2, max_keepalive_connections=CONCURRENCY)
    semaphore = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one(plan: Plan) -> None:
            async with semaphore:
                url = urls[plan.index % len(urls)] + "/v1/responses"
                await run(plan, client, url, keys[plan.limited])

        await asyncio.gather(*(one(plan) for plan in plans))


def test_load_with_cancellations_and_rate_limits_keeps_one_exact_row_per_request(
    web, sims, fleet_for, people
):
    from accounts.services.api_keys import api_key_create

    sims = sims[:2]
    before = [sim_stats(sim) for sim in sims]
    fleet = fleet_for(sims, max_concurrency=SLOTS)
    _, limited_key = api_key_create(organisation=people["acme"], name="limited", rpm=LIMITED_RPM)
    urls = [server.url for server in web.servers]
    plans = make_plans(random.Random(20260501))
    started = time.time()
    asyncio.run(drive(plans, urls, {False: fleet.key, True: limited_key}))
    windows = int(time.time() // 60) - int(started // 60) + 1  # minutes touched

    try:
        rows = wait_for(
            lambda: len(r := usage_rows(organisation=fleet.organisation)) >= REQUESTS and r,
            timeout=60,
        )
    except AssertionError:
        rows = usage_rows(organisation=fleet.organisation)
        seen = {r.user_agent for r in rows}
        missing = [p for p in plans if f"load/{p.index}" not in seen]
        print("ROWS", len(rows), Counter(r.status for r in rows), [sim_stats(s) for s in sims])
        print("MISSING", len(missing), missing[:10])
        raise
    by_agent = {row.user_agent: row for row in rows}
    assert len(rows) == REQUESTS and len(by_agent) == REQUESTS  # one row each

    completed_tokens = 0
    cancelled_rows = cancelled_ceiling = 0
    statuses: Counter[int] = Counter()
    for plan in plans:
        row = by_agent[f"load/{plan.index}"]
        statuses[row.status] += 1
        if plan.completed:
            # The client saw the whole answer: the row says what it saw.
            assert row.status == plan.status, (plan, row.status)
        else:
            # Gone before the end; the row is a 499 unless the answer had
            # already been sent in full (or refused) when the client left.
            assert plan.cancel_after is not None
            assert row.status in (499, 200, 429), (plan, row.status)
        if row.status == 200:
            assert row.output_tokens == plan.tokens
            completed_tokens += plan.tokens
        elif row.status == 499:
            assert row.note == "Client disconnected"
            assert plan.received_deltas <= row.output_tokens <= plan.tokens
            cancelled_rows += row.output_tokens
            cancelled_ceiling += plan.tokens
        else:
            assert row.status == 429 and plan.limited
            assert row.output_tokens == 0
    assert statuses[429] >= 1, statuses
    assert statuses[499] >= REQUESTS // 10, statuses
    assert set(statuses) <= {200, 429, 499}, statuses
    # (A cancelled request may have left before or after its admission,
    # so only the completed ones are certain to have been counted.)
    limited_passed = sum(
        1 for p in plans if p.limited and by_agent[f"load/{p.index}"].status == 200
    )
    assert limited_passed <= windows * LIMITED_RPM

    def settled() -> list[dict]:
        stats = [sim_stats(sim) for sim in sims]
        return stats if all(s["in_flight"] == 0 for s in stats) else []

    stats = wait_for(settled, timeout=30)  # no upstream request left open
    # The simulators are shared with other tests: what they did during this one.
    done = [
        {k: s[k] - b[k] for k in ("tokens_produced", "disconnects")}
        for s, b in zip(stats, before, strict=True)
    ]
    produced = sum(d["tokens_produced"] for d in done)
    assert cancelled_rows <= produced - completed_tokens <= cancelled_ceiling
    disconnects = sum(d["disconnects"] for d in done)
    assert disconnects <= statuses[499]

    # Hundreds more streams: leaked connections or slots would hang these.
    more = [Plan(REQUESTS + i, True, 5, False, None) for i in range(300)]
    asyncio.run(drive(more, urls, {False: fleet.key, True: limited_key}))
    assert all(p.completed and p.status == 200 for p in more)
    assert wait_for(settled, timeout=30)
