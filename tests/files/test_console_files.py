"""The console's Files page: the organisation's files with their size,
purpose and dates, its use of the quota, deleting a file; another
organisation's file is a 404 like a missing one; the quota is set on the
settings page."""

from __future__ import annotations

import io

import pytest
from django.test import override_settings
from django.urls import reverse

from accounts.models import AuditEntry, Organisation
from responses_api.files.service import file_create
from responses_api.models import FileRecord
from tests.console.conftest import as_user, crew, estates, usage_row  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _files_dir(tmp_path, settings):
    settings.SWITCHYARD_FILES_DIR = str(tmp_path)


def make(organisation, name: str, content: bytes, **options) -> FileRecord:
    return file_create(
        organisation_id=organisation.pk,
        filename=name,
        purpose="user_data",
        content=io.BytesIO(content),
        size=len(content),
        **options,
    )


@override_settings(SWITCHYARD_FILES_QUOTA_BYTES=4000)
def test_the_page_lists_the_files_and_the_quota_used(as_user, crew):  # noqa: F811
    make(crew["acme"], "report.csv", b"x" * 1000)
    make(crew["acme"], "later.txt", b"y" * 1000, expires_in=3600)
    make(crew["globex"], "globex-only.txt", b"z")
    body = as_user("alice").get(reverse("console:files")).content.decode()
    assert "report.csv" in body and "later.txt" in body and "globex-only.txt" not in body
    assert "2.0\xa0KB" in body and "3.9\xa0KB" in body and "(50%)" in body
    assert "never" in body  # report.csv does not expire


def test_a_developer_deletes_a_file(as_user, crew):  # noqa: F811
    found = make(crew["acme"], "old.txt", b"old")
    client = as_user("bob")
    url = reverse("console:file_remove", args=[found.id])
    assert "old.txt" in client.get(url).content.decode()
    response = client.post(url)
    assert response.status_code == 302 and response.url == reverse("console:files")
    assert not FileRecord.objects.filter(id=found.id).exists()


def test_a_viewer_cannot_delete_a_file(as_user, crew):  # noqa: F811
    found = make(crew["acme"], "keep.txt", b"keep")
    client = as_user("dave")
    assert "keep.txt" in client.get(reverse("console:files")).content.decode()
    assert client.post(reverse("console:file_remove", args=[found.id])).status_code == 403
    assert FileRecord.objects.filter(id=found.id).exists()


def test_charlie_cannot_see_or_delete_acmes_file(as_user, crew):  # noqa: F811
    found = make(crew["acme"], "acme.txt", b"acme")
    client = as_user("charlie")
    assert "acme.txt" not in client.get(reverse("console:files")).content.decode()
    theirs = client.post(reverse("console:file_remove", args=[found.id]))
    missing = client.post(reverse("console:file_remove", args=["file-000000000000000000000000"]))
    assert theirs.status_code == missing.status_code == 404
    assert b"acme.txt" not in theirs.content and b"acme.txt" not in missing.content
    assert FileRecord.objects.filter(id=found.id).exists()


def test_the_quota_is_set_on_the_settings_page_with_an_audit_entry(as_user, crew):  # noqa: F811
    form = {
        "name": "Acme",
        "retention_policy": "none",
        "store_ttl_hours": "48",
        "usage_retention_days": "30",
        "file_quota_bytes": "123456",
    }
    assert as_user("alice").post(reverse("console:settings"), form).status_code == 302
    assert Organisation.objects.get(slug="acme").file_quota_bytes == 123456
    entry = AuditEntry.objects.get(action="organisation.settings")
    assert entry.details["changed"]["file_quota_bytes"] == [None, 123456]
    files_page = as_user("alice").get(reverse("console:files")).content.decode()
    assert "120.6\xa0KB" in files_page
