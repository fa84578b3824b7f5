"""Random bodies and field types, deep nesting, huge numbers, compressed and
mis-encoded bodies never produce a 5xx."""

from __future__ import annotations

import gzip
import uuid

import httpx
import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WORDS = [
    "auto", "none", "required", "function", "custom", "namespace", "tool_search", "client",
    "message", "user", "assistant", "developer", "system", "input_text", "output_text",
    "input_image", "input_file", "function_call", "function_call_output", "custom_tool_call",
    "reasoning", "json_schema", "json_object", "text", "high", "a.txt", "sim-model",
    "data:image/png;base64,AAAA", "[[tokens:2]]", "[[call:f {}]]",
    "web_search", "web_search_call", "tool_search_call", "tool_search_output",
    "custom_tool_call_output", "item_reference",
]  # fmt: skip
KEYS = [
    "type", "role", "content", "text", "name", "call_id", "arguments", "input", "output",
    "tools", "format", "schema", "effort", "max_tokens", "image_url", "file_data", "filename",
    "execution", "namespace", "parameters", "strict", "mode", "verbosity", "id", "summary",
]  # fmt: skip
FIELDS = [
    "model", "input", "instructions", "stream", "max_output_tokens", "temperature", "top_p",
    "tools", "tool_choice", "parallel_tool_calls", "max_tool_calls", "text", "reasoning",
    "include", "store", "metadata", "user", "top_logprobs", "truncation", "background",
    "client_metadata", "stream_options", "prompt_cache_key", "service_tier", "messages",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(WORDS)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=10,
)
bodies = (
    st.fixed_dictionaries(
        {"model": st.sampled_from(["sim-model", "gpt-5-codex"]) | values},
        optional={name: values for name in FIELDS if name != "model"},
    )
    | values
)


@pytest.fixture
def endpoint(api_server, provision, simulator):
    tenant = provision("acme", simulator.url)
    http = httpx.Client(
        base_url=api_server.url, headers={"authorization": f"Bearer {tenant.key}"}, timeout=30
    )
    yield http
    http.close()


def test_random_bodies_get_a_2xx_or_a_4xx_envelope(endpoint):
    @settings(
        max_examples=200,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(body=bodies)
    def check(body):
        response = endpoint.post("/v1/responses", json=body)
        assert response.status_code < 500, (body, response.text)
        uuid.UUID(response.headers["x-request-id"])
        if response.status_code >= 400:
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["message"]

    check()


# Free-form places of a body, each with ``%s`` where a value goes.
PLACES = [
    b'{"model":"sim-model","input":"hi","tools":[{"type":"function","name":"f","parameters":%s}]}',
    b'{"model":"sim-model","input":"hi","text":{"format":{"type":"json_schema","name":"s",'
    b'"schema":%s}}}',
    b'{"model":"sim-model","input":"hi","metadata":%s}',
    b'{"model":"sim-model","input":[{"role":"user","content":"hi","extra":%s}]}',
    b'{"model":"sim-model","input":[{"type":"tool_search_call","call_id":"c","arguments":%s}]}',
    b'{"model":"sim-model","input":"hi","max_output_tokens":%s}',
    b'{"model":"sim-model","input":"hi","reasoning":{"max_tokens":%s}}',
    b'{"model":"sim-model","input":"hi","max_tool_calls":%s}',
    b'{"model":"sim-model","input":"hi","temperature":%s}',
]
HUGE = [b"2147483648", b"9223372036854775808", b"18446744073709551616", b"1e309", b"-0", b"-0.0"]


@st.composite
def edge_values(draw) -> bytes:
    kind = draw(st.sampled_from(["deep", "huge", "json"]))
    if kind == "deep":
        levels = draw(st.integers(1, 1100) | st.sampled_from([127, 128, 129, 254, 256, 1024, 5000]))
        opener, closer = draw(st.sampled_from([(b'{"a":', b"}"), (b"[", b"]")]))
        return opener * levels + b"1" + closer * levels
    if kind == "huge":
        return draw(st.sampled_from(HUGE))
    return orjson.dumps(draw(values))


def _encode(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data)
    if encoding == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return data


raw_bodies = st.tuples(
    st.sampled_from(PLACES),
    edge_values(),
    st.sampled_from(["", "identity", "gzip", "zstd", "br", "gzip, zstd", "bogus"]),
    st.sampled_from([b"", b"\xff", b"\xed\xa0\x80", b"\xc3"]),
)


def test_deep_huge_compressed_and_mis_encoded_bodies_get_a_2xx_or_a_4xx_envelope(endpoint):
    @settings(
        max_examples=120,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(raw=raw_bodies)
    def check(raw):
        place, value, encoding, bad_bytes = raw
        data = place % value
        if bad_bytes:
            data = data.replace(b'"hi"', b'"h' + bad_bytes + b'i"', 1)
        headers = {"content-type": "application/json"}
        if encoding:
            headers["content-encoding"] = encoding
        response = endpoint.post("/v1/responses", content=_encode(data, encoding), headers=headers)
        assert response.status_code < 500, (data[:200], encoding, response.text)
        uuid.UUID(response.headers["x-request-id"])
        if response.status_code >= 400:
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["message"]

    check()
