"""What the request models accept, and how they refuse the rest.

The top level of a request is strict: an unknown field is refused. Input
items and tools are loose, ignoring fields they don't know, because clients
such as Codex send back items exactly as the server emitted them, with ids
and nulls. What an item or a tool cannot be is refused with a message
written for the client, which ``errors.from_validation_error`` passes on as
it is. Items and tools are chosen by a function of their ``type``, so the
OpenAPI document shows them as plain objects.
"""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


# Tools and input items are discriminated by ``type`` through a function, not
# a field name: a message may come without ``type`` (``{"role": "user", …}``),
# a hosted tool's or item's type is any of many, and what is refused gets a
# message naming it (the "Refused" member only ever raises). Tags are the
# class names, which never read as part of a client's parameter path
# (``errors.from_validation_error``).

# The pydantic error type of a refusal whose message is written for the client;
# its context names the sub-field (``field``) and the error ``code``.
REFUSED = "request_refused"


def refuse(
    message: str, *, field: str | None = None, code: str = "invalid_value", **ctx: Any
) -> NoReturn:
    """Refuse with a 400 whose message is written for the client."""
    raise PydanticCustomError(REFUSED, message, {"field": field, "code": code, **ctx})


# The OpenAPI document keeps items and tools as plain objects, as they are
# chosen by a function; a JSON Schema ``oneOf`` would call a message that
# also fits the open hosted-item shape invalid.
OBJECTS: dict[str, Any] = {
    "type": "array",
    "items": {"type": "object", "additionalProperties": True},
}
