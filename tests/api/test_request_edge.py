"""The request edge of ``POST /v1/responses``: nesting depth, integer bounds,
compressed and mis-encoded bodies each get a 2xx or a 4xx envelope, never a
5xx. Against the ASGI application in-process and the simulator."""

from __future__ import annotations

import gzip
import uuid
import zlib
from typing import Any

import httpx
import orjson
import pytest
import zstandard

from responses_api.pipeline.parse import MAX_DEPTH
from tests import inprocess

pytestmark = pytest.mark.django_db

DEPTHS = [100, 254, 256, 300, 1000, 1023, 5000]


@pytest.fixture
def endpoint(provision):
    tenant = provision("acme", inprocess.simulator().url)
    with inprocess.serving() as gateway:
        gateway.http.headers["authorization"] = f"Bearer {tenant.key}"
        yield gateway.http


def post(http: httpx.Client, content: bytes, **headers: str) -> httpx.Response:
    response = http.post(
        "/v1/responses",
        content=content,
        headers={"content-type": "application/json", **headers},
    )
    uuid.UUID(response.headers["x-request-id"])
    return response


def error_of(response: httpx.Response) -> dict[str, Any]:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def nested(levels: int) -> bytes:
    """``{"a":{"a":…1…}}``: ``levels`` objects, written without recursion."""
    return b'{"a":' * levels + b"1" + b"}" * levels


PLACES = {
    "tools[0].parameters": b'{"model":"sim-model","input":"hi","tools":'
    b'[{"type":"function","name":"f","parameters":%s}]}',
    "text.format.schema": b'{"model":"sim-model","input":"hi","text":'
    b'{"format":{"type":"json_schema","name":"s","schema":%s}}}',
    "input[0].extra": b'{"model":"sim-model","input":'
    b'[{"type":"message","role":"user","content":"hi","extra":%s}]}',
    "input[1].arguments": b'{"model":"sim-model","input":[{"role":"user","content":"hi"},'
    b'{"type":"tool_search_call","call_id":"c1","arguments":%s}]}',
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("place", list(PLACES))
def test_nesting_past_the_limit_is_a_400_naming_the_field_never_a_500(endpoint, place):
    for levels in DEPTHS:
        response = post(endpoint, PLACES[place] % nested(levels))
        if levels < MAX_DEPTH:
            assert response.status_code in (200, 400), (levels, response.text)
            continue
        assert response.status_code == 400, (levels, response.text)
        error = error_of(response)
        assert error["type"] == "invalid_request_error"
        assert str(MAX_DEPTH) in error["message"]
        if levels < 1000:  # deeper still, orjson refuses the body before its fields are known
            assert error["param"] == place, levels


@pytest.mark.parametrize("place", list(PLACES))
def test_nesting_within_the_limit_is_served(endpoint, place):
    response = post(endpoint, PLACES[place] % nested(MAX_DEPTH - 10))
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert "deep" not in error_of(response)["message"]


def test_a_body_orjson_refuses_as_too_deep_is_a_400_naming_the_limit(endpoint):
    response = post(endpoint, b"[" * 2000 + b"]" * 2000)
    assert response.status_code == 400
    assert str(MAX_DEPTH) in error_of(response)["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_output_tokens", 2**31),
        ("max_output_tokens", 2**63),
        ("max_tool_calls", 2**31),
        ("reasoning.max_tokens", 2**31),
        ("top_logprobs", 2**31),
        ("top_logprobs", -1),
    ],
)
def test_integers_beyond_int32_are_a_400_naming_the_parameter(endpoint, field, value):
    body: dict[str, Any] = {"model": "sim-model", "input": "hi"}
    if field == "reasoning.max_tokens":
        body["reasoning"] = {"max_tokens": value}
    else:
        body[field] = value
    response = post(endpoint, orjson.dumps(body))
    assert response.status_code == 400, response.text
    assert error_of(response)["param"] == field


def test_the_largest_int32_max_output_tokens_is_served(endpoint):
    body = {"model": "sim-model", "input": "hi", "max_output_tokens": 2**31 - 1}
    assert post(endpoint, orjson.dumps(body)).status_code == 200


BODY = orjson.dumps({"model": "sim-model", "input": "hi"})


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("GZip", gzip.compress),
        ("zstd", zstandard.ZstdCompressor().compress),
        ("identity", bytes),
    ],
)
def test_gzip_zstd_and_identity_bodies_are_served(endpoint, encoding, compress):
    response = post(endpoint, compress(BODY), **{"content-encoding": encoding})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"


@pytest.mark.parametrize("encoding", ["br", "deflate", "compress", "gzip, zstd", "gzip, br"])
def test_other_encodings_are_a_415_naming_them(endpoint, encoding):
    response = post(endpoint, BODY, **{"content-encoding": encoding})
    assert response.status_code == 415
    error = error_of(response)
    assert error["code"] == "unsupported_media_type"
    assert encoding in error["message"]
    assert "gzip" in error["message"] and "zstd" in error["message"]


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", b"not gzip at all"),
        ("gzip", gzip.compress(BODY)[:-6]),
        ("zstd", b"not zstd at all"),
        ("zstd", zstandard.ZstdCompressor().compress(BODY)[:-4]),
    ],
)
def test_corrupt_compressed_bodies_are_a_400_saying_so(endpoint, encoding, data):
    response = post(endpoint, data, **{"content-encoding": encoding})
    assert response.status_code == 400
    assert f"not valid {encoding}" in error_of(response)["message"]


def gzip_bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, wbits=16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    return b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()


def zstd_bomb(size: int) -> bytes:
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    block = bytes(1 << 20)
    return b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("encoding", "bomb"), [("gzip", gzip_bomb), ("zstd", zstd_bomb)])
def test_a_compressed_bomb_is_a_413_on_its_decoded_size(endpoint, encoding, bomb):
    # 256 MiB of zeros, 16 times the decoded cap: about 250 kB (gzip) or
    # 8 kB (zstd) on the wire.
    data = bomb(1 << 28)
    response = post(endpoint, data, **{"content-encoding": encoding})
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"


def test_a_body_that_is_not_utf8_is_a_400_saying_so(endpoint):
    response = post(endpoint, b'{"model":"sim-model","input":"caf\xe9"}')
    assert response.status_code == 400
    assert "not valid UTF-8" in error_of(response)["message"]
    assert "surrogate" not in error_of(response)["message"]


def test_a_gzip_body_that_is_not_utf8_is_a_400_saying_so(endpoint):
    data = gzip.compress(b'{"model":"sim-model","input":"\xff\xfe"}')
    response = post(endpoint, data, **{"content-encoding": "gzip"})
    assert response.status_code == 400
    assert "not valid UTF-8" in error_of(response)["message"]
