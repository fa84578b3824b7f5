"""Every reader and writer of a usage row follows ``UsageLog``'s columns, so
a column added to the model is exported (or deliberately not) everywhere."""

import uuid
from types import SimpleNamespace
from typing import Any

from django.utils import timezone

from accounts.models import Organisation
from responses_api.models import UsageLog
from responses_api.pipeline.exchange import Exchange
from responses_api.usage.columns import (
    USAGE_EXPORT_COLUMNS,
    USAGE_UNEXPORTED_COLUMNS,
    usage_columns,
)
from responses_api.usage.export import CSV_HEADER, RECORD_COLUMNS
from responses_api.usage.trace import usage_row_dict

COLUMNS = {f.attname for f in UsageLog._meta.concrete_fields}


def test_every_column_is_exported_or_explicitly_left_out():
    exported, unexported = set(USAGE_EXPORT_COLUMNS), set(USAGE_UNEXPORTED_COLUMNS)
    assert len(exported) == len(USAGE_EXPORT_COLUMNS)
    assert not exported & unexported
    assert exported | unexported == COLUMNS


def test_the_exports_keep_their_column_order():
    assert USAGE_EXPORT_COLUMNS[:5] == (
        "request_id",
        "created_at",
        "finished_at",
        "key_prefix",
        "model",
    )
    assert CSV_HEADER[:6] == (
        "request_id",
        "created_at",
        "finished_at",
        "organisation",
        "key_prefix",
        "key_name",
    )
    assert RECORD_COLUMNS[:5] == (
        "request_id",
        "created_at",
        "finished_at",
        "api_key_id",
        "key_prefix",
    )
    assert RECORD_COLUMNS[4:] == USAGE_EXPORT_COLUMNS[3:]


def test_a_submitted_row_names_every_column():
    caller = SimpleNamespace(organisation_id=1, key_id=str(uuid.uuid4()), prefix="sy_sk_abcdefgh")
    exchange = Exchange(request_id=str(uuid.uuid4()), endpoint="/v1/responses", caller=caller)
    assert set(exchange.row()) == set(usage_columns()) == COLUMNS - {"id"}


class _Reads:
    """A usage row that remembers which of its attributes were read."""

    def __init__(self, row: UsageLog) -> None:
        self.row = row
        self.names: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.names.add(name)
        return getattr(self.row, name)


def test_the_trace_shows_every_exported_column():
    row = UsageLog(
        request_id=uuid.uuid4(),
        organisation=Organisation(id=1, slug="acme"),
        endpoint="/v1/responses",
        status=200,
        created_at=timezone.now(),
    )
    reads = _Reads(row)
    usage_row_dict(reads)
    assert set(USAGE_EXPORT_COLUMNS) <= reads.names


def test_the_schema_describes_every_key_of_a_usage_record():
    from admin_api.serializers.usage import UsageRecordSerializer
    from responses_api.usage.export import usage_record

    record = usage_record(None for _ in RECORD_COLUMNS)
    assert list(UsageRecordSerializer().fields) == list(record)
