"""The chunks' vectors in PostgreSQL, when the database has pgvector
(docs/reference/retrieval.md, "Vector index").

Nothing happens on SQLite, nor on a PostgreSQL server that does not offer
the ``vector`` extension: the vectors are then searched in the process
(``retrieval/vectors.py``). When the server offers it, the extension is
created if this role may (a savepoint keeps a refusal from failing the
migration: an administrator can create it later and run
``manage.py pgvector_setup``), and then the tables below.

``responses_api_chunk_vector`` holds one row per embedded chunk, its vector
in a ``vector`` column without a fixed width (stores embed with models of
different widths); the HNSW indexes are partial, one per width, on the
column cast to that width, created when a width is first written
(``retrieval/pgvector.py``). ``responses_api_chunk_vector_sync`` holds, per
store, the ``index_version`` the table was last checked against. Django
knows neither table; triggers keep them in step with the chunks and stores
they describe (deleted or truncated with them), rather than foreign keys,
which would stop Django's own ``TRUNCATE`` of those tables in tests.
"""

from django.db import migrations, transaction

TABLES = (
    "CREATE TABLE IF NOT EXISTS responses_api_chunk_vector ("
    "chunk_id bigint PRIMARY KEY, store_id varchar(64) NOT NULL, file_id bigint NOT NULL, "
    "dimensions integer NOT NULL, embedding vector NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chunk_vector_store "
    "ON responses_api_chunk_vector (store_id, file_id)",
    "CREATE TABLE IF NOT EXISTS responses_api_chunk_vector_sync ("
    "store_id varchar(64) PRIMARY KEY, index_version bigint NOT NULL, vectors bigint NOT NULL)",
    "CREATE OR REPLACE FUNCTION responses_api_chunk_vector_delete() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN "
    "DELETE FROM responses_api_chunk_vector v USING gone WHERE v.chunk_id = gone.id; "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE FUNCTION responses_api_chunk_vector_truncate() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN TRUNCATE responses_api_chunk_vector; RETURN NULL; END $$",
    "CREATE OR REPLACE FUNCTION responses_api_chunk_vector_sync_delete() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN "
    "DELETE FROM responses_api_chunk_vector_sync s USING gone WHERE s.store_id = gone.id; "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE FUNCTION responses_api_chunk_vector_sync_truncate() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN TRUNCATE responses_api_chunk_vector_sync; RETURN NULL; END $$",
    "DROP TRIGGER IF EXISTS chunk_vector_delete ON responses_api_chunk",
    "CREATE TRIGGER chunk_vector_delete AFTER DELETE ON responses_api_chunk "
    "REFERENCING OLD TABLE AS gone FOR EACH STATEMENT "
    "EXECUTE FUNCTION responses_api_chunk_vector_delete()",
    "DROP TRIGGER IF EXISTS chunk_vector_truncate ON responses_api_chunk",
    "CREATE TRIGGER chunk_vector_truncate AFTER TRUNCATE ON responses_api_chunk "
    "FOR EACH STATEMENT EXECUTE FUNCTION responses_api_chunk_vector_truncate()",
    "DROP TRIGGER IF EXISTS chunk_vector_sync_delete ON responses_api_vectorstore",
    "CREATE TRIGGER chunk_vector_sync_delete AFTER DELETE ON responses_api_vectorstore "
    "REFERENCING OLD TABLE AS gone FOR EACH STATEMENT "
    "EXECUTE FUNCTION responses_api_chunk_vector_sync_delete()",
    "DROP TRIGGER IF EXISTS chunk_vector_sync_truncate ON responses_api_vectorstore",
    "CREATE TRIGGER chunk_vector_sync_truncate AFTER TRUNCATE ON responses_api_vectorstore "
    "FOR EACH STATEMENT EXECUTE FUNCTION responses_api_chunk_vector_sync_truncate()",
)
DROP = (
    "DROP TRIGGER IF EXISTS chunk_vector_sync_truncate ON responses_api_vectorstore",
    "DROP TRIGGER IF EXISTS chunk_vector_sync_delete ON responses_api_vectorstore",
    "DROP TRIGGER IF EXISTS chunk_vector_truncate ON responses_api_chunk",
    "DROP TRIGGER IF EXISTS chunk_vector_delete ON responses_api_chunk",
    "DROP FUNCTION IF EXISTS responses_api_chunk_vector_sync_truncate()",
    "DROP FUNCTION IF EXISTS responses_api_chunk_vector_sync_delete()",
    "DROP FUNCTION IF EXISTS responses_api_chunk_vector_truncate()",
    "DROP FUNCTION IF EXISTS responses_api_chunk_vector_delete()",
    "DROP TABLE IF EXISTS responses_api_chunk_vector_sync",
    "DROP TABLE IF EXISTS responses_api_chunk_vector",
)


def _scalar(connection, sql):
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def pgvector_install(connection, execute=None):
    """Create the extension (when offered and allowed) and the tables.
    Returns what happened: ``"sqlite"`` (or another database), ``"absent"``
    (not offered), ``"refused"`` (offered, this role may not create it),
    or ``"installed"``. Safe to run again."""
    if connection.vendor != "postgresql":
        return connection.vendor
    offered = "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
    if not _scalar(connection, offered):
        return "absent"
    created = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')"
    if not _scalar(connection, created):
        try:
            with transaction.atomic(using=connection.alias):
                with connection.cursor() as cursor:
                    cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception:  # noqa: BLE001 - refused: the migration goes on without it
            return "refused"
    with connection.cursor() as cursor:
        for statement in TABLES:
            (execute or cursor.execute)(statement)
    return "installed"


def forwards(apps, schema_editor):
    pgvector_install(schema_editor.connection, schema_editor.execute)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("responses_api", "0021_vector_store_api"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
