"""The Vector stores API through the official OpenAI SDK, against a daphne
process: stores, files added and polled, batches, search with filters,
lists, updates and deletions."""

from __future__ import annotations

import io

import openai
import pytest

from tests.conftest import usage_rows, wait_for
from tests.vector_stores.conftest import sdk

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

POLICY = b"Travel expenses are reimbursed within thirty days of the claim.\n"
HOLIDAYS = b"Every employee has twenty five days of paid holiday a year.\n"


def doc(name: str, content: bytes) -> tuple[str, io.BytesIO]:
    return name, io.BytesIO(content)


def test_create_upload_and_poll_then_search(acme, tenants):
    store = acme.vector_stores.create(name="Handbook", metadata={"team": "hr"})
    assert store.object == "vector_store" and store.id.startswith("vs_")
    assert store.name == "Handbook" and store.metadata == {"team": "hr"}
    added = acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("policy.txt", POLICY), poll_interval_ms=100
    )
    assert added.status == "completed" and added.last_error is None
    assert added.usage_bytes > 0 and added.chunking_strategy.type == "static"
    acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=doc("holidays.md", HOLIDAYS), poll_interval_ms=100
    )
    page = acme.vector_stores.search(store.id, query="travel expenses reimbursed")
    results = list(page)
    assert results[0].filename == "policy.txt" and results[0].file_id == added.id
    assert results[0].content[0].text.startswith("Travel expenses")
    assert 0 < results[0].score <= 1
    fetched = acme.vector_stores.retrieve(store.id)
    assert fetched.file_counts.completed == 2 and fetched.status == "completed"
    assert 0 < fetched.usage_bytes <= len(POLICY) + len(HOLIDAYS)
    # Ingestion embedded as the organisation (no key): rows with tokens.
    org = tenants[0].organisation
    rows = wait_for(lambda: [r for r in usage_rows(organisation=org) if r.api_key_id is None])
    assert all(r.endpoint == "/embeddings" and r.input_tokens > 0 for r in rows)
    content = acme.vector_stores.files.content(file_id=added.id, vector_store_id=store.id)
    assert [part.text for part in content] == [POLICY.decode().strip()]


def test_batches_attributes_filters_and_lists(acme):
    store = acme.vector_stores.create(name="Reports")
    batch = acme.vector_stores.file_batches.upload_and_poll(
        store.id,
        files=[doc("q1.txt", b"Revenue grew in the first quarter."), doc("q2.txt", POLICY)],
        poll_interval_ms=100,
    )
    assert batch.object == "vector_store.files_batch"
    assert batch.status == "completed" and batch.file_counts.completed == 2
    fetched = acme.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
    assert fetched.model_dump() == batch.model_dump()
    files = list(acme.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id))
    assert len(files) == 2
    first, second = sorted(files, key=lambda f: f.id)
    acme.vector_stores.files.update(
        first.id, vector_store_id=store.id, attributes={"year": 2024, "kind": "report"}
    )
    acme.vector_stores.files.update(
        second.id, vector_store_id=store.id, attributes={"year": 2025, "kind": "report"}
    )
    found = acme.vector_stores.search(
        store.id,
        query="revenue expenses",
        filters={"type": "gte", "key": "year", "value": 2025},
    )
    assert {r.file_id for r in found} == {second.id}
    assert found.data[0].attributes == {"year": 2025, "kind": "report"}
    compound = acme.vector_stores.search(
        store.id,
        query="revenue",
        filters={
            "type": "and",
            "filters": [
                {"type": "eq", "key": "kind", "value": "report"},
                {"type": "lt", "key": "year", "value": 2025},
            ],
        },
        max_num_results=1,
        ranking_options={"ranker": "none", "score_threshold": 0.0},
    )
    assert [r.file_id for r in compound] == [first.id]
    listed = acme.vector_stores.files.list(vector_store_id=store.id, filter="completed", limit=1)
    assert len(listed.data) == 1 and listed.has_more
    rest = acme.vector_stores.files.list(
        vector_store_id=store.id, filter="completed", after=listed.data[0].id
    )
    assert len(rest.data) == 1 and not rest.has_more
    assert acme.vector_stores.files.list(vector_store_id=store.id, filter="failed").data == []
    updated = acme.vector_stores.update(store.id, name="Reports 2025", metadata={"a": "b"})
    assert (updated.name, updated.metadata) == ("Reports 2025", {"a": "b"})
    expiring = acme.vector_stores.update(
        store.id, expires_after={"anchor": "last_active_at", "days": 7}
    )
    assert expiring.expires_at is not None
    stores = acme.vector_stores.list(limit=100)
    assert store.id in [s.id for s in stores.data]
    deleted = acme.vector_stores.files.delete(first.id, vector_store_id=store.id)
    assert deleted.deleted and deleted.object == "vector_store.file.deleted"
    assert [r.file_id for r in acme.vector_stores.search(store.id, query="revenue")] != [first.id]
    gone = acme.vector_stores.delete(store.id)
    assert gone.deleted and gone.object == "vector_store.deleted"
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.retrieve(store.id)


