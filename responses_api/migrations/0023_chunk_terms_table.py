from django.db import migrations

# PostgreSQL's keyword index moves out of the chunk row into a narrow table
# of its own (docs/reference/retrieval.md, "Keyword index, per database"):
# ranking a match reads its tsvector, and in the chunk row, beside the sealed
# text and the embedding, that tsvector was compressed and often stored out
# of line, so each match cost a heap page and a TOAST fetch. The table is
# kept by statement-level triggers on the chunks, as SQLite's FTS5 table is
# by row triggers; Django does not know it. SQLite is unchanged.
POSTGRES_CREATE = (
    "CREATE TABLE responses_api_chunk_terms ("
    "chunk_id bigint PRIMARY KEY, store_id varchar(64) NOT NULL, "
    "file_id bigint NOT NULL, terms_tsv tsvector NOT NULL)",
    "INSERT INTO responses_api_chunk_terms "
    "SELECT id, store_id, file_id, to_tsvector('simple'::regconfig, terms) "
    "FROM responses_api_chunk",
    "CREATE INDEX chunk_terms_gin ON responses_api_chunk_terms USING gin (terms_tsv)",
    """CREATE FUNCTION responses_api_chunk_terms_add() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO responses_api_chunk_terms
        SELECT id, store_id, file_id, to_tsvector('simple'::regconfig, terms) FROM new_rows;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION responses_api_chunk_terms_remove() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM responses_api_chunk_terms t USING old_rows o WHERE t.chunk_id = o.id;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION responses_api_chunk_terms_replace() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM responses_api_chunk_terms t USING old_rows o WHERE t.chunk_id = o.id;
        INSERT INTO responses_api_chunk_terms
        SELECT id, store_id, file_id, to_tsvector('simple'::regconfig, terms) FROM new_rows;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION responses_api_chunk_terms_empty() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE responses_api_chunk_terms;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER chunk_terms_insert AFTER INSERT ON responses_api_chunk "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION responses_api_chunk_terms_add()",
    "CREATE TRIGGER chunk_terms_delete AFTER DELETE ON responses_api_chunk "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION responses_api_chunk_terms_remove()",
    "CREATE TRIGGER chunk_terms_update AFTER UPDATE ON responses_api_chunk "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION responses_api_chunk_terms_replace()",
    # Django's test flush truncates the tables it knows.
    "CREATE TRIGGER chunk_terms_truncate AFTER TRUNCATE ON responses_api_chunk "
    "FOR EACH STATEMENT EXECUTE FUNCTION responses_api_chunk_terms_empty()",
    "ALTER TABLE responses_api_chunk DROP COLUMN IF EXISTS terms_tsv",
)
POSTGRES_DROP = (
    "ALTER TABLE responses_api_chunk ADD COLUMN terms_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, terms)) STORED",
    "CREATE INDEX chunk_terms_fts ON responses_api_chunk USING gin (terms_tsv)",
    "DROP TRIGGER IF EXISTS chunk_terms_truncate ON responses_api_chunk",
    "DROP TRIGGER IF EXISTS chunk_terms_update ON responses_api_chunk",
    "DROP TRIGGER IF EXISTS chunk_terms_delete ON responses_api_chunk",
    "DROP TRIGGER IF EXISTS chunk_terms_insert ON responses_api_chunk",
    "DROP FUNCTION IF EXISTS responses_api_chunk_terms_empty()",
    "DROP FUNCTION IF EXISTS responses_api_chunk_terms_replace()",
    "DROP FUNCTION IF EXISTS responses_api_chunk_terms_remove()",
    "DROP FUNCTION IF EXISTS responses_api_chunk_terms_add()",
    "DROP TABLE IF EXISTS responses_api_chunk_terms",
)


def _run(statements, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in statements:
            schema_editor.execute(statement)


def terms_table_create(apps, schema_editor):
    _run(POSTGRES_CREATE, schema_editor)


def terms_table_drop(apps, schema_editor):
    _run(POSTGRES_DROP, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("responses_api", "0022_pgvector"),
    ]

    operations = [
        migrations.RunPython(terms_table_create, terms_table_drop),
    ]
