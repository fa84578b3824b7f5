#!/usr/bin/env python3
"""Check that Switchyard's product modules stay small enough to read.

Reports, and exits 1 on any:

- a product module (under accounts/, responses_api/, console/, admin_api/,
  config/; migrations aside) of more than ``MAX_LINES`` lines;
- a class with more than ``MAX_ATTRIBUTES`` attributes, but the models: the
  names it assigns in its body (fields, annotations, constants) and every
  ``self.<name>`` its methods assign, counted once each. The models are the
  classes of the ``models`` modules and those built on Django's ``Model`` or
  pydantic's ``BaseModel`` (directly or through a class of the same module):
  they mirror a table or a wire format field by field.

Usage: ``python scripts/check_sizes.py [ROOT]`` (ROOT: the repository, by
default the one holding this script).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from check_imports import product_modules, run

MAX_LINES = 400
MAX_ATTRIBUTES = 20
MODEL_BASES = {"Model", "BaseModel"}


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def attributes(cls: ast.ClassDef) -> set[str]:
    """The names a class holds: assigned in its body or on ``self``."""
    names: set[str] = set()
    for statement in cls.body:
        for target in _targets(statement):
            if isinstance(target, ast.Name):
                names.add(target.id)
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(statement):
                for target in _targets(node):
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        names.add(target.attr)
    return names


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def model_classes(tree: ast.Module) -> set[str]:
    """The module's classes built on a model base, directly or through
    another class of the module."""
    bases = {
        node.name: {_base_name(base) for base in node.bases}
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    found: set[str] = set()
    while True:
        more = {name for name, of in bases.items() if of & (MODEL_BASES | found)} - found
        if not more:
            return found
        found |= more


def check(root: Path) -> list[str]:
    problems: list[str] = []
    for name, path in sorted(product_modules(root).items()):
        relative = path.relative_to(root).as_posix()
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_LINES:
            problems.append(f"{relative}: {lines} lines (at most {MAX_LINES})")
        if name.split(".")[-1] == "models":
            continue
        tree = ast.parse(text, filename=relative)
        models = model_classes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name not in models:
                count = len(attributes(node))
                if count > MAX_ATTRIBUTES:
                    problems.append(
                        f"{relative}:{node.lineno}: class {node.name} has {count} "
                        f"attributes (at most {MAX_ATTRIBUTES})"
                    )
    return problems


def main(argv: list[str]) -> int:
    return run(
        argv,
        check,
        f"Sizes OK: no product module over {MAX_LINES} lines, "
        f"no class over {MAX_ATTRIBUTES} attributes but the models.",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
