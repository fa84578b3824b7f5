"""The organisation's file quota is changed through the one service function
(with its audit entry) from the management API and ``apply -f``; the console
is tested with the Files page (test_console_files.py)."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command

from accounts.models import AuditEntry, Organisation
from tests.admin_api.conftest import admin_keys, api, error_of  # noqa: F401
from tests.console.conftest import as_user, crew, estates, usage_row  # noqa: F401

pytestmark = pytest.mark.django_db

ADMIN = "/api/v1/admin"


def test_the_management_api_reads_and_changes_the_file_quota(api):  # noqa: F811
    client = api("acme")
    before = client.get(f"{ADMIN}/organisation").json()
    assert before["file_quota_bytes"] is None and before["file_bytes_used"] == 0
    changed = client.patch(
        f"{ADMIN}/organisation", {"file_quota_bytes": 5_000_000_000}, format="json"
    ).json()
    assert changed["file_quota_bytes"] == 5_000_000_000
    assert Organisation.objects.get(slug="acme").file_quota_bytes == 5_000_000_000
    entry = AuditEntry.objects.filter(action="organisation.settings").latest("created_at")
    assert entry.details["changed"]["file_quota_bytes"][1] == 5_000_000_000
    refused = client.patch(f"{ADMIN}/organisation", {"file_quota_bytes": -1}, format="json")
    assert refused.status_code == 400 and error_of(refused)["param"] == "file_quota_bytes"
    assert api("globex").get(f"{ADMIN}/organisation").json()["file_quota_bytes"] is None


def test_apply_sets_the_file_quota_and_a_second_run_changes_nothing(tmp_path):
    document = {"organisations": [{"slug": "initech", "settings": {"file_quota_bytes": 1000}}]}
    path = tmp_path / "switchyard.yaml"
    path.write_text(yaml.safe_dump(document))
    call_command("apply", "-f", str(path), stdout=io.StringIO())
    assert Organisation.objects.get(slug="initech").file_quota_bytes == 1000
    out = io.StringIO()
    call_command("apply", "-f", str(path), stdout=out)
    assert out.getvalue().splitlines()[-1].startswith("0 create, 0 update, 1 unchanged")
