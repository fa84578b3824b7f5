"""The OpenAI error envelope, and the one place validation errors become it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import ValidationError

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


class ApiError(Exception):
    """An error answered to the client as ``{"error": {...}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,
        headers: Sequence[tuple[bytes, bytes]] = (),
        detail: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        # For the usage row only, never the client: what a backend answered.
        self.detail = detail
        self.code = code
        self.param = param
        self.type = type or ERROR_TYPES.get(status, "invalid_request_error")
        self.headers = list(headers)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def to_bytes(self) -> bytes:
        return orjson.dumps(self.body())


# :meth:`ApiError.body` as JSON Schema (OpenAPI 3.1), the one description of
# the envelope: the public API's document lists it as is, the management
# API's (OpenAPI 3.0) converts it with ``admin_api.schema.openapi_30``.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The OpenAI error envelope, used by every error response.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {
                    "type": "string",
                    "examples": ["invalid_request_error", "authentication_error"],
                },
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}


def invalid(
    message: str, param: str | None = None, code: str = "invalid_request_error"
) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def param_path(loc: Sequence[str | int]) -> str:
    """``["tools", 0, "parameters"]`` as the client writes it: ``tools[0].parameters``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})
_DISCRIMINATOR_TAGS = frozenset(
    {
        "input_text",
        "output_text",
        "text",
        "summary_text",
        "reasoning_text",
        "refusal",
        "input_image",
        "input_file",
        "json_schema",
        "json_object",
        "function",
        "custom",
    }
)


def _is_tag(part: str | int, previous: str | int | None) -> bool:
    """Pydantic puts union member names and discriminator values into an
    error's location; they are not part of the client's parameter path."""
    if not isinstance(part, str):
        return False
    if part[:1].isupper() or part in _TYPE_TAGS:
        return True
    if part.startswith(("list[", "dict[", "function-", "literal[", "tagged-union[")):
        return True
    # Discriminator values follow a list index (content parts, tools) or a
    # union-typed field such as text.format.
    return (isinstance(previous, int) or previous == "format") and part in _DISCRIMINATOR_TAGS


def _clean_loc(loc: Sequence[str | int]) -> list[str | int]:
    cleaned: list[str | int] = []
    previous: str | int | None = None
    for part in loc:
        if not _is_tag(part, previous):
            cleaned.append(part)
        previous = part
    return cleaned


def from_validation_error(exc: ValidationError, prefix: Sequence[str | int] = ()) -> ApiError:
    """Turn the first pydantic error into a 400 naming the parameter."""
    from responses_api.protocol.body import RefusedParameter
    from responses_api.protocol.refusals import REFUSED

    errors = exc.errors(include_url=False)
    # Prefer the most specific error: pydantic lists one per union member, and
    # a validator's own message (value_error, or a refusal written for the
    # client) says more than "not a string".
    first = errors[0]
    for wanted in ({"extra_forbidden"}, {"value_error", REFUSED}):
        match = next((err for err in errors if err["type"] in wanted), None)
        if match is not None:
            first = match
            break
    ctx = first.get("ctx") or {}
    ctx_error = ctx.get("error")
    if isinstance(ctx_error, RefusedParameter):
        return invalid(ctx_error.message, param=ctx_error.param, code="unsupported_parameter")
    loc = [*prefix, *_clean_loc(first["loc"])]
    if first["type"] == REFUSED:
        if ctx.get("field"):
            loc.append(ctx["field"])
        return invalid(first["msg"], param=param_path(loc) or None, code=ctx["code"])
    param = param_path(loc) or None
    if first["type"] == "is_instance_of":
        # A JSON object checked by its type alone (protocol.JsonObject).
        message = f"Invalid value for '{param}': input should be an object."
        return invalid(message, param=param, code="invalid_value")
    if first["type"] == "extra_forbidden":
        return invalid(f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")
    if first["type"] == "missing":
        return invalid(
            f"Missing required parameter: '{param}'.",
            param=param,
            code="missing_required_parameter",
        )
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
        if message[:1].islower():
            message = f"Invalid value for '{param}': {message}."
    if first["type"] in {
        "string_type",
        "int_type",
        "bool_type",
        "dict_type",
        "list_type",
        "float_type",
        "model_type",
        "model_attributes_type",
        "int_from_float",
        "literal_error",
        "union_tag_invalid",
        "string_too_long",
        "string_too_short",
        "greater_than_equal",
        "greater_than",
        "less_than_equal",
        "less_than",
        "too_long",
        "too_short",
    }:
        message = f"Invalid value for '{param}': {message[0].lower()}{message[1:]}."
    return invalid(message, param=param, code="invalid_value")


# How much of what a backend said of an error the usage row keeps, for
# support (never the client: a backend can be made to say anything).
TRACE_BODY_BYTES = 1024


def trace_excerpt(content: bytes) -> str:
    """The start of a backend's error body, as the usage row keeps it."""
    # PostgreSQL text cannot hold NUL.
    excerpt = content[:TRACE_BODY_BYTES].decode("utf-8", "replace").replace("\x00", "\ufffd")
    return f"Body: {excerpt}" if excerpt else ""


def body_too_large(cap: int) -> ApiError:
    """A request body over ``SWITCHYARD_MAX_BODY_BYTES``; the connection is closed."""
    return ApiError(
        413,
        f"The request body is too large: at most {cap} bytes are accepted.",
        code="request_too_large",
        headers=[(b"connection", b"close")],
    )


def body_too_slow(seconds: float) -> ApiError:
    """A request body not complete within ``SWITCHYARD_BODY_TIMEOUT_SECONDS``."""
    return ApiError(
        408,
        f"The request body did not arrive within {seconds:g} s.",
        code="request_timeout",
        headers=[(b"connection", b"close")],
    )


def too_deep(limit: int, param: str | None = None) -> ApiError:
    """A request body nesting JSON deeper than ``limit`` levels."""
    where = f" in '{param}'" if param else ""
    return invalid(
        f"The request body nests JSON too deeply{where}: at most {limit} levels are accepted.",
        param=param,
        code="invalid_json",
    )
