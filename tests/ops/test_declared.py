"""Settings from one source (config/declared/): every variable the code reads
is declared, the reference written from the declarations is the committed
one, and a misspelt ``SWITCHYARD_*`` variable is a warning at start-up."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography.fernet import Fernet

from config.declared.environment import DECLARED, read, unknown_variables
from config.declared.reference import BEGIN, END
from config.declared.spec import Derived
from tests.conftest import ROOT

PRODUCT = ("config", "accounts", "responses_api", "console", "admin_api")
# Calls that take a variable's name first: os.getenv, the declarations'
# read and given, a ``secret`` helper, and django-environ's typed readers on
# ``env`` (os.environ.get is recognised by its receiver).
READERS = {"getenv", "read", "given", "secret"}
ENV_TYPES = {"str", "int", "float", "bool", "list"}


def _reads_by_name(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in READERS
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "get":
        return _is_environ(func.value)
    if func.attr in ENV_TYPES:
        return isinstance(func.value, ast.Name) and func.value.id == "env"
    return func.attr in READERS


def _is_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def environment_reads(source: str) -> set[str]:
    """The variable names ``source`` reads from the environment, where the
    name is a literal."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Call) and node.args and _reads_by_name(node.func):
            name = _literal(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            if isinstance(node.ctx, ast.Load):
                name = _literal(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            name = _literal(node.left)
        if name:
            names.add(name)
    return names


def _product_sources() -> dict[Path, str]:
    paths = [ROOT / "manage.py"]
    for package in PRODUCT:
        paths += [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    return {path: path.read_text(encoding="utf-8") for path in paths}


def test_every_variable_the_product_reads_is_declared():
    reads = {
        name: path.relative_to(ROOT)
        for path, source in _product_sources().items()
        for name in environment_reads(source)
    }
    # The scan sees the reads it must: settings, apps, the server's entry point.
    assert {
        "DEBUG",
        "SECRET_KEY",
        "SWITCHYARD_OIDC_ISSUER",
        "SWITCHYARD_REDIS_TIMEOUT_SECONDS",
        "SWITCHYARD_MEMBER_PASSWORD",
        "PROMETHEUS_MULTIPROC_DIR",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    } <= set(reads)
    undeclared = {name: str(path) for name, path in reads.items() if name not in DECLARED}
    assert not undeclared, f"read without a declaration in config/declared/: {undeclared}"


def test_every_declared_setting_is_read_by_the_product():
    """The reverse: a declaration left behind by a setting that is gone
    would keep documenting it."""
    declared_dir = ROOT / "config" / "declared"
    literals = {
        node.value
        for path, source in _product_sources().items()
        if declared_dir not in path.parents
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    ours = {name for name, s in DECLARED.items() if s.reader == "switchyard"}
    assert ours - literals == set()


def test_the_scan_finds_each_way_of_reading_a_variable():
    source = """
import os
from os import environ
from config.declared.environment import read
a = os.environ.get("SWITCHYARD_ONE")
b = os.getenv("SWITCHYARD_TWO", "x")
c = os.environ["SWITCHYARD_THREE"]
d = "SWITCHYARD_FOUR" in os.environ
e = environ.get("SWITCHYARD_FIVE")
f = read("SWITCHYARD_SIX")
g = env.float("SWITCHYARD_SEVEN", default=1.0)
os.environ["NOT_A_READ"] = "1"
h = {}.get("NOT_THE_ENVIRONMENT")
"""
    found = environment_reads(source)
    assert found == {
        f"SWITCHYARD_{n}" for n in ["ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN"]
    }
    assert not found & set(DECLARED)


def test_a_variable_without_a_declaration_cannot_be_read():
    with pytest.raises(LookupError, match="SWITCHYARD_NOT_DECLARED has no declaration"):
        read("SWITCHYARD_NOT_DECLARED")


def test_a_derived_default_must_be_given_by_the_reader():
    with pytest.raises(TypeError, match="LOG_FORMAT's default is derived"):
        read("LOG_FORMAT")


def test_the_embedded_settings_are_the_declared_defaults():
    """With no environment, each setting named like its variable holds the
    declared default: the declarations document what the code does."""
    names = [
        name
        for name, s in DECLARED.items()
        if s.reader == "switchyard"
        and not isinstance(s.default, Derived)
        # Read, then turned into a setting of another shape.
        and name not in {"SWITCHYARD_PASSWORD_HASHERS", "CELERY_TASK_ALWAYS_EAGER"}
    ]
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        f"print(json.dumps({{n: getattr(s, n, '-') for n in {names!r}}}))"
    )
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    values = {n: v for n, v in json.loads(result.stdout).items() if v != "-"}
    assert len(values) > 30, values
    expected = {
        n: list(DECLARED[n].default)
        if isinstance(DECLARED[n].default, tuple)
        else DECLARED[n].default
        for n in values
    }
    assert values == expected


# --------------------------------------------------------------------------- the reference


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/settings_reference.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_committed_reference_and_platform_table_are_the_generated_ones():
    result = _generate("--check")
    assert result.returncode == 0, result.stderr


def test_the_check_names_a_generated_file_edited_by_hand(tmp_path):
    for name in ("docs/reference/settings.md", "platform/README.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    guide = tmp_path / "platform" / "README.md"
    text = guide.read_text(encoding="utf-8")
    guide.write_text(text.replace("| `DEBUG` | no |", "| `DEBUG` | yes |"), encoding="utf-8")
    result = _generate("--check", "--root", str(tmp_path))
    assert result.returncode == 1
    assert "platform/README.md differs" in result.stderr
    assert "docs/reference" not in result.stderr
    assert _generate("--root", str(tmp_path)).returncode == 0
    assert guide.read_text(encoding="utf-8") == text


def test_the_platform_table_lists_every_placed_setting_between_its_markers():
    guide = (ROOT / "platform" / "README.md").read_text(encoding="utf-8")
    table = guide[guide.index(BEGIN) : guide.index(END)]
    placed = {name for name, s in DECLARED.items() if s.placement}
    rows = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    assert rows == placed
    reference = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    assert {line.split("`")[1] for line in reference.splitlines() if line.startswith("| `")} == set(
        DECLARED
    )


def _platform_variables() -> dict[str, str]:
    """Every variable the platform's files set: the ConfigMaps and the
    Secret template of platform/k8s, the env example and the units of
    platform/systemd (commented examples too)."""
    found: dict[str, str] = {}
    for path in (ROOT / "platform" / "k8s").rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") in ("ConfigMap", "Secret"):
                for name in {**(doc.get("data") or {}), **(doc.get("stringData") or {})}:
                    found[name] = str(path.relative_to(ROOT))
    for path in (ROOT / "platform" / "systemd").iterdir():
        for line in path.read_text(encoding="utf-8").splitlines():
            setting = re.match(r"#?(?:Environment=)?([A-Z][A-Z0-9_]+)=", line)
            if setting:
                found[setting.group(1)] = str(path.relative_to(ROOT))
    return found


def test_every_variable_the_platform_sets_is_declared():
    found = _platform_variables()
    assert {"SWITCHYARD_PRODUCTION", "OTEL_EXPORTER_OTLP_HEADERS", "SECRET_KEY_FILE"} <= set(found)
    files = {f"{name}_FILE" for name, s in DECLARED.items() if s.secret}
    undeclared = {n: p for n, p in found.items() if n not in DECLARED and n not in files}
    assert not undeclared


# --------------------------------------------------------------------------- unknown variables


def test_an_unknown_variable_is_named_with_the_closest_setting():
    lines = unknown_variables(
        {
            "SWITCHYARD_READ_TIMEOUTS": "5",
            "SWITCHYARD_REDIS_URL": "redis://x",
            "SWITCHYARD_ZZZ": "1",
            "SWITCHYARD_ENCRYPTION_KEY_FILE": "/run/secrets/key",
            "SWITCHYARD_CACHE_DIR": "/tmp",
            "READ_TIMEOUT": "5",
        }
    )
    assert len(lines) == 3, lines
    assert lines[0].startswith("SWITCHYARD_READ_TIMEOUTS is set but is not a Switchyard setting")
    assert "did you mean SWITCHYARD_READ_TIMEOUT?" in lines[0]
    assert "did you mean REDIS_URL?" in lines[1]
    assert lines[2].startswith("SWITCHYARD_ZZZ ") and "did you mean" not in lines[2]


def _check(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV")}
    key = tmp_path / "key"
    key.write_text(Fernet.generate_key().decode())
    env.update(SWITCHYARD_ENCRYPTION_KEY_FILE=str(key), **variables)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_misspelt_variable_is_one_warning_at_start_up(tmp_path):
    result = _check(tmp_path, SWITCHYARD_KEEPALIVE_SECOND="3", SWITCHYARD_CACHE_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "switchyard.settings" in line]
    assert len(warnings) == 1, result.stderr
    assert "WARNING" in warnings[0]
    assert "SWITCHYARD_KEEPALIVE_SECOND is set but is not a Switchyard setting" in warnings[0]
    assert "did you mean SWITCHYARD_KEEPALIVE_SECONDS?" in warnings[0]


def test_declared_variables_start_without_a_warning(tmp_path):
    result = _check(tmp_path, SWITCHYARD_KEEPALIVE_SECONDS="3", SWITCHYARD_WEB_BIND="10.0.0.1")
    assert result.returncode == 0, result.stderr
    assert "switchyard.settings" not in result.stderr
