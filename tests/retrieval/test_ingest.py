"""Ingestion: statuses, counts, hostile files, deletion."""

from __future__ import annotations

import io
import zipfile
import zlib

import pytest
from django.test import override_settings

from responses_api.models import Chunk, VectorStore, VectorStoreFile
from responses_api.retrieval.errors import InvalidParameter, NotFound
from responses_api.retrieval.ingest import ingest_dispatch, ingest_file
from responses_api.retrieval.search import vector_store_search
from responses_api.retrieval.stores import (
    file_counts,
    vector_store_delete,
    vector_store_file_delete,
    vector_store_file_get,
    vector_store_json,
)
from tests.retrieval.conftest import pdf_bytes


def add(people, store, embed, file_id, content, name, **extra):
    return ingest_file(people["acme"].id, store.id, file_id, content, name, embed, **extra)


def test_a_completed_file_counts_and_uses_bytes(people, acme_store, embed):
    done = add(people, acme_store, embed, "file-a", b"Some policy text.", "a.txt")
    assert done.status == "completed" and done.last_error is None
    acme_store.refresh_from_db()
    shown = vector_store_json(acme_store)
    assert shown["file_counts"] == {
        "in_progress": 0,
        "completed": 1,
        "failed": 0,
        "cancelled": 0,
        "total": 1,
    }
    assert shown["status"] == "completed"
    assert shown["usage_bytes"] == len(b"Some policy text.")
    assert acme_store.dimensions == embed.dimensions


def test_a_pdf_is_ingested_and_found(people, acme_store, embed):
    done = add(
        people, acme_store, embed, "file-pdf", pdf_bytes("Solar panels cut the bill."), "r.pdf"
    )
    assert done.status == "completed"
    page = vector_store_search(
        organisation_id=people["acme"].id, store_id=acme_store.id, query="solar panels", embed=embed
    )
    assert page["data"][0]["file_id"] == "file-pdf"


def _bomb_pdf() -> bytes:
    """A PDF whose one content stream inflates to 100 MiB of zeros."""
    from pypdf import PdfWriter
    from pypdf.generic import NameObject, StreamObject

    compressor = zlib.compressobj(9)
    parts = [compressor.compress(b"\0" * (1 << 20)) for _ in range(100)]
    parts.append(compressor.flush())
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    stream = StreamObject()
    stream._data = b"".join(parts)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.txt", b"0" * (50 << 20))
    return out.getvalue()


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("bomb.pdf", _bomb_pdf(), "decompresses past"),
        ("bomb.pdf", _zip_bomb(), "not a PDF (it is a ZIP archive)"),
        (
            "broken.pdf",
            b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\n"
            b"trailer << /Root 1 0 R >>\n%%EOF",
            "PDF",
        ),
        ("rows.csv", b'a,b\n1,"unterminated\n2,3\n', "CSV"),
        ("rows.csv", b"a,b\n1,2,3\n", "row 2 has 3 fields"),
        ("data.json", b'{"a": [1, 2', "JSON"),
        ("garbage.txt", bytes(range(256)) * 64, "not text"),
        ("nul.txt", b"text\x00\x00\x00with nulls", "binary"),
        ("same.txt", b"token " * 10_000_000, "longer than"),
    ],
)
def test_a_hostile_file_fails_with_its_reason_never_a_crash(
    people, acme_store, embed, name, content, message
):
    done = add(people, acme_store, embed, "file-bad", content, name)
    assert done.status == "failed"
    assert done.last_error["code"] == "invalid_file"
    assert message in done.last_error["message"]
    assert not Chunk.objects.filter(file_id=done.pk).exists()
    assert embed.calls == 0


@override_settings(SWITCHYARD_RETRIEVAL_MAX_PDF_PAGES=2)
def test_a_pdf_past_the_page_cap_fails(people, acme_store, embed):
    done = add(people, acme_store, embed, "file-long", pdf_bytes("a", "b", "c"), "long.pdf")
    assert done.status == "failed" and "3 pages" in done.last_error["message"]


