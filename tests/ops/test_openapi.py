"""The OpenAPI document, the docs page, and a schema-based fuzz run against a live server."""

from __future__ import annotations

import json

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from responses_api.edge.openapi import openapi_schema
from responses_api.edge.routes import ROUTES
from responses_api.protocol.body import CreateResponse

# Built at import: schemathesis makes a test per operation from it. (Its
# lazy loader, which would defer this to the run, needs pytest < 9.)
schema = schemathesis.openapi.from_dict(openapi_schema())


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("prefix", ["/api/v1", "/v1"])
def test_openapi_json_is_served_without_authentication(api_server, prefix):
    response = httpx.get(api_server.url + prefix + "/openapi.json", timeout=10)
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == {route.path for route in ROUTES if route.described()}
    assert document == json.loads(json.dumps(openapi_schema()))


def test_the_document_is_valid_openapi_3_1():
    # The OpenAPI 3.1 meta-schema, as bundled with the pinned schemathesis.
    from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

    errors = [e.message for e in OPENAPI_31_VALIDATOR.iter_errors(openapi_schema())]
    assert errors == []


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_request_schema_is_the_validating_model(api_server):
    document = httpx.get(api_server.url + "/api/v1/openapi.json", timeout=10).json()
    request = document["components"]["schemas"]["CreateResponse"]
    assert set(request["properties"]) == set(CreateResponse.model_fields)
    assert request["additionalProperties"] is False
    assert request["properties"]["temperature"]["anyOf"][0] == {
        "maximum": 2,
        "minimum": 0,
        "type": "number",
    }


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_docs_page_renders_from_vendored_files(api_server):
    page = httpx.get(api_server.url + "/api/v1/docs", timeout=10)
    assert page.status_code == 200
    assert 'data-schema="/api/v1/openapi.json"' in page.text
    assert "https://" not in page.text and "http://" not in page.text  # nothing from a CDN
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "init.js"):
        start = page.text.index("/static/")
        assert asset in page.text[start:]
    bundle = httpx.get(
        api_server.url + "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js",
        timeout=10,
    )
    assert bundle.status_code == 200 and "SwaggerUIBundle" in bundle.text


@pytest.fixture
def fuzz_target(api_server, provision, simulator):
    acme = provision("acme", simulator.url)
    return api_server.url + "/api/v1", {"authorization": f"Bearer {acme.key}"}


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_fuzzing_the_api_from_its_schema_finds_no_server_error(case, fuzz_target):
    base_url, headers = fuzz_target
    model = case.body.get("model") if isinstance(case.body, dict) else None
    if isinstance(model, str) and 1 <= len(model) <= 200:
        # A valid model name becomes one that exists (still valid), so generated
        # bodies reach the relay and the backend.
        case.body["model"] = "sim-model"
    # Not checked: that every schema-valid body is accepted (input items are
    # typed loosely in the schema and validated per type) and auth-removal
    # probes (the key is always sent here; 401s are tested elsewhere).
    case.call_and_validate(
        base_url=base_url,
        headers=headers,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
            negative_data_rejection,
            unsupported_method,
        ],
    )


def test_the_document_names_the_hosted_tools_item_shapes():
    from responses_api.edge.openapi import openapi_schema

    document = openapi_schema()
    schemas = document["components"]["schemas"]
    search = schemas["WebSearchCall"]
    assert search["properties"]["type"] == {"const": "web_search_call"}
    assert "sources" in search["properties"]["action"]["properties"]
    assert schemas["UrlCitation"]["properties"]["type"] == {"const": "url_citation"}
    files = schemas["FileSearchCall"]
    assert files["properties"]["type"] == {"const": "file_search_call"}
    assert set(files["properties"]["results"]["items"]["properties"]) == {
        "file_id",
        "filename",
        "score",
        "attributes",
        "text",
    }
    assert schemas["FileCitation"]["required"] == ["type", "file_id", "filename", "index"]
    items = schemas["Response"]["properties"]["output"]["items"]["anyOf"]
    refs = {item.get("$ref") for item in items}
    assert "#/components/schemas/FileCitation" not in refs
    for name in (
        "WebSearchCall",
        "FileSearchCall",
        "McpCall",
        "McpListTools",
        "McpApprovalRequest",
    ):
        assert f"#/components/schemas/{name}" in refs


def test_the_document_gives_a_failed_mcp_calls_error_object():
    import jsonschema

    from responses_api.edge.openapi import openapi_schema

    error = openapi_schema()["components"]["schemas"]["McpCall"]["properties"]["error"]
    kinds = {shape["properties"]["type"]["const"] for shape in error["oneOf"][1:]}
    assert kinds == {"mcp_protocol_error", "mcp_tool_execution_error", "http_error"}
    for good in (
        None,
        {"type": "mcp_protocol_error", "code": -32602, "message": "bad"},
        {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "no"}]},
        {"type": "http_error", "code": 503, "message": "down"},
    ):
        jsonschema.validate(good, error)
    for bad in ("a sentence", {"type": "http_error", "code": "503", "message": "down"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, error)
