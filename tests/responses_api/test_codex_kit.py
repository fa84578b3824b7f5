"""The Codex kit generator (docs/api/codex.md) against the shape Codex 0.171 prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from responses_api.catalogue import codex_catalog, codex_kit
from responses_api.models import ServedModel
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "codex"
# Codex leaves these out of `codex debug models` when unset, or sets them only for
# some of its own models: ours may be null.
NULLABLE = {
    "default_reasoning_level",
    "default_verbosity",
    "availability_nux",
    "upgrade",
    "model_messages",
    "comp_hash",
}
# Set by us, left unset (so not printed) for every model Codex ships.
EXTRA = {"auto_compact_token_limit"}


def codex_entries() -> list[dict]:
    return json.loads((FIXTURES / "debug_models_0.171.json").read_text())["models"]


def thinker() -> ServedModel:
    return ServedModel(
        public_id="qwen-coder",
        context_window=32768,
        supports_vision=True,
        reasoning_levels=["minimal", "low", "high"],
        default_reasoning_effort="high",
    )


def plain() -> ServedModel:
    return ServedModel(public_id="plain-model", supports_reasoning=False)


def test_catalog_entries_have_exactly_the_keys_and_types_of_codex_entries():
    theirs = codex_entries()
    common = set.intersection(*(set(entry) for entry in theirs))
    for ours in codex_catalog.model_catalog([thinker(), plain()])["models"]:
        assert set(ours) == common | EXTRA
        for key in common:
            if ours[key] is None:
                assert key in NULLABLE, key
                continue
            types = {type(entry[key]) for entry in theirs if entry[key] is not None}
            assert type(ours[key]) in types, key
        assert isinstance(ours["auto_compact_token_limit"], int)


def test_catalog_entry_from_model_metadata():
    entry = codex_catalog.catalog_entry(thinker())
    assert entry["slug"] == "qwen-coder"
    assert entry["context_window"] == 32768
    assert entry["auto_compact_token_limit"] == 32768 * 9 // 10
    assert entry["apply_patch_tool_type"] == "freeform"
    assert entry["input_modalities"] == ["text", "image"]
    assert [level["effort"] for level in entry["supported_reasoning_levels"]] == [
        "minimal",
        "low",
        "high",
    ]
    assert all(level["description"] for level in entry["supported_reasoning_levels"])
    assert entry["default_reasoning_level"] == "high"
    assert entry["truncation_policy"] == {"mode": "tokens", "limit": 10000}

    other = codex_catalog.catalog_entry(plain())
    assert other["input_modalities"] == ["text"]
    assert other["supported_reasoning_levels"] == []
    assert other["default_reasoning_level"] is None
    assert other["context_window"] == codex_catalog.FALLBACK_CONTEXT_WINDOW


def test_config_and_profile_parse_and_say_what_codex_needs():
    config = tomllib.loads(codex_kit.config_toml(base_url="https://ai.example.com/"))
    assert config == {
        "model_providers": {
            "switchyard": {
                "name": "OpenAI",
                "base_url": "https://ai.example.com/v1",
                "env_key": "SWITCHYARD_API_KEY",
                "wire_api": "responses",
                "supports_websockets": True,
            }
        }
    }
    profile = tomllib.loads(codex_kit.profile_toml(model=thinker(), catalog_path="/h/cat.json"))
    assert profile == {
        "model_provider": "switchyard",
        "model": "qwen-coder",
        "model_reasoning_effort": "high",
        "model_catalog_json": "/h/cat.json",
    }
    assert "model_reasoning_effort" not in tomllib.loads(codex_kit.profile_toml(model=plain()))


def test_every_setting_has_a_comment_above_it():
    for text in (
        codex_kit.config_toml(base_url="http://x"),
        codex_kit.profile_toml(model=thinker()),
    ):
        lines = text.splitlines()
        for n, line in enumerate(lines):
            if line and not line.startswith("#"):
                assert lines[n - 1].startswith("# "), line


def test_the_key_is_never_written():
    raw = "sy_sk_abcdef0123456789secret"
    files = codex_kit.kit_files(
        models=[thinker()], model=thinker(), base_url="http://x", catalog_path="/c.json"
    )
    assert all(raw not in text and "sy_sk_" not in text for text in files.values())
    json.loads(files[codex_kit.CATALOG_FILE])
    line = codex_kit.export_line("sy_sk_abcd")
    assert "sy_sk_abcd…" in line and "export SWITCHYARD_API_KEY" in line
    assert raw not in line


@pytest.mark.parametrize("shell", ["sh", "bash", "zsh"])
def test_the_export_line_run_as_copied_sets_the_whole_key(shell):
    """Pasted into a shell, the line asks for the key and exports all of it,
    never the prefix the console shows."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    raw = "sy_sk_abcdef0123456789secret"
    script = codex_kit.export_line("sy_sk_abcd") + '\nprintf "[%s]" "$SWITCHYARD_API_KEY"\n'
    ran = subprocess.run(
        [shell, "-c", script], input=raw + "\n", capture_output=True, text=True, timeout=10
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.endswith(f"[{raw}]")


def _codex_bin() -> Path | None:
    explicit = os.environ.get("SWITCHYARD_CODEX_BIN")
    cache = Path(os.environ.get("SWITCHYARD_CACHE_DIR") or Path.home() / ".cache" / "switchyard")
    for candidate in (explicit, cache / "codex" / "node_modules" / ".bin" / "codex"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


@pytest.mark.codex
def test_codex_loads_the_generated_catalog(tmp_path):
    binary = _codex_bin()
    if binary is None:
        pytest.skip("Codex CLI not installed (scripts/install-codex.sh)")
    catalog = tmp_path / "model_catalog.json"
    catalog.write_text(codex_catalog.model_catalog_json([thinker(), plain()]))
    result = subprocess.run(
        [str(binary), "debug", "models", "-c", f"model_catalog_json={json.dumps(str(catalog))}"],
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "CODEX_HOME": str(tmp_path),
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = {entry["slug"]: entry for entry in json.loads(result.stdout)["models"]}
    assert set(loaded) == {"qwen-coder", "plain-model"}
    assert loaded["qwen-coder"]["auto_compact_token_limit"] == 29491
    assert loaded["qwen-coder"]["apply_patch_tool_type"] == "freeform"
