"""Stored content goes with its file row, however the row goes: deleting
the organisation (a cascade), the purge of expired files, or the file's own
deletion; only once the deletion is committed; and a storage that fails
neither undoes nor breaks the deletion, its leftovers swept later."""

from __future__ import annotations

import io
import logging
from datetime import timedelta

import pytest
from django.db import transaction

from responses_api.files import service
from responses_api.files.service import file_create, files_orphans_purge, files_purge
from responses_api.models import FileRecord

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def local(tmp_path, settings):
    settings.SWITCHYARD_FILES_STORAGE = "local"
    settings.SWITCHYARD_FILES_DIR = str(tmp_path)
    return tmp_path


def stored(organisation, content: bytes = b"ledger\n", **options) -> FileRecord:
    return file_create(
        organisation_id=organisation.pk,
        filename="notes.txt",
        purpose="user_data",
        content=io.BytesIO(content),
        size=len(content),
        **options,
    )


def names(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def organisation_delete(organisation) -> None:
    from accounts.models import Organisation

    with transaction.atomic():
        Organisation.objects.filter(pk=organisation.pk).delete()


def test_deleting_an_organisation_deletes_its_stored_content(local, people):
    acme, globex = people["acme"], people["globex"]
    mine = [stored(acme).storage_name, stored(acme, b"x" * 3_000_000).storage_name]
    theirs = stored(globex).storage_name
    assert names(local) == {*mine, theirs}
    organisation_delete(acme)
    assert not FileRecord.objects.filter(organisation_id=acme.pk).exists()
    assert names(local) == {theirs}


def test_content_stays_until_the_deletion_commits(local, people):
    record = stored(people["acme"])
    with pytest.raises(RuntimeError), transaction.atomic():
        FileRecord.objects.filter(pk=record.pk).delete()
        assert names(local) == {record.storage_name}  # not before the commit
        raise RuntimeError("rolled back")
    assert FileRecord.objects.filter(pk=record.pk).exists()
    assert names(local) == {record.storage_name}


def test_the_purge_of_expired_files_deletes_their_content(local, people):
    expired = stored(people["acme"], expires_in=3600)
    kept = stored(people["acme"])
    assert files_purge(now=expired.expires_at + timedelta(seconds=1)) == 1
    assert names(local) == {kept.storage_name}


def test_a_failing_storage_is_tried_again(local, people, monkeypatch):
    record = stored(people["acme"])
    monkeypatch.setattr(service, "DROP_PAUSES", (0.0, 0.0))
    real, calls = service.content_delete, []

    def flaky(name: str) -> None:
        calls.append(name)
        if len(calls) < 3:
            raise OSError("storage unavailable")
        real(name)

    monkeypatch.setattr(service, "content_delete", flaky)
    organisation_delete(people["acme"])
    assert len(calls) == 3 and names(local) == set()
    assert record.storage_name in calls


def test_a_storage_down_neither_breaks_the_deletion_nor_keeps_content(
    local, people, monkeypatch, caplog
):
    record = stored(people["acme"])
    other = stored(people["globex"])
    monkeypatch.setattr(service, "DROP_PAUSES", (0.0, 0.0))

    def down(name: str) -> None:
        raise OSError("storage unavailable")

    monkeypatch.setattr(service, "content_delete", down)
    with caplog.at_level(logging.ERROR, logger="switchyard.files"):
        organisation_delete(people["acme"])
    assert not FileRecord.objects.filter(pk=record.pk).exists()
    assert f"file {record.id}: its content could not be deleted" in caplog.text
    assert names(local) == {record.storage_name, other.storage_name}
    monkeypatch.undo()
    # Content younger than the grace may be an upload about to record its row.
    assert files_orphans_purge() == 0
    assert files_orphans_purge(older_than=timedelta(0)) == 1
    assert names(local) == {other.storage_name}
    assert files_orphans_purge(older_than=timedelta(0)) == 0


def test_the_sweep_on_an_empty_storage_finds_nothing(tmp_path, settings):
    settings.SWITCHYARD_FILES_STORAGE = "local"
    settings.SWITCHYARD_FILES_DIR = str(tmp_path / "never-written")
    assert files_orphans_purge(older_than=timedelta(0)) == 0
