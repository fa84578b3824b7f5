"""Deleting a store, a store's file or a Files API file while that file is
being ingested: the deletion answers as usual and leaves nothing behind,
and the ingestion ends quietly (no chunks, no failed entry, no error
logged), having embedded no batch after the deletion.

The ingestion runs on a thread of the test, as a worker runs it, paused by
a hook at the point each test needs; the deletion goes through the API."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections

from responses_api.files.service import file_create
from responses_api.models import Chunk, VectorStore, VectorStoreFile
from responses_api.pipeline import vector_ingest
from responses_api.pipeline.vector_ingest import files_add, ingest_on_worker
from responses_api.retrieval import ingest
from responses_api.retrieval.stores import vector_store_create
from tests.conftest import usage_rows

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = " ".join(f"Clause {n}: invoices are paid within {n} days." for n in range(60)).encode()
STRATEGY = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}
DELETIONS: dict[str, Callable[[Any, str, str], Any]] = {
    "store": lambda client, store_id, file_id: client.vector_stores.delete(store_id),
    "store_file": lambda client, store_id, file_id: client.vector_stores.files.delete(
        file_id=file_id, vector_store_id=store_id
    ),
    "file": lambda client, store_id, file_id: client.files.delete(file_id),
}


@pytest.fixture(autouse=True)
def _files_dir(tmp_path, settings):
    settings.SWITCHYARD_FILES_DIR = str(tmp_path)


class Pause:
    """Where the ingestion waits until the test lets it go on."""

    def __init__(self) -> None:
        self.reached, self.go = threading.Event(), threading.Event()

    def __call__(self) -> None:
        self.reached.set()
        assert self.go.wait(30)


class Ingesting(threading.Thread):
    def __init__(self, org: int, store_id: str, file_id: str) -> None:
        super().__init__(daemon=True)
        self.arguments = (org, store_id, file_id)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            ingest_on_worker(*self.arguments)
        except BaseException as error:
            self.error = error


def added(tenant: Any) -> tuple[int, str, str]:
    org = tenant.organisation.pk
    store = vector_store_create(organisation_id=org)
    record = file_create(
        organisation_id=org,
        filename="policy.txt",
        purpose="assistants",
        content=io.BytesIO(TEXT),
        size=len(TEXT),
    )
    entry = {"file_id": record.id, "chunking_strategy": STRATEGY}
    files_add(organisation_id=org, store_id=store.id, entries=[entry])
    return org, store.id, record.id


class Embedder:
    """The store's embedder, one chunk a call, counting its calls; with a
    ``pause``, it waits there once the first batch is embedded."""

    def __init__(self) -> None:
        self.made: list[list[str]] = []
        self.pause: Pause | None = None


@pytest.fixture
def embedder(monkeypatch) -> Embedder:
    hook = Embedder()
    real = vector_ingest.store_embedder

    def hooked(organisation_id: int, model: str) -> ingest.Embed | None:
        embed = real(organisation_id, model)
        if embed is None:  # the store is gone: keyword only
            return None

        def counted(texts: list[str]) -> Sequence[Sequence[float]]:
            got = embed(texts)
            hook.made.append(texts)
            if len(hook.made) == 1 and hook.pause is not None:
                hook.pause()
            return got

        return counted

    monkeypatch.setattr(ingest, "EMBED_BATCH", 1)
    monkeypatch.setattr(vector_ingest, "store_embedder", hooked)
    return hook


def wait_for_lock_wait() -> None:
    """Until a session of this database waits on a row lock: the deletion,
    behind the ingestion's transaction."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
        time.sleep(0.02)
    raise AssertionError("the deletion never waited on the ingestion")


def assert_nothing_left(caplog, store_id: str, file_id: str) -> None:
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not Chunk.objects.filter(store_id=store_id).exists()
    assert not VectorStoreFile.objects.filter(store_id=store_id, file_id=file_id).exists()


