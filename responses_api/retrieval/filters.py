"""``filters`` of a vector store search, on the files' ``attributes``, as
OpenAI's ``ComparisonFilter`` and ``CompoundFilter`` define them.

A comparison with a key the file does not have is false, whatever its
operator (``ne`` and ``nin`` too), as a comparison with SQL's NULL is.
``gt``/``gte``/``lt``/``lte`` compare numbers with numbers and strings
with strings (ISO dates order so); across types they are false."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from responses_api.retrieval.errors import InvalidParameter

Predicate = Callable[[Mapping[str, Any]], bool]
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
MAX_DEPTH = 8
MAX_NODES = 100


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_kind(a: Any, b: Any) -> bool:
    return (_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return _same_kind(a, b) and a == b


def _ordered(op: str, a: Any, b: Any) -> bool:
    if not _same_kind(a, b):
        return False
    return {"gt": a > b, "gte": a >= b, "lt": a < b, "lte": a <= b}[op]


def filter_parse(value: Any, param: str = "filters") -> Predicate:
    """The predicate over a file's attributes, or InvalidParameter naming
    the part of ``filters`` that is wrong."""
    counted = [0]
    return _parse(value, param, 0, counted)


def _parse(value: Any, param: str, depth: int, counted: list[int]) -> Predicate:
    counted[0] += 1
    if depth > MAX_DEPTH or counted[0] > MAX_NODES:
        raise InvalidParameter(
            f"filters may nest {MAX_DEPTH} deep and hold {MAX_NODES} filters at most.", param
        )
    if not isinstance(value, dict):
        raise InvalidParameter("A filter must be an object.", param)
    kind = value.get("type")
    if kind in ("and", "or"):
        if set(value) != {"type", "filters"} or not isinstance(value["filters"], list):
            raise InvalidParameter(f"An '{kind}' filter takes 'type' and 'filters'.", param)
        parts = [
            _parse(item, f"{param}.filters[{i}]", depth + 1, counted)
            for i, item in enumerate(value["filters"])
        ]
        if kind == "and":
            return lambda attributes: all(part(attributes) for part in parts)
        return lambda attributes: any(part(attributes) for part in parts)
    if kind not in COMPARISONS:
        raise InvalidParameter(
            f"A filter's type must be one of {', '.join(COMPARISONS)}, 'and' or 'or'.",
            f"{param}.type",
        )
    if set(value) != {"type", "key", "value"} or not isinstance(value["key"], str):
        raise InvalidParameter(f"A '{kind}' filter takes 'type', 'key' and 'value'.", param)
    key, target = value["key"], value["value"]
    if kind in ("in", "nin"):
        if not isinstance(target, list) or not all(_scalar(v) for v in target):
            raise InvalidParameter(f"An '{kind}' filter's value must be a list.", f"{param}.value")
    elif not _scalar(target):
        raise InvalidParameter(
            f"A '{kind}' filter's value must be a string, number or boolean.", f"{param}.value"
        )
    return _comparison(kind, key, target)


def _comparison(kind: str, key: str, target: Any) -> Predicate:
    def compare(attributes: Mapping[str, Any]) -> bool:
        if key not in attributes:
            return False
        have = attributes[key]
        if kind == "eq":
            return _equal(have, target)
        if kind == "ne":
            return not _equal(have, target)
        if kind == "in":
            return any(_equal(have, v) for v in target)
        if kind == "nin":
            return not any(_equal(have, v) for v in target)
        return _ordered(kind, have, target)

    return compare
