"""A soak: 2,000 requests, 64 at a time, from two organisations, a fifth of
them answered by a hostile backend and a quarter abandoned by their client
mid-stream. Every request leaves exactly one row, none is a dead letter,
the server's memory comes back, and it still answers at once."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import aiohttp
import httpx
import orjson
import pytest

from tests.conftest import usage_rows, wait_for, wait_rows
from tests.hostile import MALFORMED, HostileBackend

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TOTAL = 2_000
CONCURRENCY = 64
HOSTILE = [*MALFORMED, "not-json"]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _plan(seed: int) -> list[tuple[str, str, bool, bool]]:
    """(organisation, input, stream, cancel) for each request."""
    rng = random.Random(seed)
    plan = []
    for index in range(TOTAL):
        organisation = ("acme", "globex")[index % 2]
        roll = rng.random()
        if roll < 0.20:
            plan.append((organisation, f"hostile:{rng.choice(HOSTILE)}", rng.random() < 0.5, False))
        elif roll < 0.45:
            # Abandoned once the stream has started: the server has the request.
            plan.append((organisation, "hostile:slow", True, True))
        else:
            plan.append((organisation, "hello", rng.random() < 0.5, False))
    return plan


async def _one(session, url, key, text, stream, cancel) -> int:
    body = orjson.dumps({"model": "sim-model", "input": text, "stream": stream})
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    async with session.post(url, data=body, headers=headers) as response:
        if cancel:
            await response.content.readuntil(b"\n\n")
            response.close()  # the client leaves mid-stream
            return 499
        await response.read()
        return response.status


async def _soak(base: str, keys: dict[str, str], plan) -> list[int]:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def run(item):
            async with gate:
                organisation, text, stream, cancel = item
                return await _one(session, base, keys[organisation], text, stream, cancel)

        return await asyncio.gather(*(run(item) for item in plan))


@pytest.mark.timeout(600)
def test_soak_with_hostile_backends_and_cancelling_clients(api_server, provision):
    from responses_api.models import UsageDeadLetter

    with HostileBackend() as hostile:
        acme = provision("acme", hostile.url, backend_name="hostile")
        globex = provision("globex", hostile.url, backend_name="hostile")
        keys = {"acme": acme.key, "globex": globex.key}
        url = api_server.url + "/v1/responses"
        pid = api_server.process.pid
        # Warm-up: pools, caches and the allocator's arenas as under load.
        asyncio.run(_soak(url, keys, _plan(1)[:300]))
        wait_for(lambda: len(usage_rows()) >= 300, timeout=60)
        start_rss = _rss_mb(pid)
        before = len(usage_rows())

        plan = _plan(2)
        statuses = asyncio.run(_soak(url, keys, plan))

        expected = before + TOTAL
        wait_for(lambda: len(usage_rows()) >= expected, timeout=120)
        # A row more (a request counted twice) would be queued as its request
        # ended, before the row of a request sent now (rows are written in
        # order): once that one is in, any such row would be too.
        after = httpx.post(
            url,
            headers={"authorization": f"Bearer {acme.key}"},
            json={"model": "sim-model", "input": "hello"},
            timeout=30,
        ).headers["x-request-id"]
        wait_rows(1, request_id=after)
        rows = [row for row in usage_rows() if str(row.request_id) != after]
    assert len(rows) == expected
    soak_rows = rows[before:]
    by_org = {acme.organisation.pk: 0, globex.organisation.pk: 0}
    for row in soak_rows:
        by_org[row.organisation_id] += 1
    assert by_org == {acme.organisation.pk: TOTAL // 2, globex.organisation.pk: TOTAL // 2}
    cancelled = sum(1 for _, _, _, cancel in plan if cancel)
    assert sum(1 for row in soak_rows if row.status == 499) == cancelled
    assert sum(1 for s in statuses if s == 500) == 0
    assert not any(row.status == 500 for row in soak_rows)
    hostile_count = sum(
        1 for _, text, _, _ in plan if text.startswith("hostile:") and "slow" not in text
    )
    assert sum(1 for row in soak_rows if row.status == 502) == hostile_count
    # Only the soak's own: the worker's server process may still be writing
    # rows of organisations an earlier test made and then flushed away.
    own = [acme.organisation.pk, globex.organisation.pk]
    assert not UsageDeadLetter.objects.filter(organisation_id__in=own).exists()
    assert _rss_mb(pid) - start_rss < 30
