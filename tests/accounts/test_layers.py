"""Apps import only downward: accounts ← responses_api ← console. A lower
app that imported a higher one (even inside a function or for type
checking) would tie the layers together again."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ABOVE = {"accounts": ("responses_api", "console"), "responses_api": ("console",)}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("app", sorted(ABOVE))
def test_an_app_never_imports_the_apps_above_it(app):
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / app).rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in ABOVE[app]
    ]
    assert offenders == []
