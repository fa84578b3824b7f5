"""Bringing dead letters back: usage rows the database once refused.

An operator's tools (``manage.py usage_deadletters``), off the request path:
a replay writes the kept rows through the usage writer's own commit,
repaired by today's rules, and an adoption moves what earlier versions
parked on the Redis dead-letter stream into the dead letters' table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from responses_api.usage.deadletters import (
    Refusal,
    deadletter_refused_again,
    deadletters_add,
    deadletters_for,
    row_decode,
)
from responses_api.usage.insert import prepared_row
from responses_api.usage.writer import dead_letter_stream, rows_commit


@dataclass(frozen=True)
class Replayed:
    written: int  # now in the usage log (inserted, or there already)
    refused: int  # still refused: kept, with the new error
    undecodable: int  # not a row at all (an entry of the stream that was not JSON)


def deadletters_replay(*, ids: Sequence[int] = ()) -> Replayed:
    """Write dead letters (all, or those of ``ids``) into the usage log,
    repaired by today's rules, and delete those written. Idempotent: a row
    already in the log counts as written. A key or backend deleted since
    the request is dropped from the row, as its deletion would have done
    (``SET_NULL``) had the row been written then. A database that is down
    raises; what was replayed until then stays replayed."""
    from accounts.models import ApiKey
    from responses_api.models import Backend

    letters = deadletters_for()
    if ids:
        letters = letters.filter(pk__in=ids)
    written = refused = undecodable = 0
    for letter in list(letters):
        row = row_decode(letter.row)
        if row is None:
            undecodable += 1
            continue
        data = prepared_row(row)
        for name, model in (("api_key_id", ApiKey), ("backend_id", Backend)):
            if data.get(name) is not None and not model.objects.filter(pk=data[name]).exists():
                data[name] = None
        refusals = rows_commit([data])
        if refusals:
            deadletter_refused_again(letter=letter, refusal=refusals[0])
            refused += 1
        else:
            letter.delete()
            written += 1
    return Replayed(written, refused, undecodable)


def deadletters_adopt(client) -> tuple[int, int]:
    """Move the entries of the ``switchyard:usage:dead`` stream (where
    earlier versions parked refused rows, and where rows go that even the
    dead letters' table refused) into that table, so that they are listed
    and replayed with the others. Returns (moved, left in the stream)."""
    entries = client.xrange(dead_letter_stream())
    moved = left = 0
    for entry_id, fields in entries:
        try:
            parked = orjson.loads(fields[b"r"])
        except (orjson.JSONDecodeError, KeyError):
            parked = {"undecodable": repr(fields)[:2000]}
        if isinstance(parked, dict) and isinstance(parked.get("row"), dict):
            row, reason = parked["row"], str(parked.get("error") or "refused")
        elif isinstance(parked, dict) and "fields" not in parked:
            row, reason = parked, "refused"
        else:  # an entry that was never a row
            row, reason = {"undecodable": str(parked)[:2000]}, "undecodable"
        refusal = Refusal(row, reason, "moved from the Redis stream " + dead_letter_stream())
        if deadletters_add(refused=[refusal]):
            left += 1
        else:
            client.xdel(dead_letter_stream(), entry_id)
            moved += 1
    return moved, left
