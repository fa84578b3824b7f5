"""``manage.py usage_deadletters``: usage rows the database refused.

Lists them (``--json`` for machine output), replays them into the usage log
(``--replay``: repaired by the current rules, idempotent on the request id;
a row still refused stays, with its new error), or deletes them. With
``REDIS_URL``, entries on the ``switchyard:usage:dead`` stream (where
earlier versions parked refused rows) are first moved into the table, so
none is left behind.

Exit status: 0 done (for a replay: every row written); 1 a replay left rows
refused or undecodable, or ``--delete`` named an unknown id; 2 bad
arguments; 3 the database (or Redis) is unavailable.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import InterfaceError, OperationalError

from accounts.management.commands._common import get_org
from accounts.models import Organisation
from responses_api.usage import replay
from responses_api.usage import writer as usage
from responses_api.usage.deadletters import deadletters_for

ERROR_CHARS = 120


class Command(BaseCommand):
    help = "List, replay or delete the usage rows the database refused (dead letters)."

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Only this organisation's (slug).")
        parser.add_argument("--json", action="store_true", help="One JSON object per line.")
        actions = parser.add_mutually_exclusive_group()
        actions.add_argument("--replay", action="store_true", help="Write them into the usage log.")
        actions.add_argument(
            "--delete", type=int, nargs="+", metavar="ID", help="Delete these dead letters."
        )
        actions.add_argument("--purge", action="store_true", help="Delete them all.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._handle(options)
        except (OperationalError, InterfaceError) as exc:
            raise CommandError(
                f"The database is unavailable ({type(exc).__name__}); nothing was lost.",
                returncode=3,
            ) from None

    def _handle(self, options: dict[str, Any]) -> None:
        if settings.REDIS_URL:
            self._adopt()
        organisation_id = get_org(options["org"]).pk if options["org"] else None
        letters = deadletters_for(organisation_id=organisation_id)
        if options["replay"]:
            ids = list(letters.values_list("pk", flat=True))
            if not ids:
                self.stdout.write("No dead letters.")
                return
            result = replay.deadletters_replay(ids=ids)
            self.stdout.write(
                f"{result.written} written, {result.refused} still refused, "
                f"{result.undecodable} undecodable."
            )
            if result.refused or result.undecodable:
                raise CommandError("Some dead letters remain (see the list).", returncode=1)
        elif options["delete"]:
            wanted = set(options["delete"])
            found = set(letters.filter(pk__in=wanted).values_list("pk", flat=True))
            letters.filter(pk__in=found).delete()
            self.stdout.write(f"{len(found)} deleted.")
            if wanted - found:
                missing = ", ".join(str(pk) for pk in sorted(wanted - found))
                raise CommandError(f"No dead letter with id {missing}.", returncode=1)
        elif options["purge"]:
            count, _ = letters.delete()
            self.stdout.write(f"{count} deleted.")
        else:
            self._list(letters, as_json=options["json"])

    def _adopt(self) -> None:
        import redis

        try:
            moved, left = replay.deadletters_adopt(usage.redis_client())
        except redis.RedisError as exc:
            raise CommandError(
                f"Redis is unavailable ({type(exc).__name__}).", returncode=3
            ) from None
        if moved:
            self.stderr.write(f"{moved} moved from the Redis stream {usage.dead_letter_stream()}.")
        if left:
            self.stderr.write(
                f"{left} left on {usage.dead_letter_stream()}: the table refused them."
            )

    def _list(self, letters, *, as_json: bool) -> None:
        slugs = dict(Organisation.objects.values_list("pk", "slug"))
        for letter in letters.iterator():
            organisation = slugs.get(letter.organisation_id, "")
            if as_json:
                entry = {
                    "id": letter.pk,
                    "request_id": letter.request_id,
                    "organisation_id": letter.organisation_id,
                    "organisation": organisation or None,
                    "created_at": letter.created_at.isoformat(),
                    "error": letter.error,
                }
                self.stdout.write(orjson.dumps(entry).decode())
                continue
            shown = organisation or (
                f"(deleted {letter.organisation_id})" if letter.organisation_id else "-"
            )
            error = letter.error.splitlines()[0][:ERROR_CHARS] if letter.error else ""
            self.stdout.write(
                f"{letter.pk}\t{letter.request_id or '-'}\t{shown}\t"
                f"{letter.created_at:%Y-%m-%d %H:%M:%S}Z\t{error}"
            )
