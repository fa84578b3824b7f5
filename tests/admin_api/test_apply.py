"""``manage.py apply -f FILE``: idempotent, a dry run writes nothing, and
``--prune`` removes exactly what the file dropped."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.keys import hash_key
from accounts.models import ApiKey, AuditEntry, Organisation
from responses_api.models import Backend, Deployment, ServedModel
from responses_api.runtime.secrets import decrypt
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

DOCUMENT = {
    "organisations": [
        {
            "slug": "initech",
            "name": "Initech",
            "settings": {"default_rpm": 600, "retention_policy": "none"},
            "backends": [
                {
                    "name": "gpu1",
                    "base_url": "http://gpu1:8000/v1",
                    "dialect": "vllm",
                    "max_concurrency": 32,
                    "api_key_env": "GPU1_KEY",
                },
                {"name": "gpu2", "base_url": "http://gpu2:8000/v1"},
            ],
            "models": [
                {
                    "public_id": "qwen3",
                    "aliases": ["qwen"],
                    "deployments": [
                        {"backend": "gpu1", "upstream_name": "Qwen/Qwen3-32B"},
                        {"backend": "gpu2", "upstream_name": "qwen3"},
                    ],
                    "context_window": 32768,
                    "price_input": 0.1,
                    "reasoning_levels": ["high", "low"],
                },
                {"public_id": "small", "deployments": [{"backend": "gpu2", "upstream_name": "s"}]},
            ],
            "keys": [{"name": "ci", "allowed_models": ["qwen3"], "rpm": 60}, {"name": "batch"}],
        }
    ]
}


def snapshot() -> list:
    return [
        list(model.objects.order_by("pk").values())
        for model in (Organisation, Backend, ServedModel, Deployment, ApiKey, AuditEntry)
    ]


@pytest.fixture
def apply(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU1_KEY", "upstream-secret-1")

    def run(document: dict, *flags: str) -> list[str]:
        path = tmp_path / "switchyard.yaml"
        path.write_text(yaml.safe_dump(document))
        out = io.StringIO()
        call_command("apply", "-f", str(path), *flags, stdout=out)
        return out.getvalue().splitlines()

    return run


def test_a_file_creates_everything_and_prints_each_key_once(apply):
    lines = apply(DOCUMENT)
    assert "create    organisation initech" in lines
    assert "create    backend initech/gpu1" in lines and "create    model initech/qwen3" in lines
    assert lines[-5] == "7 create, 0 update, 0 unchanged, 0 delete."
    raws = [line for line in lines if line.startswith("sy_sk_")]
    assert len(raws) == 2
    ci = ApiKey.objects.get(name="ci")
    assert ci.key_hash in {hash_key(raw) for raw in raws} and ci.allowed_models == ["qwen3"]
    org = Organisation.objects.get(slug="initech")
    assert (org.name, org.default_rpm) == ("Initech", 600)
    gpu1 = Backend.objects.get(name="gpu1")
    assert decrypt(gpu1.api_key_encrypted) == "upstream-secret-1"
    assert (gpu1.dialect, gpu1.max_concurrency) == ("vllm", 32)
    qwen = ServedModel.objects.get(public_id="qwen3")
    assert qwen.reasoning_levels == ["low", "high"] and qwen.aliases == ["qwen"]
    assert set(qwen.deployments.values_list("backend__name", "upstream_name")) == {
        ("gpu1", "Qwen/Qwen3-32B"),
        ("gpu2", "qwen3"),
    }
    assert AuditEntry.objects.filter(source="cli", action="api_key.create").count() == 2


def test_applying_the_same_file_twice_changes_nothing_the_second_time(apply):
    apply(DOCUMENT)
    before = snapshot()
    lines = apply(DOCUMENT)
    assert lines[-1] == "0 create, 0 update, 7 unchanged, 0 delete."
    assert all(line.startswith("unchanged") for line in lines[:-1])
    assert snapshot() == before


def test_a_changed_file_updates_only_what_changed(apply, monkeypatch):
    apply(DOCUMENT)
    changed = yaml.safe_load(yaml.safe_dump(DOCUMENT))
    org = changed["organisations"][0]
    org["backends"][1]["max_concurrency"] = 4
    org["models"][0]["deployments"].pop()
    org["keys"][0]["rpm"] = 120
    monkeypatch.setenv("GPU1_KEY", "rotated")
    lines = apply(changed)
    assert "update    backend initech/gpu1 (upstream_api_key)" in lines
    assert "update    backend initech/gpu2 (max_concurrency)" in lines
    assert "update    model initech/qwen3 (deployments)" in lines
    assert "update    key initech/ci (rpm)" in lines
    assert lines[-1] == "0 create, 4 update, 3 unchanged, 0 delete."
    assert decrypt(Backend.objects.get(name="gpu1").api_key_encrypted) == "rotated"
    assert ServedModel.objects.get(public_id="qwen3").deployments.count() == 1


def test_a_dry_run_writes_nothing(apply):
    before = snapshot()
    lines = apply(DOCUMENT, "--dry-run")
    assert lines[-1] == "7 create, 0 update, 0 unchanged, 0 delete (dry run: nothing was changed)."
    assert not any(line.startswith("sy_sk_") for line in lines)
    assert snapshot() == before
    apply(DOCUMENT)
    dropped = yaml.safe_load(yaml.safe_dump(DOCUMENT))
    dropped["organisations"][0]["keys"] = []
    before = snapshot()
    lines = apply(dropped, "--dry-run", "--prune")
    assert "delete    key initech/ci (revoked)" in lines
    assert snapshot() == before


def test_without_prune_nothing_is_deleted(apply):
    apply(DOCUMENT)
    smaller = yaml.safe_load(yaml.safe_dump(DOCUMENT))
    smaller["organisations"][0]["models"].pop()
    before = snapshot()
    lines = apply(smaller)
    assert not any(line.startswith("delete") for line in lines)
    assert snapshot() == before


def test_prune_removes_exactly_what_the_file_dropped(apply, people):
    apply(DOCUMENT)
    globex_backends = list(Backend.objects.filter(organisation=people["globex"]).values("pk"))
    smaller = yaml.safe_load(yaml.safe_dump(DOCUMENT))
    org = smaller["organisations"][0]
    org["models"] = [m for m in org["models"] if m["public_id"] != "small"]
    org["backends"] = [b for b in org["backends"] if b["name"] != "gpu2"]
    org["models"][0]["deployments"] = [
        d for d in org["models"][0]["deployments"] if d["backend"] != "gpu2"
    ]
    org["keys"] = [k for k in org["keys"] if k["name"] != "batch"]
    lines = apply(smaller, "--prune")
    deletes = sorted(line for line in lines if line.startswith("delete"))
    assert deletes == [
        "delete    backend initech/gpu2",
        "delete    key initech/batch (revoked)",
        "delete    model initech/small",
    ]
    assert set(
        Backend.objects.filter(organisation__slug="initech").values_list("name", flat=True)
    ) == {"gpu1"}
    assert list(ServedModel.objects.values_list("public_id", flat=True)) == ["qwen3"]
    assert ApiKey.objects.get(name="batch").revoked_at is not None
    assert ApiKey.objects.get(name="ci").revoked_at is None
    # Organisations the file does not name are left alone.
    assert (
        list(Backend.objects.filter(organisation=people["globex"]).values("pk")) == globex_backends
    )
    assert apply(smaller, "--prune")[-1] == "0 create, 0 update, 4 unchanged, 0 delete."


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda o: o["backends"][0].update(base_url="ftp://x"),
            "organisations[0].backends[0].base_url",
        ),
        (
            lambda o: o["backends"][0].update(api_key_env="UNSET_VARIABLE"),
            "UNSET_VARIABLE is not set",
        ),
        (
            lambda o: o["backends"][0].update(upstream_api_key="inline"),
            "never write a key in the file",
        ),
        (lambda o: o["models"][0].update(temperature=5), "organisations[0].models[0].temperature"),
        (
            lambda o: o["models"][0]["deployments"][0].update(backend="gpu9"),
            "no backend named 'gpu9'",
        ),
        (
            lambda o: o["keys"][0].update(allowed_models=["nope"]),
            "organisations[0].keys[0].allowed_models",
        ),
        (lambda o: o["settings"].update(default_rpm=0), "organisations[0].default_rpm"),
        (lambda o: o.update(members=[]), "organisations[0].members: unknown field"),
    ],
)
def test_an_invalid_entry_is_named_and_nothing_is_applied(apply, edit, message):
    broken = yaml.safe_load(yaml.safe_dump(DOCUMENT))
    edit(broken["organisations"][0])
    before = snapshot()
    with pytest.raises(CommandError, match="Nothing was changed") as raised:
        apply(broken)
    assert message in str(raised.value)
    assert snapshot() == before


def test_the_documented_example_applies(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_KEY", "example-upstream-key")
    example = Path(ROOT / "platform" / "switchyard.example.yaml")
    out = io.StringIO()
    call_command("apply", "-f", str(example), stdout=out)
    assert "create    model acme/qwen3-32b" in out.getvalue()
    out = io.StringIO()
    call_command("apply", "-f", str(example), stdout=out)
    assert "0 create, 0 update" in out.getvalue()
