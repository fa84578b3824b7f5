"""How a response's events are numbered and encoded for each transport.

Every Responses event gets its ``sequence_number`` here, in
:meth:`EventWriter.numbered`, and nowhere else: a stream over HTTP (Server-Sent
Events, :class:`EventWriter`), over a WebSocket (one JSON text frame per event,
:class:`FrameWriter`) and a background run's event log (:class:`LogWriter`)
differ only in how a numbered event is written down. A transport's responder
(``Responder.writer``) says which writer its responses get.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson


def sse(event: dict[str, Any]) -> bytes:
    """One numbered event as a Server-Sent Event."""
    return b"event: %s\ndata: %s\n\n" % (event["type"].encode(), orjson.dumps(event))


class EventWriter:
    """Numbers Responses events and encodes them as Server-Sent Events;
    events written together become one buffer, so one network write carries
    every event that was ready."""

    __slots__ = ("delta_sent", "sequence")

    def __init__(self, first: int = 0) -> None:
        self.sequence = first
        self.delta_sent = False  # the first text delta has been written out

    def numbered(self, events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for event in events:
            event["sequence_number"] = self.sequence
            self.sequence += 1
            yield event

    def encoded(self, events: Iterable[dict[str, Any]]) -> list[bytes]:
        """Each event numbered and encoded on its own, as an event log keeps them."""
        return [sse(event) for event in self.numbered(events)]

    def encode(self, events: Iterable[dict[str, Any]]) -> bytes:
        return b"".join(self.encoded(events))


# Frames are joined by a newline between the writer and its responder: JSON
# as orjson writes it never holds a raw newline (strings escape it).
SEPARATOR = b"\n"


class FrameWriter(EventWriter):
    """Encodes events as newline-separated JSON objects, one WebSocket frame
    each, and remembers the last one (the terminal event, once the response
    has ended), which the connection's chain continues from."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, Any] | None = None

    def encode(self, events: Iterable[dict[str, Any]]) -> bytes:
        out = []
        last = None
        for last in self.numbered(events):
            out.append(orjson.dumps(last))
        if last is not None:
            self.last = last
        return SEPARATOR.join(out)


class LogWriter(EventWriter):
    """A background run's events, numbered after the ones its create request
    wrote, kept as they are made until its responder appends them to the
    response's event log: ``pending`` holds them encoded, ``last`` the latest
    response object an event carried. ``response.created`` is the create
    request's, already in the log, and is left out."""

    __slots__ = ("last", "pending")

    def __init__(self, first: int) -> None:
        super().__init__(first)
        self.pending: list[bytes] = []
        self.last: dict[str, Any] = {}

    def encode(self, events: Iterable[dict[str, Any]]) -> bytes:
        kept = [event for event in events if event["type"] != "response.created"]
        self.pending += self.encoded(kept)
        for event in reversed(kept):
            if "response" in event:
                self.last = event["response"]
                break
        return b""

    def take(self) -> list[bytes]:
        pending, self.pending = self.pending, []
        return pending
