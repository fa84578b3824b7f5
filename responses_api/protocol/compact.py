"""The request bodies of ``POST /v1/responses/compact`` and
``POST /v1/responses/input_tokens`` (docs/api/compaction.md), validated once
at the edge like ``CreateResponse``. Each becomes a ``POST /v1/responses``
body (``api.compaction``); the fields a summary or a count has no use
for are accepted as the OpenAI SDK and Codex send them, and dropped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from responses_api.protocol.body import Reasoning, TextConfig
from responses_api.protocol.items import Input


class CompactRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: StrictStr = Field(min_length=1, max_length=200)
    input: Input | None = None
    instructions: StrictStr | None = None
    previous_response_id: StrictStr | None = None
    reasoning: Reasoning | None = None
    prompt_cache_key: StrictStr | None = None
    # Accepted without effect: the summary is written without tools.
    tools: list[Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    text: TextConfig | None = None
    service_tier: StrictStr | None = None
    prompt_cache_retention: StrictStr | None = None


class CountRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Optional in OpenAI's API; here the model says which backend counts.
    model: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    input: Input | None = None
    instructions: StrictStr | None = None
    previous_response_id: StrictStr | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: StrictBool | None = None
    reasoning: Reasoning | None = None
    text: TextConfig | None = None
    truncation: Literal["auto", "disabled"] | None = None
    personality: StrictStr | None = None
