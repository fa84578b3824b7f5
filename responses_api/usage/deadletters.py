"""Dead letters: usage rows the database refused, kept until replayed.

After ``responses_api/usage/sanitise.py`` has made every value fit its
column, what the database can still refuse is a row whose organisation no
longer exists, or one a bug of the writer's made unwritable. Such a row must
neither block the rows after it (the writer would retry its batch forever)
nor vanish (the client was answered; the request happened). It is kept here,
in the database both modes share, one place for ``manage.py
usage_deadletters`` to list and replay. Each one is counted
(``switchyard_usage_dead_letters_total{reason}``) and logged by request id
and error class only: a row's text (user agent, session id, error message)
never goes to the logs.

Storing is idempotent on the request id: a row refused again (a writer that
died before acknowledging it, a replay that failed) updates its entry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import QuerySet

from responses_api.models import UsageDeadLetter
from responses_api.runtime.metrics import dead_letter_observe
from responses_api.usage.sanitise import json_clean, text_clean

log = logging.getLogger(__name__)

_ERROR_CHARS = 2000
_ORGANISATION_IDS = (-(2**31), 2**31 - 1)  # the column is an IntegerField


def database_unavailable(exc: BaseException) -> bool:
    """The database is down, unreachable or busy (SQLite's "database is
    locked"): the rows are fine, so they are kept and written later. Any
    other error while writing a row is the row's own."""
    return isinstance(exc, OperationalError | InterfaceError)


@dataclass(frozen=True)
class Refusal:
    """A row and why the database refused it."""

    row: dict[str, Any]
    reason: str  # the error's class: a metric label, so a short fixed set
    message: str

    @classmethod
    def of(cls, row: dict[str, Any], exc: BaseException) -> Refusal:
        return cls(row, type(exc).__name__, str(exc))


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError


def row_encode(row: dict[str, Any]) -> str:
    """The row as JSON text any database stores: NUL is escaped as
    ``\\u0000`` by the encoder, so the original value is kept for replay."""
    try:
        raw = orjson.dumps(row, default=_default, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # a lone surrogate, an integer past 64 bits, an odd type
        raw = orjson.dumps(json_clean(row))
    return raw.decode()


def row_decode(text: str) -> dict[str, Any] | None:
    """The row a dead letter keeps, or None when it is not one (an entry of
    the Redis stream that was never JSON)."""
    try:
        row = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return row if isinstance(row, dict) and "undecodable" not in row else None


def _organisation_id(row: dict[str, Any]) -> int | None:
    value = row.get("organisation_id")
    if type(value) is not int:
        try:
            value = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return None
    low, high = _ORGANISATION_IDS
    return value if low <= value <= high else None


def deadletters_add(*, refused: list[Refusal]) -> list[Refusal]:
    """Keep the refused rows; returns those even this table refused (the
    caller has one more place to put them, or logs them as lost). A database
    that is down raises: the caller keeps the rows and retries."""
    unstored: list[Refusal] = []
    for refusal in refused:
        request_id = text_clean(str(refusal.row.get("request_id") or ""), 64)
        error = text_clean(f"{refusal.reason}: {refusal.message}", _ERROR_CHARS)
        try:
            with transaction.atomic():
                updated = (
                    UsageDeadLetter.objects.filter(request_id=request_id).update(error=error)
                    if request_id
                    else 0
                )
                if not updated:
                    UsageDeadLetter.objects.create(
                        request_id=request_id,
                        organisation_id=_organisation_id(refusal.row),
                        row=row_encode(refusal.row),
                        error=error,
                    )
        except Exception as exc:
            if database_unavailable(exc):
                raise
            log.error(
                "usage row %s could not be kept as a dead letter (%s)",
                request_id,
                type(exc).__name__,
            )
            unstored.append(refusal)
            continue
        if not updated:
            dead_letter_observe(reason=refusal.reason)
            log.error(
                "usage row %s refused by the database (%s); kept as a dead letter",
                request_id or f"(stream entry {refusal.row.get('entry', '?')})",
                refusal.reason,
            )
    return unstored


def deadletters_for(*, organisation_id: int | None = None) -> QuerySet[UsageDeadLetter]:
    """Dead letters, oldest first; of one organisation when given."""
    letters = UsageDeadLetter.objects.all()
    if organisation_id is not None:
        letters = letters.filter(organisation_id=organisation_id)
    return letters


def deadletter_refused_again(*, letter: UsageDeadLetter, refusal: Refusal) -> None:
    """A replayed row still refused: its entry stays, with the new error."""
    letter.error = text_clean(f"{refusal.reason}: {refusal.message}", _ERROR_CHARS)
    letter.save(update_fields=["error"])