def test_create_with_file_ids_and_the_api_v1_prefix(vs_server, tenants, acme):
    uploaded = acme.files.create(file=doc("a.txt", POLICY), purpose="assistants")
    client = sdk(vs_server, tenants[0].key, prefix="/api/v1")
    store = client.vector_stores.create(
        name="With files",
        file_ids=[uploaded.id],
        chunking_strategy={
            "type": "static",
            "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50},
        },
    )
    assert store.file_counts.total == 1
    done = client.vector_stores.files.poll(uploaded.id, vector_store_id=store.id)
    assert done.status == "completed"
    assert done.chunking_strategy.static.max_chunk_size_tokens == 200


def test_malformed_requests_are_400s_naming_the_parameter(acme):
    store = acme.vector_stores.create()
    cases = [
        (lambda: acme.vector_stores.create(name=5), "name"),
        (
            lambda: acme.vector_stores.create(expires_after={"anchor": "x", "days": 1}),
            "expires_after",
        ),
        (
            lambda: acme.vector_stores.create(chunking_strategy={"type": "nope"}),
            "chunking_strategy",
        ),
        (lambda: acme.vector_stores.search(store.id, query=""), "query"),
        (
            lambda: acme.vector_stores.search(store.id, query="x", max_num_results=99),
            "max_num_results",
        ),
        (
            lambda: acme.vector_stores.search(
                store.id, query="x", filters={"type": "eq", "key": "k"}
            ),
            "filters",
        ),
        (lambda: acme.vector_stores.files.list(vector_store_id=store.id, filter="x"), "filter"),
        (lambda: acme.vector_stores.list(limit=0), "limit"),
        (
            lambda: acme.vector_stores.files.create(vector_store_id=store.id, file_id="file-nope"),
            "file_id",
        ),
    ]
    for request, param in cases:
        with pytest.raises(openai.APIStatusError) as refused:
            request()
        assert refused.value.status_code in (400, 404), param
        error = refused.value.response.json()["error"]
        assert error["param"] is not None and error["param"].startswith(param), error
        assert refused.value.response.headers.get("x-request-id")


def test_a_cancelled_batch_stays_cancelled(acme):
    store = acme.vector_stores.create()
    uploaded = [
        acme.files.create(file=doc(f"{i}.txt", POLICY), purpose="assistants") for i in range(3)
    ]
    batch = acme.vector_stores.file_batches.create(
        store.id, files=[{"file_id": f.id, "attributes": {"n": i}} for i, f in enumerate(uploaded)]
    )
    assert batch.file_counts.total == 3
    cancelled = acme.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    assert cancelled.status == "cancelled"
    files = acme.vector_stores.files.list(vector_store_id=store.id, order="asc").data
    assert {f.status for f in files} <= {"cancelled", "completed"}
    assert sorted(f.attributes["n"] for f in files) == [0, 1, 2]
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.file_batches.retrieve("vsfb_missing", vector_store_id=store.id)


def test_a_file_of_many_chunks_comes_back_whole_in_order(vs_server, tenants, acme):
    """More chunks than the content page reads at a time (``CONTENT_BATCH``):
    the page is written batch by batch, in chunked encoding."""
    import httpx

    from responses_api.api.vector_store_files import CONTENT_BATCH
    from responses_api.models import Chunk

    lines = "".join(f"Line {i} of the long report, about item number {i}.\n" for i in range(3000))
    store = acme.vector_stores.create(name="Long")
    added = acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id,
        file=doc("long.txt", lines.encode()),
        chunking_strategy={
            "type": "static",
            "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0},
        },
        poll_interval_ms=100,
    )
    assert added.status == "completed", added.last_error
    chunks = Chunk.objects.filter(file__store_id=store.id).count()
    assert chunks > 2 * CONTENT_BATCH
    url = f"{vs_server.url}/v1/vector_stores/{store.id}/files/{added.id}/content"
    headers = {"Authorization": f"Bearer {tenants[0].key}"}
    response = httpx.get(url, headers=headers, timeout=60)
    assert response.status_code == 200
    assert "content-length" not in response.headers
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.headers["content-type"] == "application/json"
    page = response.json()
    assert page["object"] == "vector_store.file_content.page" and not page["has_more"]
    texts = [part["text"] for part in page["data"]]
    assert len(texts) == chunks
    # Chunks cut between tokens and lose their edges' blanks: the text,
    # blanks aside, comes back whole and in order.
    assert "".join("".join(texts).split()) == "".join(lines.split())
    sdk_texts = acme.vector_stores.files.content(file_id=added.id, vector_store_id=store.id)
    assert [part.text for part in sdk_texts] == texts
