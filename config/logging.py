"""Log formatters: one JSON object per line (``LOG_FORMAT=json``) or text.

Request lines (logger ``switchyard.requests``) carry their fields in
``extra={"switchyard": {...}}``; those fields are chosen in ``relay.py`` and
never include prompts, answers or keys beyond the key's public prefix. Other
``extra`` attributes are not copied, so nothing reaches the output by accident.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson
from django.core.exceptions import PermissionDenied

_FIELDS = "switchyard"

# Neither format shows where a line was logged from, nor the thread or the
# process (one line a request is the whole log of the hot path). Without
# these, a record skips a walk up the caller's stack and three look-ups; the
# logging HOWTO's "Optimization" section names these switches. A custom
# LOGGING format that wants %(lineno)s or %(threadName)s turns them back on.
logging._srcfile = None
logging.logThreads = False
logging.logProcesses = False
logging.logMultiprocessing = False


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", ...fields, "exc_info"?}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, _FIELDS, None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time LEVEL logger message key=value ...``, for people at a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, _FIELDS, None)
        if isinstance(fields, dict):
            line += "".join(f" {k}={v}" for k, v in fields.items())
        return line


class PermissionDeniedWithoutTraceback(logging.Filter):
    """Django logs a 403 from ``PermissionDenied`` (logger ``django.request``)
    as a warning with the exception attached: a traceback for what is an
    ordinary answer to someone without the role. The line stays; the
    traceback goes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PermissionDenied):
            record.exc_info = None
            record.exc_text = None
        return True
