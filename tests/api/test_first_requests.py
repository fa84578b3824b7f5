"""The first requests end to end: the OpenAI SDK → the ASGI application →
the simulator."""

import uuid

import httpx
import pytest
from openai import APIStatusError

from tests.conftest import usage_rows, wait_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url)


@pytest.fixture
def client(gateway, acme):
    return gateway.openai(acme.key)


def test_string_input_gives_a_completed_response(client, acme):
    response = client.responses.create(model="sim-model", input="Say hi")
    assert response.status == "completed"
    assert response.output_text
    assert response.id.startswith("resp_")
    assert response.usage.output_tokens == 16
    rows = wait_rows(organisation=acme.organisation)
    assert rows[0].status == 200 and rows[0].output_tokens == 16 and not rows[0].stream


def test_message_items_with_instructions(client):
    response = client.responses.create(
        model="sim-model",
        instructions="Answer briefly.",
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "[[text:Hello there]]"}]}
        ],
    )
    assert response.output_text == "Hello there"
    assert response.instructions == "Answer briefly."


def test_stream_with_get_final_response(client, acme):
    with client.responses.stream(model="sim-model", input="Say hi [[tokens:5]]") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text
    assert final.usage.output_tokens == 5
    rows = wait_rows(organisation=acme.organisation)
    assert rows[0].stream and rows[0].status == 200 and rows[0].ttft_ms is not None


def test_api_prefix_serves_the_same_api(gateway, acme):
    client = gateway.openai(acme.key, prefix="/api/v1")
    assert client.responses.create(model="sim-model", input="hi").output_text


def test_models_lists_the_organisations_models(client):
    assert [m.id for m in client.models.list()] == ["sim-model"]


def test_backend_headers_and_server_timing(gateway, acme):
    response = gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {acme.key}"},
        json={"model": "sim-model", "input": "hi"},
    )
    assert response.headers["x-backend-id"] == str(acme.backend.id)
    assert response.headers["x-backend-name"] == "sim"
    assert "ttft;dur=" in response.headers["server-timing"]
    body = response.json()
    assert body["switchyard"]["request_id"] == response.headers["x-request-id"]


def _assert_envelope(response: httpx.Response, status: int, code: str | None = None):
    assert response.status_code == status, response.text
    uuid.UUID(response.headers["x-request-id"])
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if code:
        assert error["code"] == code
    return error


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer sy_sk_wrong"},
        {"authorization": "Basic abc"},
        {"x-api-key": "nope"},
    ],
)
def test_bad_keys_get_401_with_envelope_and_leave_no_row(gateway, acme, headers):
    response = gateway.http.post(
        "/v1/responses",
        headers=headers,
        json={"model": "sim-model", "input": "hi"},
    )
    error = _assert_envelope(response, 401, "invalid_api_key")
    assert error["type"] == "authentication_error"
    assert usage_rows() == []


def test_x_api_key_header_is_accepted(gateway, acme):
    response = gateway.http.post(
        "/v1/responses",
        headers={"x-api-key": acme.key},
        json={"model": "sim-model", "input": "hi"},
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "body,content_type,status,code,param",
    [
        (b"{not json", "application/json", 400, "invalid_json", None),
        (b"[]", "application/json", 400, "invalid_json", None),
        (b"model=x", "application/x-www-form-urlencoded", 415, "unsupported_media_type", None),
        (
            b'{"model": "sim-model", "input": "hi", "messages": []}',
            "application/json",
            400,
            "unknown_parameter",
            "messages",
        ),
        (b'{"model": "sim-model"}', "application/json", 400, "missing_required_parameter", "input"),
        (
            b'{"model": "sim-model", "input": "hi", "max_output_tokens": 0}',
            "application/json",
            400,
            "invalid_value",
            "max_output_tokens",
        ),
        (
            b'{"model": "sim-model", "input": "hi", "temperature": 3}',
            "application/json",
            400,
            "invalid_value",
            "temperature",
        ),
        (
            b'{"model": "gpt-5-codex", "input": "hi"}',
            "application/json",
            404,
            "model_not_found",
            "model",
        ),
    ],
)
def test_bad_requests_get_an_envelope_and_one_row(
    gateway, acme, body, content_type, status, code, param
):
    response = gateway.http.post(
        "/v1/responses",
        content=body,
        headers={"authorization": f"Bearer {acme.key}", "content-type": content_type},
    )
    error = _assert_envelope(response, status, code)
    assert error["param"] == param
    rows = wait_rows(organisation=acme.organisation)
    assert len(rows) == 1 and rows[0].status == status
    assert str(rows[0].request_id) == response.headers["x-request-id"]


def test_unknown_model_message_names_it(client):
    with pytest.raises(APIStatusError) as error:
        client.responses.create(model="gpt-5-codex", input="hi")
    assert error.value.status_code == 404
    assert "gpt-5-codex" in error.value.message and "/v1/models" in error.value.message


def test_wrong_method_and_unknown_route(gateway, acme):
    auth = {"authorization": f"Bearer {acme.key}"}
    _assert_envelope(gateway.http.get("/v1/responses", headers=auth), 405)
    _assert_envelope(gateway.http.get("/v1/nothing-here", headers=auth), 404)
    _assert_envelope(gateway.http.get("/v1/responses/compact", headers=auth), 405)


def test_a_key_cannot_use_another_organisations_model(gateway, provision, local_simulator):
    acme = provision("acme", local_simulator.url)
    globex = provision("globex", local_simulator.url, model="globex-only")
    client = gateway.openai(acme.key)
    with pytest.raises(APIStatusError) as error:
        client.responses.create(model="globex-only", input="hi")
    assert error.value.status_code == 404
    rows = wait_rows(organisation=acme.organisation)
    assert rows[0].status == 404
    assert usage_rows(organisation=globex.organisation) == []


def test_a_key_limited_to_other_models_gets_403(gateway, provision, local_simulator):
    acme = provision("acme", local_simulator.url, allowed_models=["other-model"])
    client = gateway.openai(acme.key)
    with pytest.raises(APIStatusError) as error:
        client.responses.create(model="sim-model", input="hi")
    assert error.value.status_code == 403
    assert error.value.body["code"] == "model_not_allowed"


def test_a_key_from_the_provisioning_commands_works(gateway, local_simulator):
    from io import StringIO

    from django.core.management import call_command

    def run(*args):
        out = StringIO()
        call_command(*args, stdout=out)
        return out.getvalue()

    run("create_org", "ops", "--name", "Ops")
    run("add_backend", "--org", "ops", "--name", "gpu1", "--url", local_simulator.url)
    run(
        "add_model",
        "ops-model",
        "--org",
        "ops",
        "--backend",
        "gpu1",
        "--upstream-name",
        "sim-model",
    )
    key = run("create_api_key", "--org", "ops", "--name", "ci").splitlines()[-1]
    client = gateway.openai(key)
    response = client.responses.create(model="ops-model", input="[[text:provisioned]]")
    assert response.output_text == "provisioned"
    row = wait_rows(organisation__slug="ops")[0]
    assert row.backend_name == "gpu1" and row.status == 200
    trace = run("trace", str(row.request_id))
    assert '"slug": "ops"' in trace
