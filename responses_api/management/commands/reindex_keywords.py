"""``manage.py reindex_keywords [--org SLUG] [--batch N]``: rewrite the
keyword index of every organisation's vector stores (or one's) under the
current first encryption key, after a key rotation
(docs/operations/backups.md, "Key rotation"). Idempotent: a chunk already
indexed under the current key is not written again, so an interrupted run
is simply run again.

Exit status: 0 done; 1 some chunks' text opened under no listed key (left
as they were); 2 bad arguments."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts.management.commands._common import get_org
from accounts.models import Organisation
from responses_api.retrieval.reindex import BATCH, Reindexed, keywords_reindex


class Command(BaseCommand):
    help = "Recompute the keyword index's hashed words under the current encryption key."

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Only this organisation's stores (slug).")
        parser.add_argument(
            "--batch", type=int, default=BATCH, help=f"Chunks per batch (default {BATCH})."
        )

    def handle(self, *args: Any, org: str | None, batch: int, **options: Any) -> None:
        if batch < 1:
            raise CommandError("--batch must be at least 1.")
        organisations = [get_org(org)] if org else list(Organisation.objects.order_by("id"))
        unreadable = 0
        for organisation in organisations:

            def progress(done: Reindexed, total: int, slug: str = organisation.slug) -> None:
                self.stdout.write(f"{slug}: {done.chunks}/{total} chunks, {done.updated} rewritten")

            done = keywords_reindex(organisation.id, batch=batch, progress=progress)
            unreadable += done.unreadable
            self.stdout.write(
                f"{organisation.slug}: done, {done.chunks} chunks, {done.updated} rewritten"
                + (f", {done.unreadable} unreadable" if done.unreadable else "")
            )
        if unreadable:
            self.stderr.write(
                f"{unreadable} chunks' text opens under no listed key: list the key they "
                "were written under in SWITCHYARD_ENCRYPTION_KEYS_OLD and run this again."
            )
            raise SystemExit(1)
