"""Hourly and daily sums of the usage log, kept as rows are written.

The usage writer (``responses_api/usage/writer.py``) calls :func:`rollups_add` with
the rows its ``INSERT … ON CONFLICT (request_id) DO NOTHING … RETURNING``
actually inserted, inside the same transaction. So a cell counts a request
exactly when its row exists: a crash before the commit loses both, a row
delivered twice is inserted, and counted, once. Nothing is ever rebuilt.

Each cell is one upsert, ``INSERT … ON CONFLICT (cell) DO UPDATE SET n =
cell.n + excluded.n`` — the same statement on PostgreSQL and SQLite. A batch
adds its rows up per cell first and upserts the cells in a fixed order, so
two writers touching the same cells queue on the row locks instead of
deadlocking.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model

from responses_api.models import NO_ID, UsageDaily, UsageHourly
from responses_api.runtime import histogram

STATUS_CLASSES = ("2xx", "4xx", "429", "499", "5xx")
MEASURES = (
    "requests",
    "errors",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_nanos",
)
DIMENSIONS = (
    "organisation_id",
    "bucket_start",
    "model",
    "api_key_id",
    "backend_id",
    "status_class",
)
_SUMS = (*MEASURES, *histogram.COLUMNS)
_TTFT_AT = len(MEASURES)
_NANOS = Decimal(1_000_000_000)

Cell = tuple[int, datetime, str, uuid.UUID, uuid.UUID, str]


def status_class(status: int) -> str:
    if status == 429 or status == 499:
        return str(status)
    if status >= 500:
        return "5xx"
    if status >= 400:
        return "4xx"
    return "2xx"


def is_error(status_class: str) -> bool:
    """Errors, as the dashboard counts them: 4xx and 5xx, but not 499."""
    return status_class in ("4xx", "429", "5xx")


def cost_nanos(cost: Any) -> int:
    if not cost:
        return 0
    return int((Decimal(str(cost)) * _NANOS).to_integral_value())


def _uuid(value: Any) -> uuid.UUID:
    if not value:
        return NO_ID
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def hour_of(stamp: datetime) -> datetime:
    return stamp.replace(minute=0, second=0, microsecond=0)


def day_of(stamp: datetime) -> datetime:
    return stamp.replace(hour=0, minute=0, second=0, microsecond=0)


def cells_of(rows: Iterable[dict[str, Any]]) -> dict[Cell, list[int]]:
    """Hourly cells with the sums of ``rows`` (prepared usage rows: aware
    ``created_at``), in the order of :data:`MEASURES` then the histogram."""
    cells: dict[Cell, list[int]] = {}
    for row in rows:
        if row.get("is_check"):
            continue  # a model check's request: the platform's, in no figure
        status = int(row["status"])
        klass = status_class(status)
        cell = (
            int(row["organisation_id"]),
            hour_of(row["created_at"]),
            row.get("model") or "",
            _uuid(row.get("api_key_id")),
            _uuid(row.get("backend_id")),
            klass,
        )
        sums = cells.get(cell)
        if sums is None:
            sums = cells[cell] = [0] * len(_SUMS)
        sums[0] += 1
        sums[1] += is_error(klass)
        sums[2] += row.get("input_tokens") or 0
        sums[3] += row.get("cached_tokens") or 0
        sums[4] += row.get("output_tokens") or 0
        sums[5] += row.get("reasoning_tokens") or 0
        sums[6] += cost_nanos(row.get("cost"))
        ttft = row.get("ttft_ms")
        if ttft is not None:
            sums[_TTFT_AT + histogram.bucket_of(ttft)] += 1
    return cells


def days_of(hours: dict[Cell, list[int]]) -> dict[Cell, list[int]]:
    days: dict[Cell, list[int]] = {}
    for (org, hour, *rest), sums in hours.items():
        cell = (org, day_of(hour), *rest)
        into = days.get(cell)  # type: ignore[arg-type]
        if into is None:
            days[cell] = list(sums)  # type: ignore[index]
        else:
            for i, value in enumerate(sums):
                into[i] += value
    return days


class _Upsert:
    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self.table = model._meta.db_table
        self.fields: list[Any] = [model._meta.get_field(name) for name in (*DIMENSIONS, *_SUMS)]

    def sql(self, connection) -> str:
        quote = connection.ops.quote_name
        table = quote(self.table)
        columns = [f.column for f in self.fields]
        conflict = ", ".join(quote(c) for c in columns[: len(DIMENSIONS)])
        sets = ", ".join(
            f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}"
            for c in columns[len(DIMENSIONS) :]
        )
        return (
            f"INSERT INTO {table} ({', '.join(quote(c) for c in columns)}) "
            f"VALUES ({', '.join(['%s'] * len(columns))}) "
            f"ON CONFLICT ({conflict}) DO UPDATE SET {sets}"
        )

    def __call__(self, cells: dict[Cell, list[int]], connection) -> None:
        dims = self.fields[: len(DIMENSIONS)]
        params = [
            (*(f.get_db_prep_save(v, connection) for f, v in zip(dims, cell, strict=True)), *sums)
            for cell, sums in sorted(cells.items(), key=_order)
        ]
        with connection.cursor() as cursor:
            cursor.executemany(self.sql(connection), params)


def _order(item: tuple[Cell, list[int]]) -> tuple:
    org, start, model, key, backend, klass = item[0]
    return (org, start, model, key.hex, backend.hex, klass)


_hourly = _Upsert(UsageHourly)
_daily = _Upsert(UsageDaily)


def rollups_add(rows: list[dict[str, Any]]) -> None:
    """Add inserted usage rows to their hourly and daily cells. Call it in
    the transaction that inserted them."""
    if rows:
        rollups_add_cells(cells_of(rows))


def rollups_add_cells(hours: dict[Cell, list[int]]) -> None:
    """Add hourly cells (from :func:`cells_of`) and the days they make up."""
    connection = connections[DEFAULT_DB_ALIAS]
    _hourly(hours, connection)
    _daily(days_of(hours), connection)
