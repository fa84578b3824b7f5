"""``manage.py pgvector_setup``: create the pgvector extension and the
vector stores' vector tables (what migration 0022 does when the database
already offers pgvector), for a database that gained pgvector after it was
migrated. Safe to run again. Existing stores' vectors are copied into the
table at each store's next search; restart the web processes and workers
for them to use it (each asks the database once).

Exit status: 0 pgvector is installed (or was already); 1 the database is
not PostgreSQL, does not offer the extension, or this role may not create
it (a superuser can run ``CREATE EXTENSION vector`` and then this again).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from responses_api.retrieval import pgvector

EXPLAINED = {
    "absent": "the PostgreSQL server does not offer the vector extension (install pgvector)",
    "refused": "this role may not create the vector extension (a superuser can: "
    "CREATE EXTENSION vector)",
}


class Command(BaseCommand):
    help = "Create the pgvector extension and the vector tables of the vector stores."

    def handle(self, *args: Any, **options: Any) -> None:
        migration = import_module("responses_api.migrations.0022_pgvector")
        with transaction.atomic():
            outcome = migration.pgvector_install(connection)
        if outcome != "installed":
            reason = EXPLAINED.get(outcome, f"the database is {outcome}, not PostgreSQL")
            raise CommandError(f"pgvector is not set up: {reason}.", returncode=1)
        pgvector.forget_detection()
        self.stdout.write(
            "pgvector is set up: with SWITCHYARD_RETRIEVAL_VECTOR_BACKEND auto or pgvector, "
            "restarted processes search vector stores in PostgreSQL."
        )
