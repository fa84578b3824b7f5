"""The Files API through the official OpenAI SDK, against a daphne process:
upload, list, retrieve, download, delete, expiry, and one organisation never
reaching another's files."""

from __future__ import annotations

import io
import uuid

import httpx
import openai
import pytest

from tests.conftest import usage_rows, wait_rows
from tests.files.conftest import sdk

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def upload(client, content: bytes = b"hello, files\n", name: str = "notes.txt", **options):
    return client.files.create(file=(name, io.BytesIO(content)), purpose="user_data", **options)


def test_upload_answers_a_file_object_and_its_content_comes_back(acme, files_dir):
    created = upload(acme, b"a,b\n1,2\n", "table.csv")
    assert created.id.startswith("file-")
    assert created.object == "file" and created.status == "processed"
    assert created.bytes == 8 and created.filename == "table.csv"
    assert created.purpose == "user_data" and created.expires_at is None
    fetched = acme.files.retrieve(created.id)
    assert fetched.model_dump() == created.model_dump()
    content = acme.files.content(created.id)
    assert content.content == b"a,b\n1,2\n"
    assert content.response.headers["content-type"].startswith("text/csv")
    assert content.response.headers["content-disposition"] == "attachment"
    assert content.response.headers["x-content-type-options"] == "nosniff"
    # At rest the content is sealed: the plain bytes appear in no stored file.
    stored = [p.read_bytes() for p in files_dir.rglob("*") if p.is_file()]
    assert stored and not any(b"a,b\n1,2" in data for data in stored)


def test_the_same_api_is_served_under_api_v1(files_server, tenants):
    client = sdk(files_server, tenants[0].key, prefix="/api/v1")
    created = upload(client)
    assert client.files.retrieve(created.id).id == created.id


def test_list_pages_by_creation_and_filters_by_purpose(acme):
    ids = [upload(acme, f"file {i}".encode(), f"f{i}.txt").id for i in range(3)]
    other = acme.files.create(file=("x.json", io.BytesIO(b"{}")), purpose="assistants")
    newest_first = acme.files.list()
    assert [f.id for f in newest_first.data] == [other.id, *reversed(ids)]
    page = acme.files.list(order="asc", limit=2)
    assert [f.id for f in page.data] == ids[:2] and page.has_more
    rest = acme.files.list(order="asc", limit=2, after=ids[1])
    assert [f.id for f in rest.data] == [ids[2], other.id] and not rest.has_more
    raw = acme.files.with_raw_response.list(purpose="assistants").http_response.json()
    assert raw == {
        "object": "list",
        "data": [raw["data"][0]],
        "first_id": other.id,
        "last_id": other.id,
        "has_more": False,
    }
    assert set(raw["data"][0]) >= {"id", "object", "bytes", "created_at", "expires_at"}
    # Iterating a page follows the pages (after = the last id) to the end.
    assert [f.id for f in acme.files.list(order="asc", limit=1)] == [*ids, other.id]


@pytest.mark.parametrize("limit", ["0", "10001", "x", "-1"])
def test_a_bad_list_limit_is_a_400_naming_it(files_server, tenants, limit):
    response = httpx.get(
        files_server.url + "/v1/files",
        params={"limit": limit},
        headers={"authorization": f"Bearer {tenants[0].key}"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "limit"


def test_delete_removes_the_file_and_its_content(acme, files_dir):
    created = upload(acme)
    before = {p for p in files_dir.rglob("*") if p.is_file()}
    deleted = acme.files.delete(created.id)
    assert deleted.id == created.id and deleted.deleted is True and deleted.object == "file"
    after = {p for p in files_dir.rglob("*") if p.is_file()}
    assert len(before - after) == 1
    with pytest.raises(openai.NotFoundError):
        acme.files.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        acme.files.delete(created.id)


def test_expires_after_is_reported_and_an_expired_file_is_gone(acme, tenants):
    from responses_api.models import FileRecord
    from responses_api.tasks import purge_stored_responses

    created = upload(acme, expires_after={"anchor": "created_at", "seconds": 3600})
    assert created.expires_at == created.created_at + 3600
    FileRecord.objects.filter(id=created.id).update(
        expires_at=FileRecord.objects.get(id=created.id).created_at
    )
    for call in (acme.files.retrieve, acme.files.content, acme.files.delete):
        with pytest.raises(openai.NotFoundError):
            call(created.id)
    assert created.id not in [f.id for f in acme.files.list().data]
    FileRecord.objects.filter(id=created.id).update(
        expires_at=FileRecord.objects.get(id=created.id).created_at
    )
    assert purge_stored_responses() >= 1
    assert not FileRecord.objects.filter(id=created.id).exists()


@pytest.mark.parametrize("seconds", [3599, 2592001])
def test_expires_after_out_of_range_is_a_400(acme, seconds):
    with pytest.raises(openai.BadRequestError) as refused:
        upload(acme, expires_after={"anchor": "created_at", "seconds": seconds})
    assert refused.value.body["param"] == "expires_after[seconds]"


def test_charlie_cannot_reach_acmes_files(acme, globex):
    """Globex's key gets, on every endpoint, the 404 of an id that does not exist."""
    created = upload(acme)
    missing = "file-" + uuid.uuid4().hex[:24]
    for file_id in (created.id, missing):
        for call in (globex.files.retrieve, globex.files.content, globex.files.delete):
            with pytest.raises(openai.NotFoundError) as refused:
                call(file_id)
            assert refused.value.body["message"] == f"No such File object: {file_id}"
            assert refused.value.body["code"] == "file_not_found"
    assert globex.files.list().data == []
    with pytest.raises(openai.BadRequestError):
        globex.files.list(after=created.id)
    assert acme.files.content(created.id).content == b"hello, files\n"


def test_every_files_request_leaves_one_usage_row(acme, tenants):
    created = upload(acme)
    acme.files.list()
    acme.files.retrieve(created.id)
    acme.files.content(created.id)
    acme.files.delete(created.id)
    rows = wait_rows(5, organisation=tenants[0].organisation)
    assert sorted((r.method, r.endpoint.split("/file-")[0], r.status) for r in rows) == sorted(
        [
            ("POST", "/files", 200),
            ("GET", "/files", 200),
            ("GET", "/files", 200),
            ("GET", "/files", 200),
            ("DELETE", "/files", 200),
        ]
    )
    assert len(usage_rows(organisation=tenants[0].organisation)) == 5


def test_the_openapi_document_lists_the_files_endpoints(files_server):
    document = httpx.get(files_server.url + "/api/v1/openapi.json", timeout=10).json()
    paths = document["paths"]
    assert set(paths["/files"]) == {"get", "post"}
    assert set(paths["/files/{file_id}"]) >= {"get", "delete"}
    assert "get" in paths["/files/{file_id}/content"]
    upload = paths["/files"]["post"]["requestBody"]["content"]
    assert upload == {
        "multipart/form-data": {"schema": {"$ref": "#/components/schemas/FileUpload"}}
    }
    assert document["components"]["schemas"]["FileObject"]["properties"]["object"] == {
        "const": "file"
    }
