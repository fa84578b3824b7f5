"""What ``POST /v1/embeddings`` refuses, and how it fails: every refusal is
an OpenAI error envelope with a request id, and every authenticated request
leaves exactly one usage row."""

from __future__ import annotations

import pytest

from tests.conftest import free_port, usage_rows

pytestmark = pytest.mark.django_db


def post(gateway, key: str, body, **headers):
    return gateway.http.post(
        "/v1/embeddings", json=body, headers={"authorization": f"Bearer {key}", **headers}
    )


def envelope(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["x-request-id"]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "embed-model"}, "input"),
        ({"input": "hello"}, "model"),
        ({"model": "embed-model", "input": ""}, "input"),
        ({"model": "embed-model", "input": []}, "input"),
        ({"model": "embed-model", "input": ["ok", ""]}, "input"),
        ({"model": "embed-model", "input": ["text", [1, 2]]}, "input"),
        ({"model": "embed-model", "input": [[1, -2]]}, "input"),
        ({"model": "embed-model", "input": [[]]}, "input"),
        ({"model": "embed-model", "input": [1.5, 2]}, "input"),
        ({"model": "embed-model", "input": {"text": "x"}}, "input"),
        ({"model": "embed-model", "input": [True]}, "input"),
        ({"model": "embed-model", "input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"model": "embed-model", "input": "x", "dimensions": 0}, "dimensions"),
        ({"model": "embed-model", "input": "x", "dimensions": "8"}, "dimensions"),
        ({"model": "embed-model", "input": "x", "user": 7}, "user"),
        ({"model": "embed-model", "input": "x", "messages": []}, "messages"),
        ({"model": 12, "input": "x"}, "model"),
    ],
)
def test_a_malformed_request_is_a_400_naming_the_parameter(gateway, embed_tenant, body, param):
    tenant = embed_tenant()
    error = envelope(post(gateway, tenant.key, body), 400)
    assert error["param"] == param and error["type"] == "invalid_request_error"
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.status) == ("/embeddings", 400)


def test_bodies_that_are_not_json_objects_are_400s_with_one_row_each(gateway, embed_tenant):
    tenant = embed_tenant()
    auth = {"authorization": f"Bearer {tenant.key}", "content-type": "application/json"}
    for content in (b"", b"{not json", b"[1, 2]", b'"text"'):
        response = gateway.http.post("/v1/embeddings", content=content, headers=auth)
        assert envelope(response, 400)["code"] == "invalid_json"
    wrong_type = {**auth, "content-type": "text/plain"}
    envelope(gateway.http.post("/v1/embeddings", content=b"{}", headers=wrong_type), 415)
    assert [r.status for r in usage_rows(organisation=tenant.organisation)] == [400] * 4 + [415]


def test_too_many_inputs_or_characters_are_refused(gateway, embed_tenant, settings):
    settings.SWITCHYARD_EMBEDDINGS_MAX_INPUTS = 3
    settings.SWITCHYARD_EMBEDDINGS_MAX_CHARACTERS = 20
    tenant = embed_tenant()
    many = envelope(post(gateway, tenant.key, {"model": "embed-model", "input": ["a"] * 4}), 400)
    assert many["param"] == "input" and many["code"] == "too_many_inputs"
    long = envelope(post(gateway, tenant.key, {"model": "embed-model", "input": "x" * 21}), 400)
    assert long["param"] == "input" and long["code"] == "input_too_long"
    tokens = envelope(post(gateway, tenant.key, {"model": "embed-model", "input": [1] * 21}), 400)
    assert tokens["code"] == "input_too_long"
    assert post(gateway, tenant.key, {"model": "embed-model", "input": "x" * 20}).is_success
    assert len(usage_rows(organisation=tenant.organisation)) == 4


def test_an_unknown_model_is_a_404_naming_it(gateway, embed_tenant):
    tenant = embed_tenant()
    error = envelope(post(gateway, tenant.key, {"model": "nope", "input": "x"}), 404)
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "'nope'" in error["message"]
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.status, row.model) == (404, "nope")


def test_a_generation_model_is_refused_with_a_400(gateway, embed_tenant):
    tenant = embed_tenant()
    error = envelope(post(gateway, tenant.key, {"model": "sim-model", "input": "x"}), 400)
    assert error["code"] == "model_not_supported" and error["param"] == "model"
    assert "does not support embeddings" in error["message"]
    assert [r.status for r in usage_rows(organisation=tenant.organisation)] == [400]


def test_an_embedding_model_is_refused_by_responses(gateway, embed_tenant):
    tenant = embed_tenant()
    response = gateway.http.post(
        "/v1/responses",
        json={"model": "embed-model", "input": "hello"},
        headers={"authorization": f"Bearer {tenant.key}"},
    )
    error = envelope(response, 400)
    assert error["code"] == "model_not_supported" and error["param"] == "model"
    assert "embedding model" in error["message"] and "/v1/embeddings" in error["message"]
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.status) == ("/responses", 400)


