"""A client's MCP credentials kept out of the logs of the libraries under
the MCP client.

The ``mcp`` SDK logs every message it receives at DEBUG, and a parse failure
with the offending body at ERROR; a server that echoes the client's token
back would have it logged. While a session runs, :func:`hiding` names its
secrets in a context variable (the SDK's tasks, started inside the session,
inherit it), and a filter on the SDK's, httpx2's and httpcore2's loggers
replaces them in every record those tasks log, the traceback included.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar

REDACTED = "[redacted]"
LIBRARIES = ("mcp", "mcp_types", "httpx2", "httpcore2")

_secrets: ContextVar[tuple[str, ...]] = ContextVar("mcp_secrets", default=())


def redact(text: str, secrets: list[str] | tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


class Redacting(logging.Filter):
    """Takes the current session's secrets out of a record: its message and
    its exception's text, formatted here (the formatter uses it as given)."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = _secrets.get()
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a malformed record: the handler reports it
        if any(secret in message for secret in secrets):
            record.msg, record.args = redact(message, secrets), None
        if record.exc_info:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, redact(text, secrets)
        return True


_FILTER = Redacting()


def _install() -> None:
    """On every logger of the libraries, as filters of a logger are not its
    children's; loggers made since the last session are covered by the next."""
    names = [
        name for name in list(logging.Logger.manager.loggerDict) if name.split(".")[0] in LIBRARIES
    ]
    for name in (*LIBRARIES, *names):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


@contextlib.contextmanager
def hiding(secrets: list[str]) -> Iterator[None]:
    """Within: the libraries' log records carry none of ``secrets``."""
    if not secrets:
        yield
        return
    _install()
    token = _secrets.set(tuple(secrets))
    try:
        yield
    finally:
        _secrets.reset(token)