@pytest.mark.parametrize("deletion", list(DELETIONS))
def test_a_deletion_between_batches_stops_the_ingestion(
    deletion, gateway, embed_tenant, simulator, embedder, caplog
):
    tenant = embed_tenant("acme", simulator.url)
    org, store_id, file_id = added(tenant)
    pause = embedder.pause = Pause()
    thread = Ingesting(org, store_id, file_id)
    thread.start()
    assert pause.reached.wait(30)
    client = gateway.openai(tenant.key)
    assert DELETIONS[deletion](client, store_id, file_id).deleted
    pause.go.set()
    thread.join(30)
    assert not thread.is_alive() and thread.error is None
    assert_nothing_left(caplog, store_id, file_id)
    assert len(embedder.made) == 1  # nothing embedded after the deletion
    gateway.rows.write()
    embedded = usage_rows(organisation=tenant.organisation, endpoint="/embeddings")
    assert len(embedded) == 1  # the batch embedded before it is still paid for
    assert VectorStore.objects.filter(id=store_id).exists() == (deletion != "store")


@pytest.mark.parametrize("deletion", list(DELETIONS))
def test_a_deletion_during_the_write_waits_for_it_then_deletes_its_chunks(
    deletion, gateway, embed_tenant, simulator, embedder, monkeypatch, caplog
):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs one writing transaction at a time: no such interleaving")
    tenant = embed_tenant("acme", simulator.url)
    org, store_id, file_id = added(tenant)
    pause = Pause()
    real_recount = ingest.usage_recount

    def recount_then_pause(store: str) -> None:
        real_recount(store)
        pause()  # chunks written, the transaction not yet committed

    monkeypatch.setattr(ingest, "usage_recount", recount_then_pause)
    thread = Ingesting(org, store_id, file_id)
    thread.start()
    assert pause.reached.wait(30)
    assert Chunk.objects.filter(store_id=store_id).count() == 0  # not committed
    client = gateway.openai(tenant.key)
    answers: list[Any] = []

    def delete() -> None:
        try:
            answers.append(DELETIONS[deletion](client, store_id, file_id))
        except BaseException as error:
            answers.append(error)
        finally:
            connections.close_all()

    deleting = threading.Thread(target=delete, daemon=True)
    deleting.start()
    wait_for_lock_wait()
    pause.go.set()
    thread.join(30)
    deleting.join(30)
    assert not thread.is_alive() and not deleting.is_alive() and thread.error is None
    [answer] = answers
    assert getattr(answer, "deleted", None) is True, answer
    assert_nothing_left(caplog, store_id, file_id)
    assert len(embedder.made) > 1
    if deletion != "store":
        store = VectorStore.objects.get(id=store_id)
        assert store.usage_bytes == 0


def test_an_ingestion_that_finds_its_entry_gone_ends_quietly(
    gateway, embed_tenant, simulator, embedder, monkeypatch, caplog
):
    """Deleted after the worker looked the entry up but before it read it:
    no traceback, nothing marked failed, nothing embedded."""
    tenant = embed_tenant("acme", simulator.url)
    org, store_id, file_id = added(tenant)
    real_content = vector_ingest.file_content_for

    def content_then_delete(organisation_id: int, wanted: str) -> Any:
        got = real_content(organisation_id, wanted)
        VectorStore.objects.filter(id=store_id).delete()
        return got

    monkeypatch.setattr(vector_ingest, "file_content_for", content_then_delete)
    thread = Ingesting(org, store_id, file_id)
    thread.start()
    thread.join(30)
    assert thread.error is None
    assert_nothing_left(caplog, store_id, file_id)
    assert embedder.made == []


def test_a_foreign_key_refused_at_the_commit_ends_quietly_once_the_store_is_gone(
    gateway, embed_tenant, simulator, embedder, monkeypatch, caplog
):
    """What the locks leave to the foreign keys: a deletion committed
    between the chunks' insert and their commit's check."""
    tenant = embed_tenant("acme", simulator.url)
    org, store_id, file_id = added(tenant)

    def refused(*_: Any) -> None:
        VectorStore.objects.filter(id=store_id).delete()
        raise IntegrityError("insert on table responses_api_chunk violates foreign key")

    monkeypatch.setattr(ingest, "_write", refused)
    thread = Ingesting(org, store_id, file_id)
    thread.start()
    thread.join(30)
    assert thread.error is None
    assert_nothing_left(caplog, store_id, file_id)
    assert len(embedder.made) > 1  # embedded before the deletion: paid for
