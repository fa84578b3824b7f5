"""The body of ``POST /v1/embeddings``, OpenAI's ``EmbeddingCreateParams``
(docs/api/embeddings.md). Unknown fields are refused; ``input`` is checked
by hand so that each wrong shape gets a message saying what is accepted.
This module imports neither Django nor httpx."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr, field_validator

from responses_api.protocol.refusals import Strict

# The largest token id accepted (vocabularies are far smaller).
MAX_TOKEN_ID = 2**31 - 1
SHAPES = (
    "a string, an array of strings, an array of token ids (integers) "
    "or an array of arrays of token ids"
)


class EmbeddingRequest(Strict):
    model: StrictStr = Field(min_length=1, max_length=200)
    # Normalised to a list: each element a text or one text's token ids.
    input: list[str | list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: StrictInt | None = Field(default=None, ge=1, le=65_536)
    user: StrictStr | None = Field(default=None, max_length=512)

    @field_validator("input", mode="before")
    @classmethod
    def _inputs(cls, value: Any) -> list[str | list[int]]:
        if isinstance(value, str):
            if not value:
                raise ValueError("'input' cannot be an empty string.")
            return [value]
        if not isinstance(value, list) or not value:
            raise ValueError(f"'input' must be a non-empty array or a string: {SHAPES}.")
        if all(_token(v) for v in value):
            return [value]
        inputs: list[str | list[int]] = []
        kind = type(value[0])
        for index, item in enumerate(value):
            if type(item) is not kind:
                raise ValueError(f"'input[{index}]' mixes kinds: 'input' must be {SHAPES}.")
            if isinstance(item, str):
                if not item:
                    raise ValueError(f"'input[{index}]' cannot be an empty string.")
            elif not isinstance(item, list) or not item or not all(_token(t) for t in item):
                raise ValueError(
                    f"'input[{index}]' must be a non-empty string or a non-empty array of "
                    f"token ids (integers from 0): 'input' must be {SHAPES}."
                )
            inputs.append(item)
        return inputs


def _token(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_TOKEN_ID


def input_size(inputs: list[str | list[int]]) -> int:
    """The characters of the inputs, a token id counting one."""
    return sum(len(item) for item in inputs)


_INPUT_SCHEMA = {
    "description": f"What to embed: {SHAPES}. Empty strings and arrays are refused.",
    "anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
        {
            "type": "array",
            "minItems": 1,
            "items": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
        },
    ],
}
_RESPONSE_SCHEMA = {
    "type": "object",
    "required": ["object", "data", "model", "usage"],
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["object", "index", "embedding"],
                "properties": {
                    "object": {"const": "embedding"},
                    "index": {"type": "integer"},
                    "embedding": {
                        "description": "Floats, or with `encoding_format: base64` the "
                        "base64 of their little-endian float32 bytes.",
                        "oneOf": [
                            {"type": "array", "items": {"type": "number"}},
                            {"type": "string", "contentEncoding": "base64"},
                        ],
                    },
                },
            },
        },
        "model": {"type": "string", "description": "The model as the request named it."},
        "usage": {
            "type": "object",
            "required": ["prompt_tokens", "total_tokens"],
            "properties": {
                "prompt_tokens": {"type": "integer"},
                "total_tokens": {"type": "integer"},
            },
        },
    },
}


def embedding_schemas(ref_template: str) -> dict[str, Any]:
    """The OpenAPI components of ``POST /embeddings``: the request from the
    model it validates with (``input`` as it is accepted), and the answer."""
    request = EmbeddingRequest.model_json_schema(ref_template=ref_template)
    request["properties"]["input"] = _INPUT_SCHEMA
    return {"CreateEmbeddingRequest": request, "CreateEmbeddingResponse": _RESPONSE_SCHEMA}
