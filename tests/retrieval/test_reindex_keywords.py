"""A rotation of the first encryption key changes every word's hash in the
keyword index: search keeps finding chunks indexed before it while the old
key is listed, and ``manage.py reindex_keywords`` rewrites them under the
new key (their text too), so that the old key can go."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from responses_api.models import Chunk
from responses_api.retrieval import keyword
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.search import vector_store_search
from responses_api.retrieval.terms import hashed, term_key
from responses_api.runtime import secrets

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
TEXT = "Expenses are reimbursed within thirty days of a claim."


@pytest.fixture
def keys(settings) -> Iterator:
    def under(key: str, old: str = "") -> None:
        settings.SWITCHYARD_ENCRYPTION_KEY, settings.SWITCHYARD_ENCRYPTION_KEYS_OLD = key, old
        secrets._fernet.cache_clear()

    yield under
    secrets._fernet.cache_clear()


def found(people, store, query: str = "reimbursed") -> list[str]:
    page = vector_store_search(organisation_id=people["acme"].id, store_id=store.id, query=query)
    return [result["content"][0]["text"] for result in page["data"]]


def by_current_key(people, store, word: str = "reimbursed") -> list[tuple[int, float]]:
    """The keyword index searched under the current key alone."""
    return keyword.keyword_search(store.id, [hashed(term_key(people["acme"].id), word)], 10)


def reindex(*args: str) -> str:
    out = io.StringIO()
    call_command("reindex_keywords", *args, stdout=out)
    return out.getvalue()


def test_reindexing_after_a_rotation_finds_again(people, acme_store, keys):
    keys(OLD)
    for index in range(3):
        done = ingest_file(
            people["acme"].id, acme_store.id, f"file-{index}", TEXT.encode(), "a.txt", None
        )
        assert done.status == "completed", done.last_error
    assert found(people, acme_store) == [TEXT] * 3
    keys(NEW, OLD)
    # The index still holds the old key's hashes: the new key's miss them,
    # and the search finds them through the old key while it is listed.
    assert by_current_key(people, acme_store) == []
    assert found(people, acme_store) == [TEXT] * 3
    output = reindex("--batch", "2")
    assert "acme: 2/3 chunks, 2 rewritten" in output
    assert "acme: done, 3 chunks, 3 rewritten" in output
    assert len(by_current_key(people, acme_store)) == 3
    # Idempotent: nothing left to rewrite.
    assert "acme: done, 3 chunks, 0 rewritten" in reindex("--org", "acme")
    # The old key unlisted: words and text are under the new key alone.
    keys(NEW)
    assert found(people, acme_store) == [TEXT] * 3
    assert found(people, acme_store, "thirty days claim") == [TEXT] * 3


def test_without_the_reindex_the_old_key_going_loses_the_words(people, acme_store, keys):
    keys(OLD)
    ingest_file(people["acme"].id, acme_store.id, "file-a", TEXT.encode(), "a.txt", None)
    keys(NEW)
    assert found(people, acme_store) == []


def test_another_organisation_is_left_alone_and_unreadable_chunks_are_reported(
    people, acme_store, keys
):
    from responses_api.retrieval.stores import vector_store_create

    keys(OLD)
    globex = vector_store_create(organisation_id=people["globex"].id, name="Globex")
    ingest_file(people["acme"].id, acme_store.id, "file-a", TEXT.encode(), "a.txt", None)
    ingest_file(people["globex"].id, globex.id, "file-g", TEXT.encode(), "g.txt", None)
    before = Chunk.objects.get(store=globex)
    keys(NEW, OLD)
    assert "acme: done, 1 chunks, 1 rewritten" in reindex("--org", "acme")
    assert Chunk.objects.get(store=globex).terms == before.terms
    keys(NEW)  # globex's chunk is under a key no longer listed
    with pytest.raises(SystemExit) as exit_:
        reindex("--org", "globex")
    assert exit_.value.code == 1
    assert Chunk.objects.get(store=globex).terms == before.terms