def test_another_organisations_model_is_indistinguishable_from_a_missing_one(
    gateway, embed_tenant, people
):
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    acme = embed_tenant("acme")
    globex = embed_tenant("globex")
    backend, _ = backend_ensure(
        organisation=people["globex"], name="sim", base_url="http://127.0.0.1:9/v1"
    )
    model_ensure(
        organisation=people["globex"], public_id="globex-embed", backend=backend, kind="embed"
    )
    theirs = envelope(post(gateway, acme.key, {"model": "globex-embed", "input": "x"}), 404)
    missing = envelope(post(gateway, acme.key, {"model": "missing-embed", "input": "x"}), 404)
    assert theirs["message"].replace("globex-embed", "?") == missing["message"].replace(
        "missing-embed", "?"
    )
    assert theirs["code"] == missing["code"] == "model_not_found"
    assert len(usage_rows(organisation=acme.organisation)) == 2
    assert usage_rows(organisation=globex.organisation) == []


def test_a_key_limited_to_other_models_gets_a_403(gateway, embed_tenant):
    tenant = embed_tenant(allowed_models=["sim-model"])
    error = envelope(post(gateway, tenant.key, {"model": "embed-model", "input": "x"}), 403)
    assert error["code"] == "model_not_allowed"


def test_a_bad_key_is_a_401_with_no_row(gateway, embed_tenant):
    tenant = embed_tenant()
    error = envelope(post(gateway, "sy_sk_wrong", {"model": "embed-model", "input": "x"}), 401)
    assert error["code"] == "invalid_api_key"
    assert usage_rows(organisation=tenant.organisation) == []


def test_a_backend_that_is_down_is_a_clean_5xx_with_one_row(gateway, embed_tenant):
    tenant = embed_tenant(url=f"http://127.0.0.1:{free_port()}/v1")
    response = post(gateway, tenant.key, {"model": "embed-model", "input": "x"})
    error = envelope(response, 503)
    assert error["code"] == "backend_unreachable"
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.status, row.error_code, row.endpoint) == (503, "backend_unreachable", "/embeddings")


@pytest.mark.parametrize("status", [500, 503])
def test_a_backend_error_is_a_502_with_one_row(gateway, embed_tenant, status):
    tenant = embed_tenant()
    body = {"model": "embed-model", "input": [f"boom [[status:{status}]]"]}
    error = envelope(post(gateway, tenant.key, body), 502)
    assert "sim" in error["message"]
    assert [r.status for r in usage_rows(organisation=tenant.organisation)] == [502]


def test_a_backend_refusal_is_a_400(gateway, embed_tenant):
    tenant = embed_tenant()
    body = {"model": "embed-model", "input": "refused [[status:400]]"}
    assert envelope(post(gateway, tenant.key, body), 400)["code"] == "invalid_prompt"


@pytest.mark.parametrize("kind", ["count", "index", "ragged", "nan", "json", "shape"])
def test_a_malformed_backend_answer_is_a_502_never_passed_on(gateway, embed_tenant, kind):
    tenant = embed_tenant()
    body = {"model": "embed-model", "input": ["one", f"two [[embed-bad:{kind}]]"]}
    error = envelope(post(gateway, tenant.key, body), 502)
    assert error["code"] == "bad_gateway" and "'sim'" in error["message"]
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.status, row.error_code) == (502, "bad_gateway")


def test_an_answer_past_the_size_cap_is_a_502(gateway, embed_tenant, settings):
    settings.SWITCHYARD_EMBEDDINGS_MAX_ANSWER_BYTES = 200
    tenant = embed_tenant()
    error = envelope(post(gateway, tenant.key, {"model": "embed-model", "input": "x"}), 502)
    assert "longer than 200 bytes" in error["message"]


def test_the_rate_limit_is_honoured(gateway, embed_tenant):
    tenant = embed_tenant(rpm=2)
    body = {"model": "embed-model", "input": "x", "encoding_format": "float"}
    first = post(gateway, tenant.key, body)
    assert first.is_success and first.headers["x-ratelimit-limit-requests"] == "2"
    assert post(gateway, tenant.key, body).is_success
    refused = post(gateway, tenant.key, body)
    assert envelope(refused, 429)["code"] == "rate_limit_exceeded"
    assert refused.headers["retry-after"]
    assert [r.status for r in usage_rows(organisation=tenant.organisation)] == [200, 200, 429]


def test_a_request_pinned_to_a_backend_stays_there(gateway, embed_tenant, local_simulator):
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    tenant = embed_tenant(url=f"http://127.0.0.1:{free_port()}/v1")
    live, _ = backend_ensure(
        organisation=tenant.organisation, name="live", base_url=local_simulator.url
    )
    model_ensure(
        organisation=tenant.organisation, public_id="embed-model", backend=live, upstream_name="e"
    )
    body = {"model": "embed-model", "input": "x", "encoding_format": "float"}
    down = post(gateway, tenant.key, body, **{"x-backend-id": str(tenant.backend.id)})
    assert envelope(down, 503)["code"] == "backend_unreachable"
    up = post(gateway, tenant.key, body, **{"x-backend-id": str(live.id)})
    assert up.status_code == 200 and up.headers["x-backend-name"] == "live"
    rows = usage_rows(organisation=tenant.organisation)
    assert [(r.backend_name, r.status) for r in rows] == [("sim", 503), ("live", 200)]
