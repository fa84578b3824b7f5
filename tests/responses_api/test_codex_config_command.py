"""``manage.py codex_config`` (docs/api/codex.md)."""

from __future__ import annotations

import json
import tomllib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


def run(*args: str) -> str:
    out = StringIO()
    call_command("codex_config", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def acme(provision, people):
    from responses_api.catalogue.services.served_models import model_ensure

    tenant = provision("acme", "http://127.0.0.1:9/v1", model="b-model")
    model_ensure(
        organisation=people["acme"],
        public_id="a-model",
        backend=tenant.backend,
        upstream_name="a",
    )
    from responses_api.models import ServedModel

    ServedModel.objects.create(organisation=people["acme"], public_id="c-undeployed")
    return tenant


def test_writes_the_files_without_the_key(acme, tmp_path, settings):
    settings.SWITCHYARD_PUBLIC_URL = "https://ai.example.com"
    output = run("--org", "acme", "--key-name", "acme key", "--out", str(tmp_path))
    config = tomllib.loads((tmp_path / "config.toml").read_text())
    assert config["model_providers"]["switchyard"]["base_url"] == "https://ai.example.com/v1"
    profile = tomllib.loads((tmp_path / "switchyard.config.toml").read_text())
    assert profile["model"] == "a-model"  # the first one, by id
    assert profile["model_catalog_json"] == str(tmp_path.resolve() / "model_catalog.json")
    catalog = json.loads((tmp_path / "model_catalog.json").read_text())
    assert [entry["slug"] for entry in catalog["models"]] == ["a-model", "b-model"]
    prefix = acme.key[:8]
    assert f"({prefix}" in output and "export SWITCHYARD_API_KEY" in output
    for path in tmp_path.iterdir():
        assert acme.key not in path.read_text()
    assert acme.key not in output


def test_prints_the_files_and_picks_the_model(acme):
    output = run("--org", "acme", "--key-name", "acme key", "--model", "b-model")
    assert "# ---- ~/.codex/config.toml ----" in output
    assert 'model = "b-model"' in output
    assert '"slug": "a-model"' in output
    assert acme.key not in output


def test_allowed_models_and_backends_limit_the_catalogue(provision, people, tmp_path):
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.models import ServedModel

    tenant = provision("acme", "http://127.0.0.1:9/v1", model="b-model", allowed_models=["b-model"])
    model_ensure(
        organisation=people["acme"], public_id="a-model", backend=tenant.backend, upstream_name="a"
    )
    ServedModel.objects.create(organisation=people["acme"], public_id="b-undeployed")
    run("--org", "acme", "--key-name", "acme key", "--out", str(tmp_path))
    catalog = json.loads((tmp_path / "model_catalog.json").read_text())
    assert [entry["slug"] for entry in catalog["models"]] == ["b-model"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--org", "nope", "--key-name", "acme key"], "No organisation with slug 'nope'"),
        (["--org", "acme", "--key-name", "missing"], "No API key named 'missing'"),
        (["--org", "acme", "--key-name", "acme key", "--model", "zzz"], "may not use model 'zzz'"),
    ],
)
def test_errors(acme, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)
