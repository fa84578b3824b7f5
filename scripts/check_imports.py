#!/usr/bin/env python3
"""Check the import rules between Switchyard's product modules.

Reads every module under accounts/, responses_api/, console/, admin_api/ and config/
(migrations and tests aside) with ``ast``, counting every import: at the top,
inside functions, under ``if TYPE_CHECKING:``. Relative imports are resolved;
importing ``a.b.c`` also imports the packages ``a`` and ``a.b`` (their
``__init__`` modules), as Python does. Reports, and exits 1 on any:

- import cycles: each group of modules that import one another, directly or
  not (a strongly connected component of more than one module);
- upward imports between the apps, whose order is
  ``accounts`` <- ``responses_api`` <- ``console`` | ``admin_api`` <- ``config``:
  an app may import only the apps of the levels before it (``console`` and
  ``admin_api`` sit side by side and import neither each other), and none
  imports ``config``;
- upward imports between the layers inside ``responses_api`` (``PARTS``, the
  docs/reference/architecture.md), by the same rule. The app's own top-level modules
  other than ``models`` (``apps``, ``tasks``, ``views``, ``admin``, the
  management commands) wire the parts together and sit above them all; a
  sub-package that is not placed in ``PARTS`` is reported.

Usage: ``python scripts/check_imports.py [ROOT]`` (ROOT: the repository,
by default the one holding this script).
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Lower levels first; a module may import its own app and the apps of the
# levels before it. Apps of one level are siblings: neither imports the other.
LEVELS = (("accounts",), ("responses_api",), ("console", "admin_api"), ("config",))
LAYERS = tuple(app for level in LEVELS for app in level)
ORDER = " <- ".join(" | ".join(level) for level in LEVELS)
SKIPPED_DIRS = {"migrations", "tests", "__pycache__"}

# The layers inside ``responses_api``, lower first, by the same rule as LEVELS.
PARTS = (
    ("runtime",),
    ("protocol",),
    ("models",),
    ("translate",),
    ("access", "catalogue"),
    ("usage", "store", "backends", "tools", "files"),
    ("retrieval",),
    ("pipeline",),
    ("api",),
    ("background",),
    ("edge",),
    ("checks", "simulator"),
)
PARTS_ORDER = " <- ".join(" | ".join(level) for level in PARTS)
INNER_APP = "responses_api"


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    path: str
    line: int
    # False for a package imported only as the parent of the module named.
    named: bool = True


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules(root: Path) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for top in LAYERS:
        for path in sorted((root / top).rglob("*.py")):
            if SKIPPED_DIRS.intersection(path.relative_to(root).parts):
                continue
            modules[module_name(root, path)] = path
    return modules


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _with_packages(name: str, modules: dict[str, Path]) -> list[str]:
    """``name`` (or the deepest product module it lies in) and every package
    above it: all that Python runs to import it."""
    parts = name.split(".")
    found = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return [candidate for candidate in found if candidate in modules]


def imports_of(name: str, path: Path, root: Path, modules: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    relative_path = path.relative_to(root).as_posix()
    found: list[Import] = []

    def add(target: str, line: int, named: bool = True) -> None:
        *parents, deepest = _with_packages(target, modules) or [""]
        for imported in parents:
            if imported != name:
                found.append(Import(name, imported, relative_path, line, named=False))
        if deepest and deepest != name:
            found.append(Import(name, deepest, relative_path, line, named))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(name, is_package, node.level, node.module)
            else:
                base = node.module or ""
            # ``from package import submodule`` imports the submodule too;
            # the package counts as named when something else is taken from it.
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            add(base, node.lineno, named=len(submodules) < len(node.names))
            for submodule in submodules:
                add(submodule, node.lineno)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(name: str, path: Path, root: Path, modules: dict[str, Path]) -> list[str]:
    """Where a module takes another module's ``_private`` name: by ``from M
    import _name``, or as ``m._name`` of a module it imported. A private
    name is its module's own business; a step another module needs is made
    public."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    where = path.relative_to(root).as_posix()
    found: list[str] = []
    bound: dict[str, str] = {}  # a local name -> the product module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(name, is_package, node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif base in modules and base != name and _private(alias.name):
                    found.append(f"  {where}:{node.lineno}: {name} imports {base}.{alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and bound[node.value.id] != name
            and _private(node.attr)
        ):
            used = f"{bound[node.value.id]}.{node.attr}"
            found.append(f"  {where}:{node.lineno}: {name} uses {used}")
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; components in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return sorted(components)


