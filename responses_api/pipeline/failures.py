"""What a client is told when its request failed inside the server."""

from __future__ import annotations

import logging

import redis.exceptions
from django import db

from responses_api.protocol.errors import ApiError
from responses_api.runtime.outages import failure_seen

log = logging.getLogger("switchyard.requests")

# A dependency out of reach, not a bug: the same request succeeds once it is
# back, which for a short blip (a Redis failover, a database restart) is
# seconds. The OpenAI SDKs retry a 503 and honour its Retry-After.
OUTAGES = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    db.OperationalError,
    db.InterfaceError,
)


def usage_backlog() -> ApiError:
    """The error of a request refused, before it is authenticated (so it
    makes no usage row), while this process holds as many unwritten rows as
    it may: neither Redis nor the database takes them, and a request served
    now would have its row held in memory without bound."""
    return ApiError(
        503,
        "Usage cannot be recorded for the moment, so no request is served; retry the request.",
        code="unavailable",
        headers=[(b"retry-after", b"2")],
    )


def server_error() -> ApiError:
    return ApiError(
        500, "The server had an error while processing the request.", code="server_error"
    )


def failure(request_id: str, exc: Exception) -> ApiError:
    """The error for ``exc``, raised while serving ``request_id``, logged as
    an outage (one line) or as a bug (with its traceback)."""
    if isinstance(exc, OUTAGES):
        failure_seen(exc)
        log.warning(
            "request %s: a dependency is unreachable: %s: %s", request_id, type(exc).__name__, exc
        )
        return ApiError(
            503,
            "A service this API depends on is unreachable for the moment; retry the request.",
            code="unavailable",
            headers=[(b"retry-after", b"2")],
        )
    log.error("request %s failed", request_id, exc_info=exc)
    return server_error()
