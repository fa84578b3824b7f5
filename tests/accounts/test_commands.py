import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.keys import hash_key
from accounts.models import ApiKey, Membership, Organisation
from responses_api.models import Backend, Deployment, ServedModel


def run(*args, **kwargs) -> str:
    out = StringIO()
    call_command(*args, stdout=out, **kwargs)
    return out.getvalue()


@pytest.mark.django_db
def test_provisioning_commands_are_idempotent():
    for _ in range(2):
        run("create_org", "acme", "--name", "Acme")
        run(
            "add_backend",
            "--org",
            "acme",
            "--name",
            "gpu1",
            "--url",
            "http://127.0.0.1:9/v1",
            "--dialect",
            "vllm",
            "--max-concurrency",
            "4",
            "--api-key",
            "upstream-secret",
        )
        run(
            "add_model",
            "qwen3",
            "--org",
            "acme",
            "--backend",
            "gpu1",
            "--upstream-name",
            "Qwen/Qwen3-8B",
            "--context-window",
            "32768",
        )
        run("add_member", "--org", "acme", "--email", "ops@example.com", "--role", "admin")
    assert Organisation.objects.count() == 1
    assert Backend.objects.get().dialect == "vllm"
    assert Backend.objects.get().api_key_encrypted not in ("", "upstream-secret")
    assert ServedModel.objects.get().context_window == 32768
    assert Deployment.objects.get().upstream_name == "Qwen/Qwen3-8B"
    assert Membership.objects.get().role == "admin"


@pytest.mark.django_db
def test_add_model_with_another_backend_adds_that_backend():
    run("create_org", "acme")
    run("add_backend", "--org", "acme", "--name", "a", "--url", "http://127.0.0.1:9/v1")
    run("add_backend", "--org", "acme", "--name", "b", "--url", "http://127.0.0.1:10/v1")
    run("add_model", "m", "--org", "acme", "--backend", "a")
    out = run("add_model", "m", "--org", "acme", "--backend", "b")
    assert ServedModel.objects.get().backends.count() == 2
    assert "a as m" in out and "b as m" in out


@pytest.mark.django_db
def test_create_api_key_prints_the_key_alone_on_the_last_line_and_makes_a_new_one_each_time():
    run("create_org", "acme")
    first = run(
        "create_api_key",
        "--org",
        "acme",
        "--name",
        "ci",
        "--models",
        "a,b",
        "--rpm",
        "60",
        "--expires",
        "2030-01-01T00:00:00Z",
    ).splitlines()[-1]
    second = run("create_api_key", "--org", "acme", "--name", "ci").splitlines()[-1]
    assert first != second
    key = ApiKey.objects.get(key_hash=hash_key(first))
    assert key.allowed_models == ["a", "b"] and key.rpm == 60
    assert key.expires_at.year == 2030


@pytest.mark.django_db
def test_add_member_takes_the_password_from_the_environment(monkeypatch):
    run("create_org", "acme")
    monkeypatch.setenv("SWITCHYARD_MEMBER_PASSWORD", "from-env-secret-1")
    run("add_member", "--org", "acme", "--email", "Dev@Example.com", "--role", "developer")
    user = Membership.objects.get().user
    assert user.check_password("from-env-secret-1")


@pytest.mark.django_db
def test_commands_fail_clearly_on_unknown_organisation():
    with pytest.raises(CommandError, match="No organisation"):
        run("create_api_key", "--org", "nope", "--name", "x")


@pytest.mark.django_db
def test_trace_prints_every_field_of_the_row(people):
    from responses_api.models import UsageLog

    row = UsageLog.objects.create(
        request_id="7c3c2a4e-5a43-4f7e-9b5e-1f0f6a3c9d10",
        organisation=people["acme"],
        key_prefix="sy_sk_abcd1234",
        model="m",
        backend_name="gpu1",
        endpoint="/responses",
        status=499,
        note="Client disconnected",
        notices=["store_ignored"],
        input_tokens=10,
        output_tokens=3,
        ttft_ms=12.5,
        duration_ms=40.0,
    )
    data = json.loads(run("trace", str(row.request_id)))
    assert data["organisation"]["slug"] == "acme"
    assert data["api_key"]["prefix"] == "sy_sk_abcd1234"
    assert data["status"] == 499 and data["note"] == "Client disconnected"
    assert data["tokens"]["output"] == 3 and data["timing"]["ttft_ms"] == 12.5
    assert data["notices"] == ["store_ignored"]
    with pytest.raises(CommandError):
        run("trace", "00000000-0000-0000-0000-000000000000")


