"""Receiving the KV-cache events of the backends in precise mode
(docs/operations/routing.md): one ZMQ SUB socket per endpoint, in a daemon
thread of each web process, started the first time a request is routed
to one of its backends.

Switchyard connects and vLLM binds (vLLM's ``--kv-events-config`` with an
``endpoint`` of ``tcp://*:PORT`` or ``ipc://PATH``): every web process
subscribes on its own, which only one of them could do if it had to bind.
ZMQ reconnects by itself after the backend restarts; the restarted engine
numbers its batches from 0 again, which the index takes for a gap and
clears itself (``kv_events.BlockIndex.receive``). A message over
``MAX_PAYLOAD`` makes ZMQ drop that connection (``MAXMSGSIZE``) and
reconnect, which shows as a gap too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import zmq
from django.conf import settings
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from responses_api.backends.kv_events import MAX_PAYLOAD, BlockIndex

log = logging.getLogger(__name__)

POLL_MS = 500
RETRY_SECONDS = 2.0
# Frames queued in ZMQ before it drops the newest (then a gap resyncs).
HIGH_WATER_MARK = 10_000


class Subscriber:
    """One endpoint's socket, thread and index."""

    def __init__(self, endpoint: str, bound: int) -> None:
        self.endpoint = endpoint
        self.index = BlockIndex(bound)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"kv-events {endpoint}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        while not self.stopped.is_set():
            socket = context.socket(zmq.SUB)
            try:
                socket.setsockopt(zmq.LINGER, 0)
                socket.setsockopt(zmq.MAXMSGSIZE, MAX_PAYLOAD + 1024)
                socket.setsockopt(zmq.RCVHWM, HIGH_WATER_MARK)
                socket.setsockopt(zmq.SUBSCRIBE, b"")
                socket.connect(self.endpoint)
                self._receive(socket)
            except zmq.ZMQError as error:
                self.index.counts["socket_errors"] += 1
                log.warning("KV-cache events from %s: %s", self.endpoint, error)
                self.stopped.wait(RETRY_SECONDS)
            finally:
                socket.close(linger=0)

    def _receive(self, socket: zmq.Socket) -> None:
        while not self.stopped.is_set():
            if not socket.poll(POLL_MS):
                continue
            frames = socket.recv_multipart(copy=True)
            try:
                self.index.receive(frames)
            except Exception:  # an unforeseen shape must not end the thread
                self.index.counts["malformed"] += 1
                log.exception("KV-cache event from %s not applied", self.endpoint)


_subscribers: dict[str, Subscriber] = {}
_lock = threading.Lock()


def index_for(endpoint: str) -> BlockIndex:
    """The endpoint's index, subscribing to it first if this process has not."""
    subscriber = _subscribers.get(endpoint)
    if subscriber is None:
        with _lock:
            subscriber = _subscribers.get(endpoint)
            if subscriber is None:
                bound = settings.SWITCHYARD_ROUTING["kv_events_blocks"]
                subscriber = _subscribers[endpoint] = Subscriber(endpoint, int(bound))
                subscriber.start()
    return subscriber.index


def stop_all() -> None:
    with _lock:
        for subscriber in _subscribers.values():
            subscriber.stop()
        _subscribers.clear()


class EventsCollector(Collector):
    """Each endpoint's events and blocks, read at scrape time."""

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        counts = CounterMetricFamily(
            "switchyard_kv_events",
            "KV-cache event batches and events received from precise backends, by outcome "
            "(batches, events, malformed, malformed_events, gaps, orphans, ...).",
            labels=["endpoint", "outcome"],
        )
        blocks = GaugeMetricFamily(
            "switchyard_kv_event_blocks",
            "Blocks a precise backend's events say it holds.",
            labels=["endpoint"],
        )
        for endpoint, subscriber in list(_subscribers.items()):
            for outcome, value in list(subscriber.index.counts.items()):
                counts.add_metric([endpoint, outcome], value)
            blocks.add_metric([endpoint], len(subscriber.index))
        yield counts
        yield blocks
