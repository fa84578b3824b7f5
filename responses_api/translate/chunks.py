"""What a backend's chat chunk may hold, checked before it is translated.

A backend is untrusted input like a client: one chunk whose ``content`` is
a number, whose ``choices`` is a string or whose usage count is negative
used to raise deep inside the translator, after the response had started.
Every chunk is checked against these types first, so that the translator
only ever sees the shapes it was written for and a bad chunk ends the
request as the backend's fault, with the field named.

Fields the translator does not read (``id``, ``logprobs``, ``timings``…)
are not checked and are dropped from the checked copy. Checking a token
chunk costs about half a microsecond (pydantic-core, on a ``TypedDict``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

__all__ = ["MAX_COUNT", "BadChunk", "Chunk", "check_chunk"]

# A token count past this is no count (the usage log's integer columns
# stop here too); the most a context window holds today is ~10⁷.
MAX_COUNT = 2**31 - 1
# More parallel tool calls than this in one answer is no answer.
MAX_TOOL_INDEX = 1024

Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class FunctionDelta(TypedDict, total=False):
    name: str | None
    arguments: str | None


class ToolCallDelta(TypedDict, total=False):
    index: Annotated[int, Field(ge=0, le=MAX_TOOL_INDEX)] | None
    id: str | None
    function: FunctionDelta | None


class Delta(TypedDict, total=False):
    content: str | None
    reasoning_content: str | None
    reasoning: str | None
    refusal: str | None
    tool_calls: list[ToolCallDelta] | None


class Choice(TypedDict, total=False):
    index: int | None
    delta: Delta | None
    # A backend answering one whole message in its stream (some do).
    message: Delta | None
    finish_reason: str | None


class PromptDetails(TypedDict, total=False):
    cached_tokens: Count | None


class CompletionDetails(TypedDict, total=False):
    reasoning_tokens: Count | None


class ChunkUsage(TypedDict, total=False):
    prompt_tokens: Count | None
    completion_tokens: Count | None
    # llama.cpp and some vLLM versions put cached tokens at the top level.
    cached_tokens: Count | None
    prompt_tokens_details: PromptDetails | None
    completion_tokens_details: CompletionDetails | None
    # Never a count here (the total is the parts' sum): kept, whatever it
    # is, only so that a total disagreeing with its parts can be said.
    total_tokens: Any


class Chunk(TypedDict, total=False):
    model: str | None
    choices: list[Choice] | None
    usage: ChunkUsage | None


_chunk = TypeAdapter(Chunk)


class BadChunk(ValueError):
    """A chunk that is not Chat Completions; the message names the field."""


def check_chunk(data: dict[str, Any]) -> Chunk:
    """``data`` checked against :class:`Chunk`: the copy the translator reads.

    A chunk must carry ``choices`` or ``usage`` (a usage-only chunk ends
    many streams); anything else is no chat chunk."""
    if "choices" not in data and "usage" not in data:
        raise BadChunk("a chunk with neither 'choices' nor 'usage'")
    try:
        return _chunk.validate_python(data)
    except ValidationError as exc:
        raise BadChunk(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    path = ""
    for part in first["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif "[" in part or part in {"str", "int", "list[...]"}:
            continue  # a union branch, not a field
        else:
            path += f".{part}" if path else part
    return f"'{path or 'chunk'}': {first['msg'].lower()}"