@pytest.mark.django_db
def test_every_command_that_writes_leaves_an_audit_entry_from_the_command_line():
    from accounts.models import AuditEntry

    run("create_org", "acme")
    run("add_backend", "--org", "acme", "--name", "gpu1", "--url", "http://vllm:8000/v1")
    run("add_model", "qwen3", "--org", "acme", "--backend", "gpu1")
    run("add_member", "--org", "acme", "--email", "ops@example.com", "--role", "admin")
    run("create_api_key", "--org", "acme", "--name", "ci")
    entries = AuditEntry.objects.all()
    assert {e.action for e in entries} == {
        "organisation.create",
        "backend.create",
        "model.create",
        "model.deploy",
        "member.add",
        "api_key.create",
    }
    assert {(e.source, e.actor_id, e.actor_name) for e in entries} == {("cli", None, "")}


@pytest.mark.django_db
def test_running_a_provisioning_command_again_records_no_new_entry():
    from accounts.models import AuditEntry

    run("create_org", "acme")
    for _ in range(2):
        run("add_backend", "--org", "acme", "--name", "gpu1", "--url", "http://127.0.0.1:9/v1")
        run("add_model", "qwen3", "--org", "acme", "--backend", "gpu1")
    assert AuditEntry.objects.count() == 4


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("add_backend", "--org", "acme", "--name", "b", "--url", "ftp://x/v1"), "base_url"),
        (("create_api_key", "--org", "acme", "--name", "ci", "--rpm", "0"), "rpm"),
        (("add_member", "--org", "acme", "--email", " ", "--role", "viewer"), "email"),
    ],
)
def test_commands_report_bad_input_with_the_field_named(args, message):
    run("create_org", "acme")
    with pytest.raises(CommandError, match=message):
        run(*args)


@pytest.mark.django_db
def test_add_model_sets_every_capability_and_changes_only_what_is_given():
    from decimal import Decimal

    run("create_org", "acme")
    run("add_backend", "--org", "acme", "--name", "gpu1", "--url", "http://127.0.0.1:9/v1")
    run(
        "add_model", "qwen3", "--org", "acme", "--backend", "gpu1",
        "--vision", "--reasoning", "--reasoning-levels", "high,low",
        "--default-reasoning", "high", "--context-window", "32768",
        "--max-output-tokens", "8192", "--default-max-output-tokens", "1024",
        "--temperature", "0.6", "--top-p", "0.95", "--price-input", "0.2",
        "--price-cached-input", "0.05", "--price-output", "0.8",
        "--alias", "qwen", "--alias", "q3",
    )  # fmt: skip
    model = ServedModel.objects.get()
    assert model.supports_vision and model.supports_reasoning
    assert model.reasoning_levels == ["low", "high"]
    assert (model.effort_levels(), model.effort_default()) == (["low", "high"], "high")
    assert (model.context_window, model.max_output_tokens) == (32768, 8192)
    assert (model.default_max_output_tokens, model.temperature, model.top_p) == (1024, 0.6, 0.95)
    assert (model.price_input, model.price_cached_input, model.price_output) == (
        Decimal("0.2"), Decimal("0.05"), Decimal("0.8"),
    )  # fmt: skip
    assert model.aliases == ["qwen", "q3"]

    run("add_model", "qwen3", "--org", "acme", "--backend", "gpu1", "--no-vision")
    model.refresh_from_db()
    assert not model.supports_vision
    assert model.reasoning_levels == ["low", "high"] and model.aliases == ["qwen", "q3"]

    run("add_model", "qwen3", "--org", "acme", "--backend", "gpu1", "--no-reasoning")
    model.refresh_from_db()
    assert model.effort_levels() == [] and model.effort_default() is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (("--reasoning-levels", "low,turbo"), "reasoning_levels"),
        (("--reasoning-levels", "low", "--default-reasoning", "high"), "default_reasoning_effort"),
        (("--default-reasoning", "xhigh"), "default_reasoning_effort"),
    ],
)
def test_add_model_refuses_reasoning_levels_it_does_not_know(extra, field):
    run("create_org", "acme")
    run("add_backend", "--org", "acme", "--name", "gpu1", "--url", "http://127.0.0.1:9/v1")
    with pytest.raises(CommandError, match=field):
        run("add_model", "m", "--org", "acme", "--backend", "gpu1", *extra)


@pytest.mark.django_db
def test_create_org_says_whether_it_created_changed_or_found_the_organisation():
    assert run("create_org", "acme", "--name", "Acme").startswith("Created organisation acme")
    assert run("create_org", "acme", "--name", "Acme").startswith("Exists: organisation acme")
    assert run("create_org", "acme", "--retention", "store").startswith("Updated organisation acme")
    assert run("create_org", "acme", "--retention", "store").startswith("Exists:")
    assert run("create_org", "acme", "--name", "Acme Inc").startswith("Updated organisation")
    assert Organisation.objects.get(slug="acme").name == "Acme Inc"
