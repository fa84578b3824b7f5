"""Vector stores across tenants, hostile files added through the API, and
what deleting a file or a store takes with it."""

from __future__ import annotations

import io
import zipfile

import openai
import pytest

from tests.conftest import usage_rows, wait_for
from tests.vector_stores.conftest import sdk

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TEXT = b"The quarterly revenue report lists every region.\n"


def doc(name: str, content: bytes) -> tuple[str, io.BytesIO]:
    return name, io.BytesIO(content)


def error_of(request) -> tuple[int, dict]:
    with pytest.raises(openai.APIStatusError) as refused:
        request()
    return refused.value.status_code, refused.value.response.json()["error"]


def test_another_organisation_s_store_and_file_answer_as_missing(acme, globex):
    store = acme.vector_stores.create(name="Acme only")
    acme_file = acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("r.txt", TEXT), poll_interval_ms=100
    )
    missing = "vs_" + "0" * 32
    mine = globex.vector_stores.create(name="Globex")
    pairs = [
        (lambda s: globex.vector_stores.retrieve(s), store.id, missing),
        (lambda s: globex.vector_stores.search(s, query="revenue"), store.id, missing),
        (lambda s: globex.vector_stores.files.list(vector_store_id=s), store.id, missing),
        (lambda s: globex.vector_stores.update(s, name="x"), store.id, missing),
        (lambda s: globex.vector_stores.delete(s), store.id, missing),
        (
            lambda s: globex.vector_stores.files.create(vector_store_id=s, file_id=acme_file.id),
            store.id,
            missing,
        ),
        # Acme's file into Globex's own store: the file is not Globex's.
        (
            lambda f: globex.vector_stores.files.create(vector_store_id=mine.id, file_id=f),
            acme_file.id,
            "file-" + "0" * 24,
        ),
        (
            lambda f: globex.vector_stores.file_batches.create(mine.id, file_ids=[f]),
            acme_file.id,
            "file-" + "0" * 24,
        ),
    ]
    for request, theirs, unknown in pairs:
        status, error = error_of(lambda r=request, t=theirs: r(t))
        status_missing, error_missing = error_of(lambda r=request, u=unknown: r(u))
        assert status == status_missing == 404
        assert error["message"].replace(theirs, "ID") == error_missing["message"].replace(
            unknown, "ID"
        )
        assert (error["code"], error["param"]) == (error_missing["code"], error_missing["param"])
    assert acme.vector_stores.retrieve(store.id).file_counts.completed == 1
    assert globex.vector_stores.files.list(vector_store_id=mine.id).data == []


def _zip_bomb_named_pdf() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.txt", b"0" * (50 << 20))
    return out.getvalue()


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("report.pdf", _zip_bomb_named_pdf(), "ZIP archive"),
        ("rows.csv", b'a,b\n1,"unterminated\n2,3\n', "CSV"),
        ("same.txt", b"token " * 10_000_000, "longer than"),
    ],
)
def test_a_hostile_file_fails_with_its_error_and_one_row(acme, tenants, name, content, message):
    store = acme.vector_stores.create()
    failed = acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc(name, content), poll_interval_ms=100
    )
    assert failed.status == "failed"
    assert failed.last_error.code == "invalid_file" and message in failed.last_error.message
    counts = acme.vector_stores.retrieve(store.id).file_counts
    assert (counts.failed, counts.completed, counts.total) == (1, 0, 1)
    # Nothing was embedded; the server still answers.
    org = tenants[0].organisation
    assert [r for r in usage_rows(organisation=org) if r.endpoint == "/embeddings"] == []
    assert acme.vector_stores.search(store.id, query="token").data == []
    added = acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("fine.txt", TEXT), poll_interval_ms=100
    )
    assert added.status == "completed"


def test_each_request_leaves_one_row(acme, tenants):
    org = tenants[0].organisation
    store = acme.vector_stores.create()
    acme.vector_stores.retrieve(store.id)
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.retrieve("vs_missing")
    rows = wait_for(lambda: (r := usage_rows(organisation=org)) and len(r) >= 3 and r)
    assert [(r.endpoint, r.status) for r in rows] == [
        ("/vector_stores", 200),
        (f"/vector_stores/{store.id}", 200),
        ("/vector_stores/vs_missing", 404),
    ]
    # A search of a store with vectors: its own row, and its query's embedding.
    acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("r.txt", TEXT), poll_interval_ms=100
    )
    before = {r.pk for r in usage_rows(organisation=org)}
    acme.vector_stores.search(store.id, query="revenue")

    def keyed_rows():
        rows = usage_rows(organisation=org, api_key__isnull=False)
        return [r for r in rows if r.pk not in before and "/files" not in r.endpoint]

    new = wait_for(lambda: (n := keyed_rows()) and len(n) >= 2 and n)
    assert sorted(r.endpoint for r in new) == ["/embeddings", f"/vector_stores/{store.id}/search"]


def test_deleting_a_file_of_the_files_api_takes_it_out_of_its_stores(acme):
    from responses_api.models import Chunk, VectorStoreFile

    first = acme.vector_stores.create()
    second = acme.vector_stores.create()
    uploaded = acme.files.create(file=doc("r.txt", TEXT), purpose="assistants")
    for store in (first, second):
        acme.vector_stores.files.create_and_poll(
            file_id=uploaded.id, vector_store_id=store.id, poll_interval_ms=100
        )
    assert Chunk.objects.filter(file__file_id=uploaded.id).count() == 2
    acme.files.delete(uploaded.id)
    assert not VectorStoreFile.objects.filter(file_id=uploaded.id).exists()
    assert not Chunk.objects.filter(file__file_id=uploaded.id).exists()
    for store in (first, second):
        fetched = acme.vector_stores.retrieve(store.id)
        assert fetched.file_counts.total == 0 and fetched.usage_bytes == 0
        assert acme.vector_stores.search(store.id, query="revenue report").data == []


def test_expired_stores_are_purged_with_their_chunks(acme, tenants):
    from datetime import timedelta

    from django.utils import timezone

    from responses_api.models import Chunk, VectorStore
    from responses_api.tasks import purge_stored_responses

    store = acme.vector_stores.create(expires_after={"anchor": "last_active_at", "days": 1})
    acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("r.txt", TEXT), poll_interval_ms=100
    )
    kept = acme.vector_stores.create()
    VectorStore.objects.filter(id=store.id).update(expires_at=timezone.now() - timedelta(1))
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.retrieve(store.id)
    assert purge_stored_responses() >= 1
    assert not VectorStore.objects.filter(id=store.id).exists()
    assert not Chunk.objects.filter(store_id=store.id).exists()
    assert acme.vector_stores.retrieve(kept.id).id == kept.id


def test_a_store_without_an_embedding_model_works_by_keyword(vs_server, provision, simulator):
    tenant = provision("globex", simulator.url)
    client = sdk(vs_server, tenant.key)
    store = client.vector_stores.create()
    added = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("r.txt", TEXT), poll_interval_ms=100
    )
    assert added.status == "completed"
    found = client.vector_stores.search(store.id, query="revenue")
    assert [r.file_id for r in found] == [added.id]
