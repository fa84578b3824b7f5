"""The event-loop lag monitor and the collector's pauses, measured and exported."""

from __future__ import annotations

import asyncio
import gc
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from responses_api.runtime import loop_monitor
from tests.conftest import server_env, start_daphne
from tests.support import wait_until

TOKEN = "metrics-token-for-loop-lag-31c9"


def _sample(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_blocked_loop_is_recorded_as_lag():
    loop = asyncio.new_event_loop()
    try:
        before_sum = _sample("switchyard_event_loop_lag_seconds_sum")
        before = _sample("switchyard_event_loop_lag_seconds_bucket", le="0.1")
        monitor = loop_monitor._LoopLag(loop)

        def hold() -> None:
            # What is measured: the loop is held, so the tick that was due
            # (INTERVAL after the start) runs about 0.15 s late.
            time.sleep(0.2)

        def late() -> float:
            return _sample("switchyard_event_loop_lag_seconds_sum") - before_sum

        def on_time() -> float:
            return _sample("switchyard_event_loop_lag_seconds_bucket", le="0.1") - before

        async def block_then_wait() -> None:
            monitor.start()
            loop.call_soon(hold)  # before the first tick: every tick on time comes after
            deadline = time.monotonic() + 5
            while not (late() >= 0.1 and on_time() >= 1):
                assert time.monotonic() < deadline, "no late tick and on-time tick within 5 s"
                await asyncio.sleep(loop_monitor.INTERVAL)

        loop.run_until_complete(block_then_wait())
    finally:
        loop.close()
    # At least one tick was on time after the block, the late one was not.
    total = _sample("switchyard_event_loop_lag_seconds_count")
    assert late() >= 0.1
    assert on_time() >= 1 and total > on_time() + before


def test_each_collection_is_timed_by_generation():
    pauses = loop_monitor._GcPauses()
    before = _sample("switchyard_gc_pause_seconds_count", generation="2")
    gc.callbacks.append(pauses)
    try:
        gc.collect(2)
    finally:
        gc.callbacks.remove(pauses)
    assert _sample("switchyard_gc_pause_seconds_count", generation="2") == before + 1


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_web_process_exports_its_loop_lag():
    server = start_daphne(env=server_env(METRICS_TOKEN=TOKEN))
    try:

        def lag_samples() -> float:
            text = httpx.get(
                server.url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=5
            ).text
            for family in text_string_to_metric_families(text):
                if family.name == "switchyard_event_loop_lag_seconds":
                    for sample in family.samples:
                        if sample.name.endswith("_count"):
                            return sample.value
            return 0.0

        # Ticks every 50 ms: a few within a second of serving.
        wait_until(lambda: lag_samples() >= 3, timeout=10, message="no loop-lag samples")
        text = httpx.get(
            server.url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=5
        ).text
        assert "switchyard_gc_pause_seconds_count" in text
    finally:
        server.stop()
