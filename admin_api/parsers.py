"""The management API's request bodies.

DRF's own JSON parser reads with the standard library, which recurses once
per level of nesting: a body nested 100,000 deep raised ``RecursionError``
past the parser's ``ValueError`` handling, a 500 page instead of an error.
orjson reads without recursion and refuses nesting past its limit (1,024
levels), and a body deeper than ``MAX_DEPTH`` is refused here: whatever
it holds (a backend's ``extra_body``) is written out again later, by an
encoder that stops at 255 levels.
"""

from __future__ import annotations

from typing import Any

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as _DrfJSONParser


class JSONParser(_DrfJSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        body = stream.read() if stream is not None else b""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith("depth limit exceeded"):
                raise ParseError(TOO_DEEP) from None
            raise ParseError(f"JSON parse error - {exc}") from None
        if _depth_over(data, MAX_DEPTH):
            raise ParseError(TOO_DEEP)
        return data


MAX_DEPTH = 64
TOO_DEEP = f"JSON parse error - the body nests more than {MAX_DEPTH} levels deep."


def _depth_over(data: Any, limit: int) -> bool:
    level = [data]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for value in level:
            if isinstance(value, dict):
                below.extend(v for v in value.values() if isinstance(v, dict | list))
            elif isinstance(value, list):
                below.extend(v for v in value if isinstance(v, dict | list))
        level = below
    return False