def test_an_unsupported_type_fails_as_unsupported(people, acme_store, embed):
    done = add(people, acme_store, embed, "file-exe", b"MZ", "setup.exe")
    assert done.last_error["code"] == "unsupported_file"


def test_an_embedder_that_fails_fails_the_file(people, acme_store):
    def broken(texts):
        raise ConnectionError("backend down")

    done = add(people, acme_store, broken, "file-a", b"Some text.", "a.txt")
    assert done.status == "failed" and done.last_error["code"] == "server_error"
    assert "backend down" in done.last_error["message"]


def test_embeddings_of_another_width_fail_the_file(people, acme_store, embed):
    add(people, acme_store, embed, "file-a", b"Some text.", "a.txt")
    done = add(
        people, acme_store, lambda texts: [[1.0, 0.0]] * len(texts), "file-b", b"More.", "b.txt"
    )
    assert done.status == "failed" and "dimensions" in done.last_error["message"]


def test_bad_attributes_or_strategy_are_refused_before_anything_is_written(
    people, acme_store, embed
):
    with pytest.raises(InvalidParameter):
        add(people, acme_store, embed, "file-a", b"x", "a.txt", attributes={"k": [1]})
    with pytest.raises(InvalidParameter):
        add(
            people, acme_store, embed, "file-a", b"x", "a.txt", chunking_strategy={"type": "static"}
        )
    assert not VectorStoreFile.objects.exists()


def test_adding_to_another_organisation_s_store_is_not_found(people, acme_store, embed):
    with pytest.raises(NotFound):
        ingest_file(people["globex"].id, acme_store.id, "file-a", b"x", "a.txt", embed)
    with pytest.raises(NotFound):
        vector_store_file_get(
            organisation_id=people["globex"].id, store_id=acme_store.id, file_id="file-a"
        )


def test_deleting_a_file_removes_its_chunks_and_vectors(people, acme_store, embed):
    org = people["acme"].id
    add(people, acme_store, embed, "file-a", b"Alpha apples.", "a.txt")
    add(people, acme_store, embed, "file-b", b"Beta bananas.", "b.txt")
    first = vector_store_search(
        organisation_id=org, store_id=acme_store.id, query="apples", embed=embed
    )
    assert first["data"][0]["file_id"] == "file-a"
    vector_store_file_delete(organisation_id=org, store_id=acme_store.id, file_id="file-a")
    assert Chunk.objects.filter(store_id=acme_store.id).count() == 1
    after = vector_store_search(
        organisation_id=org, store_id=acme_store.id, query="apples", embed=embed
    )
    assert [r["file_id"] for r in after["data"]] == ["file-b"]  # by vector, never file-a
    acme_store.refresh_from_db()
    assert acme_store.usage_bytes == len(b"Beta bananas.")


def test_deleting_a_store_removes_everything_and_is_tenant_scoped(people, acme_store, embed):
    add(people, acme_store, embed, "file-a", b"Alpha.", "a.txt")
    with pytest.raises(NotFound):
        vector_store_delete(organisation_id=people["globex"].id, store_id=acme_store.id)
    vector_store_delete(organisation_id=people["acme"].id, store_id=acme_store.id)
    assert not VectorStore.objects.exists()
    assert not VectorStoreFile.objects.exists() and not Chunk.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_dispatch_answers_in_progress_and_ingests_on_a_thread(people, embed):
    from responses_api.retrieval.stores import vector_store_create

    store = vector_store_create(organisation_id=people["acme"].id)
    added, future = ingest_dispatch(
        organisation_id=people["acme"].id,
        store_id=store.id,
        file_id="file-a",
        content=b"Threads do the work.",
        filename="a.txt",
        embed=embed,
    )
    assert added.status == "in_progress"
    assert future.result(timeout=30).status == "completed"
    assert file_counts(store)["completed"] == 1
