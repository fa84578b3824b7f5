"""Real llama-server streams replayed through the stream translator.

The fixtures in ``tests/fixtures/llamacpp/`` were captured from llama.cpp's
``llama-server`` (see the README there). Each stream is fed to
:class:`StreamTranslator` exactly as the relay feeds it: SSE bytes through
:class:`ChunkReader`, one chunk at a time, a ``{"error": …}`` chunk ending the
stream with ``response.failed``. Every emitted event and the final response
are validated against the OpenAI SDK's own types.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from responses_api.backends.sse import ChunkReader
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.body import CreateResponse
from responses_api.translate.request import build_chat_request
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "llamacpp"
EVENT = TypeAdapter(ResponseStreamEvent)

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def translator_for(tools: list[dict[str, Any]] | None = None) -> StreamTranslator:
    request = CreateResponse.model_validate(
        {"model": "stories260K", "input": "hi", **({"tools": tools} if tools else {})}
    )
    plan = build_chat_request(request, upstream_model="stories260K", dialect="llamacpp")
    echo = echo_settings(request, store=False, temperature=None, top_p=None, max_output_tokens=16)
    return StreamTranslator(
        response_id="resp_test", model="stories260K", echo=echo, tools=plan.tools
    )


@dataclass
class Replay:
    events: list[dict[str, Any]] = field(default_factory=list)
    done_seen: bool = False

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def final(self) -> dict[str, Any]:
        return self.events[-1]["response"]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


def replay(name: str, tools: list[dict[str, Any]] | None = None) -> Replay:
    """Feed a captured SSE stream through the reader and translator, as the relay does."""
    translator = translator_for(tools)
    writer = EventWriter()
    reader = ChunkReader()
    out = Replay()

    def emit(events: list[dict[str, Any]]) -> None:
        writer.encode(events)  # numbers them, in place
        for event in events:
            EVENT.validate_python(event)
        out.events.extend(events)

    emit(translator.start())
    for payload in load(name)["events"]:
        for chunk in reader.feed(f"data: {payload}\n\n".encode()):
            if "error" in chunk and not chunk.get("choices"):
                error = chunk["error"]
                emit(translator.fail("server_error", error["message"]))
                return out
            emit(translator.feed(chunk))
    out.done_seen = reader.done
    emit(translator.finish())
    return out


def replay_json(name: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A non-streamed chat completion is one chunk whose choice has a ``message``."""
    translator = translator_for(tools)
    translator.feed(load(name)["response"])
    translator.close_items()
    status, reason = translator.status
    body = translator.response(status, incomplete_reason=reason)
    Response.model_validate(body)
    return body


def chat_content(name: str) -> str:
    """The text the server streamed as ``delta.content``."""
    text = []
    for payload in load(name)["events"]:
        if payload == "[DONE]":
            continue
        for choice in json.loads(payload).get("choices") or ():
            text.append(choice["delta"].get("content") or "")
    return "".join(text)


def test_text_stream_becomes_one_message_with_usage():
    out = replay("text_stream.json")
    assert out.done_seen
    assert out.types[:2] == ["response.created", "response.in_progress"]
    assert out.types[-1] == "response.completed"
    deltas = "".join(e["delta"] for e in out.of_type("response.output_text.delta"))
    assert deltas == chat_content("text_stream.json") == '"Here," Annack.'
    assert out.of_type("response.output_text.done")[0]["text"] == deltas
    final = Response.model_validate(out.final)
    assert final.output_text == deltas
    assert final.usage.input_tokens == 56 and final.usage.output_tokens == 14
    assert final.usage.input_tokens_details.cached_tokens == 0
    assert final.usage.total_tokens == 70


def test_sequence_numbers_count_up_from_zero():
    out = replay("text_stream.json")
    assert [e["sequence_number"] for e in out.events] == list(range(len(out.events)))


def test_stream_without_usage_estimates_output_tokens_from_deltas():
    out = replay("text_stream_no_usage.json")
    usage = out.final["usage"]
    deltas = out.of_type("response.output_text.delta")
    assert usage["input_tokens"] == 0 and usage["output_tokens"] == len(deltas) > 0


@pytest.mark.parametrize("name", ["length_stream.json", "reasoning_only_stream.json"])
def test_length_finish_reason_is_an_incomplete_response(name):
    out = replay(name)
    assert out.types[-1] == "response.incomplete"
    assert out.final["status"] == "incomplete"
    assert out.final["incomplete_details"] == {"reason": "max_output_tokens"}


def test_length_nonstream_is_incomplete_with_the_text():
    body = replay_json("length_nonstream.json")
    assert body["status"] == "incomplete"
    assert body["output"][0]["content"][0]["text"] == '"Here," A'
    assert body["usage"]["output_tokens"] == 8


def test_generation_cut_by_the_context_is_incomplete():
    body = replay_json("context_full_nonstream.json")
    assert body["status"] == "incomplete"
    assert body["usage"]["input_tokens"] + body["usage"]["output_tokens"] == 256


