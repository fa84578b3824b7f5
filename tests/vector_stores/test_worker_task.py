"""The Celery task that ingests a file (``tasks.ingest_vector_store_file``)
run as a worker runs it, by ids: it reads the Files API's sealed content,
embeds through the organisation's model (usage rows with tokens and no
key) and indexes; a file deleted before it is read fails."""

from __future__ import annotations

import io

import pytest

from responses_api.files.service import file_create, file_delete
from responses_api.models import Chunk, VectorStoreFile
from responses_api.pipeline.vector_ingest import files_add, on_celery
from responses_api.retrieval.stores import vector_store_create
from responses_api.tasks import ingest_vector_store_file
from tests.conftest import usage_rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _files_dir(tmp_path, settings):
    settings.SWITCHYARD_FILES_DIR = str(tmp_path)


def upload(org: int, name: str, content: bytes):
    return file_create(
        organisation_id=org,
        filename=name,
        purpose="assistants",
        content=io.BytesIO(content),
        size=len(content),
    )


def test_the_task_ingests_by_ids_with_usage_rows(gateway, embed_tenant, simulator):
    tenant = embed_tenant("acme", simulator.url)
    org = tenant.organisation.pk
    store = vector_store_create(organisation_id=org)
    record = upload(org, "notes.txt", b"Invoices are paid within thirty days.")
    files_add(organisation_id=org, store_id=store.id, entries=[{"file_id": record.id}])
    ingest_vector_store_file(org, store.id, record.id)
    done = VectorStoreFile.objects.get(store_id=store.id, file_id=record.id)
    assert done.status == "completed" and done.filename == "notes.txt"
    assert Chunk.objects.filter(file=done).count() == 1
    gateway.rows.write()
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.api_key_id, row.model) == ("/embeddings", None, "embed-model")
    assert row.input_tokens > 0 and row.duration_ms >= 0


def test_a_file_deleted_before_the_worker_reads_it_fails(gateway, embed_tenant, simulator):
    tenant = embed_tenant("acme", simulator.url)
    org = tenant.organisation.pk
    store = vector_store_create(organisation_id=org)
    record = upload(org, "gone.txt", b"Soon deleted.")
    [added] = files_add(organisation_id=org, store_id=store.id, entries=[{"file_id": record.id}])
    # The Files API's deletion takes the entry out of the store at once.
    file_delete(organisation_id=org, file_id=record.id)
    assert not VectorStoreFile.objects.filter(pk=added.pk).exists()
    ingest_vector_store_file(org, store.id, record.id)  # nothing left to do: no error
    gateway.rows.write()
    assert usage_rows(organisation=tenant.organisation) == []


def test_the_runner_is_chosen_as_for_background_responses(settings):
    settings.SWITCHYARD_BACKGROUND_RUNNER = "celery"
    assert on_celery()
    settings.SWITCHYARD_BACKGROUND_RUNNER = "local"
    assert not on_celery()
    settings.SWITCHYARD_BACKGROUND_RUNNER = ""
    settings.REDIS_URL, settings.CELERY_TASK_ALWAYS_EAGER = "redis://127.0.0.1:6379/6", False
    assert on_celery()
    settings.REDIS_URL = ""
    assert not on_celery()
