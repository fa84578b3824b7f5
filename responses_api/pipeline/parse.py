"""The first stage of ``POST /v1/responses``: the body, parsed once into
the typed models of ``protocol/``, or the 4xx that says what is wrong with it."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from responses_api.pipeline.responder import JSON
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import (
    ApiError,
    from_validation_error,
    invalid,
    param_path,
    too_deep,
)


def parse_request(body: bytes, headers: dict[bytes, bytes]) -> CreateResponse:
    content_type = headers.get(b"content-type", JSON).split(b";")[0].strip()
    if (
        content_type
        and content_type.lower() not in (JSON, b"text/json")
        and not content_type.endswith(b"+json")
    ):
        raise ApiError(
            415,
            "Content-Type must be application/json.",
            code="unsupported_media_type",
        )
    if not body:
        raise invalid("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _not_json(body, exc) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    refuse_too_deep(data)
    try:
        return CreateResponse.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    except RecursionError:
        raise invalid("The request body is nested too deeply.", code="invalid_json") from None


# JSON nesting accepted in a request body, the body itself being level 1.
# orjson parses 1024 levels but writes only 255, and fields are written
# again (to the backend, into the echoed response and its events, a few
# levels under their envelope): no real schema or argument comes near 128.
MAX_DEPTH = 128


def _not_json(body: bytes, exc: orjson.JSONDecodeError) -> ApiError:
    if exc.msg.startswith("depth limit exceeded"):
        return too_deep(MAX_DEPTH)
    try:
        body.decode()
    except UnicodeDecodeError as bad:
        # Checked only here: orjson speaks of surrogates for any bad byte.
        return invalid(
            f"The request body is not valid UTF-8 (byte {bad.start}); JSON must be UTF-8.",
            code="invalid_json",
        )
    return invalid(
        f"The request body is not valid JSON: {exc}. Check that it is a single JSON object.",
        code="invalid_json",
    )


def refuse_too_deep(data: dict[str, Any]) -> None:
    """A 400 naming the field when a body nests deeper than ``MAX_DEPTH``:
    items are stored and relayed as JSON, which nests only so deep."""
    if _too_deep(data):
        raise too_deep(MAX_DEPTH, param=_deep_param(data) or None)


def _too_deep(data: dict[str, Any]) -> bool:
    """Whether ``data`` nests deeper than ``MAX_DEPTH``: one level at a time,
    looking only for containers (on every request's path)."""
    level: list[Any] = [data]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            return True
        below: list[Any] = []
        for container in level:
            for value in container.values() if type(container) is dict else container:
                kind = type(value)
                if kind is dict or kind is list:
                    below.append(value)
        level = below
        depth += 1
    return False


# Parts of a request that hold items, tools or parts: a path is named
# through them down to the first free-form field.
_STRUCTURE = frozenset({"input", "tools", "content", "output", "text", "format", "summary"})


def _deep_param(data: dict[str, Any]) -> str:
    """The field (``tools[0].parameters``) holding the nesting too deep."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            break
        items = value.items() if type(value) is dict else enumerate(value)
        stack.extend((child, [*path, key]) for key, child in items if type(child) in (dict, list))
    else:
        return ""  # not reached: called on data found too deep
    named: list[str | int] = []
    for part in path:
        named.append(part)
        if isinstance(part, str) and part not in _STRUCTURE:
            break
        if isinstance(part, int) and len(named) > 1 and isinstance(named[-2], int):
            break  # a list in a list is no request structure
    return param_path(named)
