"""``manage.py usage_export``: an organisation's usage log on stdout, as CSV or JSON lines.

Rows are read from the database in chunks (a server-side cursor on
PostgreSQL) and written as they come, so memory stays bounded whatever the
size of the log.
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime

import orjson
from django.core.management.base import BaseCommand, CommandError

from accounts.management.commands._common import get_org
from responses_api.models import UsageLog
from responses_api.usage.columns import USAGE_EXPORT_COLUMNS
from responses_api.usage.spreadsheet import csv_value

CHUNK = 2000
COLUMNS = USAGE_EXPORT_COLUMNS


def _when(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(
            f"--{name} {value!r} is not an ISO 8601 date or time (e.g. 2026-05-01T12:00)."
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _json(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | list | str):
        return value
    return str(value)  # UUID, Decimal


class Command(BaseCommand):
    help = "Write an organisation's usage rows to stdout (CSV or JSON lines), oldest first."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organisation slug.")
        parser.add_argument("--since", help="Only rows created at or after (ISO 8601, UTC).")
        parser.add_argument("--until", help="Only rows created before (ISO 8601, UTC).")
        parser.add_argument("--status", type=int, help="Only rows with this HTTP status.")
        parser.add_argument("--format", choices=("csv", "jsonl"), default="csv")

    def handle(self, *args, **options):
        organisation = get_org(options["org"])
        rows = UsageLog.objects.filter(organisation=organisation)
        since, until = _when(options["since"], "since"), _when(options["until"], "until")
        if since is not None:
            rows = rows.filter(created_at__gte=since)
        if until is not None:
            rows = rows.filter(created_at__lt=until)
        if options["status"] is not None:
            rows = rows.filter(status=options["status"])
        values = rows.order_by("created_at", "id").values_list(*COLUMNS)
        out = self.stdout
        if options["format"] == "csv":
            # RFC 4180's CRLF: the writer then quotes a cell holding a lone
            # CR (a user agent may), which "\n" line ends would leave bare.
            writer = csv.writer(out)
            writer.writerow(COLUMNS)
            for record in values.iterator(chunk_size=CHUNK):
                writer.writerow([csv_value(c, v) for c, v in zip(COLUMNS, record, strict=True)])
        else:
            for record in values.iterator(chunk_size=CHUNK):
                line = dict(zip(COLUMNS, (_json(v) for v in record), strict=True))
                out.write(orjson.dumps(line).decode())  # write() ends the line
        out.flush()
