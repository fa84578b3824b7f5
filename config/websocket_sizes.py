"""A WebSocket message over the size cap is answered, not dropped.

Autobahn (under daphne) enforces the cap on a message's size
(``maxMessagePayloadSize``, ``SWITCHYARD_MAX_BODY_BYTES`` here): on the
frame header announcing more, or, for a compressed message
(permessage-deflate), as soon as inflating it would pass the cap (it
inflates at most the cap's worth). Stock autobahn then fails the
connection with close code 1009 and nothing else, so the client learns
nothing it can act on. Here the application is told instead (one
``websocket.receive`` message carrying :data:`TOO_LARGE`, the cap) and
sends the ``error`` frame and the close (4413) itself; autobahn reads and
discards what is left of the message, and everything after it, until the
close. Should the application not close the socket within
:data:`CLOSE_WITHIN` seconds, the protocol closes it with 4413.

The hook is autobahn's ``_max_message_size_exceeded``, the one method every
size check calls; it is checked for at start-up (:func:`check`), and without
it the stock behaviour stays. It is not one of the switchable server patches
(``config/patches.py``): it is applied with ``SWITCHYARD_SERVER_PATCHES=none``
too, on whatever protocol class daphne's factory makes.
"""

from __future__ import annotations

from typing import Any

CLOSE_WITHIN = 10.0
CLOSE_CODE = 4413


def check(protocol: type) -> list[str]:
    """Why the hook cannot be used on ``protocol`` (none: it can): every size
    check calls it, and skips a message once ``failedByMe`` is set."""
    from config.patch_support import missing, unused_by

    problems = missing(protocol, "_max_message_size_exceeded", "STATE_OPEN", "sendCloseFrame")
    for caller in ("onMessageFrameBegin", "onFrameData"):
        if hasattr(protocol, caller):
            hook = getattr(protocol, caller)
            problems += unused_by(hook, "_max_message_size_exceeded", "failedByMe")
        else:
            problems.append(f"{protocol.__name__}.{caller} is missing")
    return problems


def answering(protocol: type) -> type:
    """A subclass of daphne's WebSocket protocol ``protocol`` whose over-size
    messages reach the application as :data:`TOO_LARGE`."""
    from twisted.internet import reactor

    from responses_api.edge.frames import TOO_LARGE

    clock: Any = reactor
    open_state = getattr(protocol, "STATE_OPEN")  # noqa: B009 (a class built at run time)

    class Answering(protocol):  # type: ignore[valid-type, misc]
        _too_large_deadline: Any = None

        def _max_message_size_exceeded(self, msg_size: int, max_msg_size: int, reason: str) -> None:
            queue = getattr(self, "application_queue", None)
            if queue is None or getattr(self, "muted", False) or self.state != open_state:
                super()._max_message_size_exceeded(msg_size, max_msg_size, reason)
                return
            # Autobahn skips what follows of a message once it has failed the
            # connection: the same flag, without the close it would send.
            self.failedByMe = True
            queue.put_nowait({"type": "websocket.receive", TOO_LARGE: max_msg_size})
            self._too_large_deadline = clock.callLater(CLOSE_WITHIN, self._close_too_large, reason)

        def _close_too_large(self, reason: str) -> None:
            self._too_large_deadline = None
            if self.state == open_state:
                reason_utf8 = reason[:120].encode()
                self.sendCloseFrame(code=CLOSE_CODE, reasonUtf8=reason_utf8, isReply=False)

        def connectionLost(self, reason: Any) -> None:
            if self._too_large_deadline is not None:
                self._too_large_deadline.cancel()
                self._too_large_deadline = None
            super().connectionLost(reason)

    Answering.__name__ = Answering.__qualname__ = f"Answering{protocol.__name__}"
    return Answering
