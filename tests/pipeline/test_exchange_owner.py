"""Only ``responses_api/pipeline/exchange.py`` writes an exchange's facts:
every other module records what it learns through an ``Exchange`` method
and only reads the attributes, so each field of the usage row has one
place that sets it."""

from __future__ import annotations

import ast
import textwrap

from tests.conftest import ROOT

PACKAGE = ROOT / "responses_api"
OWNER = PACKAGE / "gateway" / "exchange.py"


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while targets:
        target = targets.pop()
        if isinstance(target, ast.Tuple | ast.List):
            targets.extend(target.elts)
        elif isinstance(target, ast.Starred):
            targets.append(target.value)
        else:
            flat.append(target)
    return flat


def _on_an_exchange(target: ast.expr) -> bool:
    """Whether ``target`` is an attribute of an exchange, or of something an
    exchange holds: ``exchange.x``, ``call.exchange.x``, ``exchange.timing.x``."""
    if not isinstance(target, ast.Attribute):
        return False
    node: ast.expr = target.value
    while True:
        if isinstance(node, ast.Name):
            return node.id == "exchange"
        if not isinstance(node, ast.Attribute):
            return False
        if node.attr == "exchange":
            return True
        node = node.value


def exchange_writes(source: str, name: str = "<string>") -> list[str]:
    """Every assignment in ``source`` to an attribute of an exchange, as
    ``name:line: text``."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        for target in _targets(node):
            if _on_an_exchange(target):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def test_no_module_but_the_exchange_assigns_an_exchange_attribute():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != OWNER and "migrations" not in path.parts:
            found += exchange_writes(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


def test_every_kind_of_assignment_to_an_exchange_is_caught():
    source = textwrap.dedent(
        """
        def handler(call, exchange, drain):
            exchange.status = 200
            call.exchange.note = "planted"
            exchange.attempts += 1
            exchange.model: str = "m"
            exchange.timing.ttft_ms = 1.0
            first, call.exchange.stream = 1, True
            for task, exchange in drain.items():
                exchange.shutdown = True
        """
    )
    assert [line.split(": ", 1)[0] for line in exchange_writes(source, "planted.py")] == [
        f"planted.py:{n}" for n in (3, 4, 5, 6, 7, 8, 10)
    ]


def test_reading_an_exchange_and_holding_one_are_not_writes():
    source = textwrap.dedent(
        """
        class Responder:
            def __init__(self, exchange):
                self.exchange = exchange
                self.started = exchange.started

        def handler(call):
            exchange = call.exchange
            call.exchange.notice("code", "message")
            status = exchange.outcome.status
            exchanges = {}
            exchanges.status = 1
        """
    )
    assert exchange_writes(source) == []