@pytest.mark.parametrize("name", ["cached_prompt_stream.json", "cached_prompt_nonstream.json"])
def test_cached_tokens_of_a_repeated_prompt_reach_the_usage(name):
    streamed = "events" in load(name)
    usage = replay(name).final["usage"] if streamed else replay_json(name)["usage"]
    assert usage["input_tokens"] == 341
    assert usage["input_tokens_details"]["cached_tokens"] == 340


def test_text_nonstream_matches_the_stream():
    body = replay_json("text_nonstream.json")
    assert body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["message"]
    assert body["output"][0]["content"][0]["text"] == chat_content("text_stream.json")


def test_json_schema_output_is_the_message_text():
    body = replay_json("json_schema_nonstream.json")
    assert json.loads(body["output"][0]["content"][0]["text"]) == {"name": "It's a spect"}


def test_tool_call_stream_becomes_a_function_call_item():
    out = replay("tool_call_stream.json", tools=[WEATHER_TOOL])
    assert out.types[-1] == "response.completed"
    assert "response.output_text.delta" not in out.types
    added = out.of_type("response.output_item.added")
    assert [e["item"]["type"] for e in added] == ["function_call"]
    assert added[0]["item"]["arguments"] == ""
    done = out.of_type("response.function_call_arguments.done")[0]
    assert done["name"] == "get_weather" and json.loads(done["arguments"]) == {"city": "Paris"}
    (call,) = Response.model_validate(out.final).output
    assert call.type == "function_call" and call.call_id == "2hCOlUmkCnpMicfwoF4vgB0AOmWvUAZN"
    assert call.status == "completed"


def test_tool_call_nonstream_becomes_a_function_call_item():
    body = replay_json("tool_call_nonstream.json", tools=[WEATHER_TOOL])
    (call,) = body["output"]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert body["status"] == "completed"


def test_parallel_tool_calls_become_two_items_in_order():
    out = replay("parallel_tool_calls_stream.json", tools=[WEATHER_TOOL])
    calls = [e["item"] for e in out.of_type("response.output_item.done")]
    assert [json.loads(c["arguments"])["city"] for c in calls] == ["Paris", "London"]
    assert [e["output_index"] for e in out.of_type("response.output_item.done")] == [0, 1]
    assert len({c["call_id"] for c in calls}) == 2


def test_fragmented_arguments_concatenate_to_the_done_arguments():
    out = replay("tool_call_fragmented_stream.json", tools=[WEATHER_TOOL])
    deltas = out.of_type("response.function_call_arguments.delta")
    assert len(deltas) > 10
    joined = "".join(e["delta"] for e in deltas)
    assert joined == out.of_type("response.function_call_arguments.done")[0]["arguments"]
    assert json.loads(joined) == {"city": "Paris"}
    assert out.final["usage"]["output_tokens"] == 72


def test_text_before_a_tool_call_is_closed_before_the_call_opens():
    out = replay("tool_call_with_text_stream.json", tools=[WEATHER_TOOL])
    done = [e["item"] for e in out.of_type("response.output_item.done")]
    assert [item["type"] for item in done] == ["message", "function_call"]
    assert done[0]["content"][0]["text"] == "Let me check.\n"
    message_done = out.types.index("response.output_item.done")
    call_added = [i for i, e in enumerate(out.events) if e["type"] == "response.output_item.added"]
    assert message_done < call_added[1]


def test_reasoning_stream_gives_a_reasoning_item_then_the_message():
    out = replay("reasoning_stream.json")
    done = [e["item"] for e in out.of_type("response.output_item.done")]
    assert [item["type"] for item in done] == ["reasoning", "message"]
    assert done[0]["content"] == [{"type": "reasoning_text", "text": "The user wants a story.\n"}]
    reasoning = "".join(e["delta"] for e in out.of_type("response.reasoning_text.delta"))
    assert reasoning == "The user wants a story.\n"
    assert done[1]["content"][0]["text"] == chat_content("reasoning_stream.json")
    usage = out.final["usage"]
    # llama.cpp reports no reasoning token count: estimated from the deltas,
    # never above the output tokens it reported.
    assert 0 < usage["output_tokens_details"]["reasoning_tokens"] <= usage["output_tokens"]


def test_reasoning_nonstream_gives_a_reasoning_item_then_the_message():
    body = replay_json("reasoning_nonstream.json")
    assert [item["type"] for item in body["output"]] == ["reasoning", "message"]
    assert body["output"][0]["content"][0]["text"] == "The user wants a story.\n"
    assert body["output"][1]["content"][0]["text"] == "Once animanda"


def test_reasoning_only_stream_has_no_message():
    out = replay("reasoning_only_stream.json")
    done = [e["item"] for e in out.of_type("response.output_item.done")]
    assert [item["type"] for item in done] == ["reasoning"]
    usage = out.final["usage"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == usage["output_tokens"] == 6


def test_mid_stream_error_ends_with_response_failed():
    out = replay("error_midstream_stream.json", tools=[WEATHER_TOOL])
    assert not out.done_seen
    assert out.types == ["response.created", "response.in_progress", "response.failed"]
    final = Response.model_validate(out.final)
    assert final.status == "failed"
    assert final.error.code == "server_error"
    assert "peg-native" in final.error.message
