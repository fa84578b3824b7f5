"""The import rules of scripts/check_imports.py: no cycles among product
modules, apps import only the apps below them
(accounts <- responses_api <- console | admin_api <- config; console and
admin_api side by side, importing neither each other), and the parts of
responses_api import only the parts below them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "check_imports.py"

spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
assert spec and spec.loader
check_imports = importlib.util.module_from_spec(spec)
sys.modules["check_imports"] = check_imports  # dataclasses look their module up
spec.loader.exec_module(check_imports)


def write_tree(root: Path, files: dict[str, str]) -> None:
    for top in check_imports.LAYERS:
        (root / top).mkdir(exist_ok=True)
        (root / top / "__init__.py").touch()
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_product_modules_have_no_import_cycles_and_no_upward_imports():
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_clean_tree_passes(tmp_path):
    write_tree(
        tmp_path,
        {
            "accounts/models.py": "import os\n",
            "responses_api/models.py": "from accounts.models import os\n",
            "console/views/__init__.py": "",
            "console/views/keys.py": "from responses_api import models\nfrom . import pages\n",
            "console/views/pages.py": "from ..forms import Form\n",
            "console/forms.py": "Form = object\n",
            "config/urls.py": "import console.views.keys\n",
        },
    )
    assert check_imports.check(tmp_path) == []
    assert check_imports.main(["check_imports", str(tmp_path)]) == 0


def test_a_cycle_through_a_function_and_type_checking_is_reported(tmp_path):
    write_tree(
        tmp_path,
        {
            "responses_api/relay.py": "from .backends import failover\n",
            "responses_api/backends/__init__.py": "",
            "responses_api/backends/failover.py": """
                from typing import TYPE_CHECKING

                if TYPE_CHECKING:
                    from responses_api.draining import Drain


                def forward():
                    from ..relay import Exchange
            """,
            "responses_api/draining.py": "import responses_api.relay\n",
        },
    )
    problems = "\n".join(check_imports.check(tmp_path))
    assert "Import cycles (1):" in problems
    assert "responses_api.backends.failover -> responses_api.relay" in problems
    assert "responses_api/backends/failover.py:9 imports responses_api.relay" in problems
    assert "responses_api/backends/failover.py:5 imports responses_api.draining" in problems
    assert "responses_api/draining.py:1 imports responses_api.relay" in problems


def test_importing_a_package_counts_as_importing_its_init(tmp_path):
    write_tree(
        tmp_path,
        {
            "responses_api/translate/__init__.py": "from .stream import emit\n",
            "responses_api/translate/stream.py": "import responses_api.translate.request\n",
            "responses_api/translate/request.py": "",
        },
    )
    problems = "\n".join(check_imports.check(tmp_path))
    assert "responses_api.translate -> responses_api.translate.stream" in problems


def test_upward_imports_and_imports_of_config_are_reported(tmp_path):
    write_tree(
        tmp_path,
        {
            "accounts/services.py": "def f():\n    from responses_api.auth import hash_key\n",
            "responses_api/auth.py": "",
            "responses_api/tasks.py": "from console.health import record\n",
            "console/health.py": "from config import celery\n",
            "config/celery.py": "",
            "config/urls.py": "import accounts.services, console.health\n",
        },
    )
    assert check_imports.check(tmp_path)[1:] == [
        "  accounts/services.py:2: accounts.services imports responses_api.auth",
        "  console/health.py:1: console.health imports config.celery",
        "  responses_api/tasks.py:1: responses_api.tasks imports console.health",
    ]
    assert check_imports.main(["check_imports", str(tmp_path)]) == 1


def test_a_private_name_taken_from_another_module_is_reported(tmp_path):
    write_tree(
        tmp_path,
        {
            "accounts/keys.py": "_SALT = 1\n\ndef _hash():\n    return _SALT\n",
            "accounts/services.py": (
                "from accounts.keys import _hash\nfrom accounts import keys\n"
                "from . import keys as k\n\n"
                "def f():\n    return keys._SALT, k._SALT, keys.__name__, _hash\n"
            ),
            "accounts/own.py": "_X = 1\n\ndef g():\n    from accounts.own import _X\n",
        },
    )
    assert check_imports.check(tmp_path) == [
        "Private names used outside their module (3):",
        "  accounts/services.py:1: accounts.services imports accounts.keys._hash",
        "  accounts/services.py:6: accounts.services uses accounts.keys._SALT",
        "  accounts/services.py:6: accounts.services uses accounts.keys._SALT",
    ]


def test_migrations_are_not_read(tmp_path):
    write_tree(tmp_path, {"accounts/migrations/0001_initial.py": "import console\n"})
    assert check_imports.check(tmp_path) == []


def test_the_management_api_imports_the_lower_apps_but_not_its_sibling(tmp_path):
    write_tree(
        tmp_path,
        {
            "admin_api/views.py": "from accounts import models\nfrom responses_api import x\n",
            "admin_api/bad.py": "from console import forms\n",
            "console/bad.py": "import admin_api.views\n",
            "responses_api/x.py": "",
            "accounts/models.py": "",
            "console/forms.py": "",
        },
    )
    assert check_imports.check(tmp_path)[1:] == [
        "  admin_api/bad.py:1: admin_api.bad imports console.forms",
        "  console/bad.py:1: console.bad imports admin_api.views",
    ]


def test_a_lower_part_of_the_api_importing_a_higher_one_is_reported(tmp_path):
    write_tree(
        tmp_path,
        {
            "responses_api/models.py": "from responses_api.runtime import histogram\n",
            "responses_api/runtime/__init__.py": "",
            "responses_api/runtime/histogram.py": "",
            "responses_api/translate/__init__.py": "",
            "responses_api/translate/stream.py": "from responses_api.pipeline import create\n",
            "responses_api/pipeline/__init__.py": "",
            "responses_api/pipeline/create.py": "from responses_api.translate import stream\n",
            "responses_api/usage/__init__.py": "",
            "responses_api/usage/writer.py": "def f():\n    from responses_api.store import loop\n",
            "responses_api/store/__init__.py": "",
            "responses_api/store/loop.py": "from responses_api import models\n",
            "responses_api/tasks.py": "from responses_api.pipeline import create\n",
        },
    )
    problems = check_imports.check(tmp_path)
    assert [p for p in problems if p.startswith("  responses_api/")] == [
        "  responses_api/translate/stream.py:1: "
        "responses_api.translate.stream imports responses_api.pipeline.create",
        "  responses_api/usage/writer.py:2: "
        "responses_api.usage.writer imports responses_api.store.loop",
    ]
    assert any(p.startswith("Upward imports inside responses_api (2;") for p in problems)


def test_a_part_of_the_api_not_placed_in_the_layers_is_reported(tmp_path):
    write_tree(
        tmp_path,
        {"responses_api/misc/__init__.py": "", "responses_api/misc/helpers.py": ""},
    )
    assert check_imports.check(tmp_path) == [
        "Unplaced part: responses_api.misc (add it to PARTS in scripts/check_imports.py)"
    ]


def _load_check_sizes():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        sizes_spec = importlib.util.spec_from_file_location(
            "check_sizes", SCRIPT.parent / "check_sizes.py"
        )
        assert sizes_spec and sizes_spec.loader
        module = importlib.util.module_from_spec(sizes_spec)
        sizes_spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


check_sizes = _load_check_sizes()


def test_product_modules_and_classes_stay_small():
    result = subprocess.run(
        [sys.executable, str(SCRIPT.parent / "check_sizes.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_long_modules_and_classes_with_many_attributes_are_reported(tmp_path):
    many = "\n".join(f"    a{i} = {i}" for i in range(15))
    more = many.replace("a", "c")
    on_self = "\n".join(f"        self.b{i} = {i}" for i in range(6))
    write_tree(
        tmp_path,
        {
            "responses_api/long.py": "x = 1\n" * 401,
            "responses_api/just.py": "x = 1\n" * 400,
            "responses_api/wide.py": f"class Wide:\n{many}\n    def __init__(self):\n{on_self}\n",
            "responses_api/row.py": "from pydantic import BaseModel\n"
            f"class Base(BaseModel):\n    pass\nclass Row(Base):\n{many}\n{more}\n",
            "responses_api/models.py": f"class Table:\n{many}\n{more}\n",
        },
    )
    assert check_sizes.check(tmp_path) == [
        "responses_api/long.py: 401 lines (at most 400)",
        "responses_api/wide.py:1: class Wide has 21 attributes (at most 20)",
    ]


def test_a_web_process_loads_no_feature_library_until_a_feature_is_used():
    """What a plain request never needs stays out of a web process's memory
    (``make bench`` measures its RSS): numpy and the vector index
    (vector stores), the PDF reader, the MCP SDK, the tokenizer, the
    template engine and the KV-event subscriber (precise routing), the S3
    client (files in a bucket)."""
    libraries = (
        "numpy",
        "usearch",
        "pypdf",
        "mcp",
        "tokenizers",
        "jinja2",
        "zmq",
        "msgpack",
        "boto3",
        "storages",
    )
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, django; django.setup(); import config.asgi; "
            f"print(sorted(m for m in {libraries!r} if m in sys.modules))",
        ],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.stdout.strip() == "[]", (loaded.stdout, loaded.stderr[-2000:])