def shortest_cycle(start: str, graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``members``."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(graph[node] & members):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if successor not in previous:
                previous[successor] = node
                queue.append(successor)
    return [start]


def layer_of(module: str) -> int:
    app = module.split(".")[0]
    return next(i for i, level in enumerate(LEVELS) if app in level)


def _upward(importer: str, imported: str) -> bool:
    """Into a higher level, or into a sibling app of the same level."""
    mine, theirs = layer_of(importer), layer_of(imported)
    sibling = mine == theirs and importer.split(".")[0] != imported.split(".")[0]
    return theirs > mine or sibling


def part_of(module: str) -> tuple[int, str] | None:
    """The level and name of the part of ``responses_api`` a module is in: the
    top-level modules but ``models`` are the wiring, above every part; None
    for the package itself, and for a sub-package not placed in PARTS."""
    names = module.split(".")
    if len(names) == 1:
        return None
    if names[1] == "management" or (len(names) == 2 and names[1] != "models"):
        return len(PARTS), INNER_APP
    return next(
        ((i, names[1]) for i, level in enumerate(PARTS) if names[1] in level),
        None,
    )


def _upward_inside(importer: str, imported: str) -> bool:
    mine, theirs = part_of(importer), part_of(imported)
    if mine is None or theirs is None:
        return False
    return theirs[0] > mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1])


def unplaced(modules: dict[str, Path]) -> list[str]:
    """Sub-packages of ``responses_api`` that PARTS does not place."""
    return sorted(
        {
            ".".join(name.split(".")[:2])
            for name in modules
            if name.startswith(INNER_APP + ".") and part_of(name) is None
        }
    )


def check(root: Path) -> list[str]:
    """Every problem found under ``root``, as lines to print."""
    modules = product_modules(root)
    imports = [
        found for name, path in modules.items() for found in imports_of(name, path, root, modules)
    ]
    problems: list[str] = [
        f"Unplaced part: {name} (add it to PARTS in scripts/check_imports.py)"
        for name in unplaced(modules)
    ]
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for found in imports:
        graph[found.importer].add(found.imported)

    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    if cycles:
        problems.append(f"Import cycles ({len(cycles)}):")
    for component in cycles:
        members = set(component)
        problems.append("  " + " -> ".join(shortest_cycle(component[0], graph, members)))
        problems.append(f"    all of: {', '.join(component)}; their imports of one another:")
        edges = sorted(
            {
                (f.path, f.line, f.imported)
                for f in imports
                if f.importer in members and f.imported in members
            }
        )
        problems += [f"      {path}:{line} imports {imported}" for path, line, imported in edges]

    upward = sorted(
        {
            (f.path, f.line, f.importer, f.imported)
            for f in imports
            if f.named and _upward(f.importer, f.imported)
        }
    )
    if upward:
        problems.append(
            f"Upward imports ({len(upward)}; the order is {ORDER}, and an app "
            "imports only those of the levels before it):"
        )
    problems += [
        f"  {path}:{line}: {importer} imports {imported}"
        for path, line, importer, imported in upward
    ]
    inside = sorted(
        {
            (f.path, f.line, f.importer, f.imported)
            for f in imports
            if f.named
            and f.importer.startswith(INNER_APP + ".")
            and f.imported.startswith(INNER_APP + ".")
            and _upward_inside(f.importer, f.imported)
        }
    )
    if inside:
        problems.append(
            f"Upward imports inside {INNER_APP} ({len(inside)}; the order is "
            f"{PARTS_ORDER}, and a part imports only those of the levels before it):"
        )
    problems += [
        f"  {path}:{line}: {importer} imports {imported}"
        for path, line, importer, imported in inside
    ]
    private = [
        line for name, path in modules.items() for line in private_uses(name, path, root, modules)
    ]
    if private:
        problems.append(f"Private names used outside their module ({len(private)}):")
    return problems + private


def run(argv: list[str], check: Callable[[Path], list[str]], passed: str) -> int:
    """Print what ``check`` finds under the repository (or ``argv[1]``);
    exit status 1 when it finds anything."""
    root = Path(argv[1]).resolve() if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check(root)
    print("\n".join(problems) if problems else passed)
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    return run(
        argv,
        check,
        f"Imports OK: no cycles, no upward imports between {', '.join(LAYERS)}, "
        f"nor between the parts of {INNER_APP} ({PARTS_ORDER}), and no module's "
        "private names used by another.",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
