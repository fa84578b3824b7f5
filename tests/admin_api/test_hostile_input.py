"""What a hostile client sends the management API: JSON nested past any
object's depth, bodies that are not JSON, paths with NUL and other odd
bytes. Each is a 4xx in the error envelope, never a 500 page."""

from __future__ import annotations

import pytest

from responses_api.models import Backend
from tests.admin_api.conftest import ADMIN, error_of

pytestmark = pytest.mark.django_db


def _post(client, body: bytes):
    return client.generic("POST", f"{ADMIN}/backends", body, content_type="application/json")


@pytest.mark.parametrize("depth", [65, 1_025, 100_000])
def test_json_nested_too_deep_is_a_400(api, depth):
    nested = b"[" * depth + b"]" * depth
    response = _post(api("acme"), b'{"name": "x", "extra_body": {"a": ' + nested + b"}}")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_json" and "levels deep" in error["message"]
    assert not Backend.objects.filter(name="x").exists()


def test_json_within_the_depth_limit_is_read(api):
    nested = b"[" * 40 + b"]" * 40
    body = b'{"name": "deep", "base_url": "http://127.0.0.1:9/v1", "extra_body": {"a": %s}}'
    response = _post(api("acme"), body % nested)
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "body", [b"{not json", b"\xff\xfe{}", b'{"name": "\\ud800"}', b"[1, 2", b"NaN"]
)
def test_a_body_that_is_not_json_is_a_400(api, body):
    response = _post(api("acme"), body)
    assert response.status_code == 400
    assert error_of(response)["code"] in ("invalid_json", "invalid_request_error")


@pytest.mark.parametrize(
    "path",
    [
        "/backends/%00",
        "/backends/%00abc/check",
        "/models/%00",
        "/api-keys/%00",
        "/usage/%00",
        "/backends/" + "a" * 5000,
        "/%00",
    ],
)
def test_odd_paths_are_json_errors(api, path):
    response = api("acme").get(ADMIN + path)
    assert 400 <= response.status_code < 500
    error_of(response)


@pytest.mark.parametrize("resource", ["audit", "usage"])
@pytest.mark.parametrize(
    "query",
    [
        "since=9999-12-31T23:59:59-23:00",
        "until=0001-01-01T00:00:00%2B23:00",
        "since=5858-01-01T00:00:00Z",
        "since=99999999999999999999",
        "actor=%C3%92%16",
    ],
)
def test_moments_at_the_calendar_edges_are_answered(api, resource, query):
    response = api("acme").get(f"{ADMIN}/{resource}?{query}")
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        error_of(response)
