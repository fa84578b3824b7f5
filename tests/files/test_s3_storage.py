"""Files kept in an S3-compatible bucket (``SWITCHYARD_FILES_STORAGE=s3``):
a real S3 server (moto's, a process on loopback) behind a daphne process;
the object holds only sealed bytes, and deleting the file deletes it."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator

import boto3
import pytest

from tests.conftest import ROOT, Proc, free_port, server_env, start_daphne, wait_http
from tests.files.conftest import sdk

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

BUCKET = "switchyard-files"
CREDENTIALS = {"aws_access_key_id": "test-key", "aws_secret_access_key": "test-secret"}


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/", proc=process)
        bucket = boto3.client("s3", endpoint_url=url, region_name="us-east-1", **CREDENTIALS)
        bucket.create_bucket(Bucket=BUCKET)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def s3_server(django_db_setup, django_db_blocker, s3) -> Iterator[Proc]:
    proc = start_daphne(
        server_env(
            SWITCHYARD_FILES_STORAGE="s3",
            SWITCHYARD_FILES_S3_BUCKET=BUCKET,
            SWITCHYARD_FILES_S3_ENDPOINT_URL=s3,
            SWITCHYARD_FILES_S3_REGION="us-east-1",
            SWITCHYARD_FILES_S3_ACCESS_KEY_ID=CREDENTIALS["aws_access_key_id"],
            SWITCHYARD_FILES_S3_SECRET_ACCESS_KEY=CREDENTIALS["aws_secret_access_key"],
        )
    )
    yield proc
    proc.stop()


def objects(url: str) -> dict[str, bytes]:
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", **CREDENTIALS)
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


def test_a_file_is_kept_sealed_in_the_bucket_and_deleted_with_it(s3, s3_server, tenants):
    client = sdk(s3_server, tenants[0].key)
    content = b"quarterly figures\n" * 100_000  # two frames and more
    created = client.files.create(file=("q.txt", io.BytesIO(content)), purpose="assistants")
    stored = objects(s3)
    key = f"{tenants[0].organisation.id}/{created.id}"
    assert list(stored) == [key]
    assert b"quarterly figures" not in stored[key] and len(stored[key]) > len(content)
    assert client.files.content(created.id).content == content
    client.files.delete(created.id)
    assert objects(s3) == {}


@pytest.fixture
def in_bucket(s3, settings):
    settings.SWITCHYARD_FILES_STORAGE = "s3"
    settings.SWITCHYARD_FILES_S3 = {
        "bucket": BUCKET,
        "endpoint_url": s3,
        "region": "us-east-1",
        "access_key_id": CREDENTIALS["aws_access_key_id"],
        "secret_access_key": CREDENTIALS["aws_secret_access_key"],
    }
    return s3


def test_deleting_an_organisation_deletes_its_objects(in_bucket, people, monkeypatch):
    from datetime import timedelta

    from accounts.models import Organisation
    from responses_api.files import service

    def create(organisation, content: bytes):
        return service.file_create(
            organisation_id=organisation.pk,
            filename="q.txt",
            purpose="assistants",
            content=io.BytesIO(content),
            size=len(content),
        )

    acme, globex = people["acme"], people["globex"]
    create(acme, b"figures\n" * 200_000)
    create(acme, b"more figures\n")
    theirs = create(globex, b"their figures\n")
    assert len(objects(in_bucket)) == 3
    Organisation.objects.filter(pk=acme.pk).delete()
    assert list(objects(in_bucket)) == [theirs.storage_name]
    # The bucket refusing: the organisation goes all the same, the object
    # stays until the sweep.
    monkeypatch.setattr(service, "DROP_PAUSES", (0.0, 0.0))
    monkeypatch.setattr(service, "content_delete", lambda name: 1 / 0)
    Organisation.objects.filter(pk=globex.pk).delete()
    assert not Organisation.objects.filter(pk=globex.pk).exists()
    assert list(objects(in_bucket)) == [theirs.storage_name]
    monkeypatch.undo()
    assert service.files_orphans_purge(older_than=timedelta(0)) == 1
    assert objects(in_bucket) == {}
