"""The generated OpenAPI document, and a schema-based fuzz run of a live
server: no 5xx, and every answer conforms to the document."""

from __future__ import annotations

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

DOCUMENT = SchemaGenerator().get_schema(request=None, public=True)
schema = schemathesis.openapi.from_dict(DOCUMENT)


def test_the_document_is_valid_openapi_3():
    from schemathesis.specs.openapi.definitions import OPENAPI_30_VALIDATOR

    assert DOCUMENT["openapi"].startswith("3.0")
    assert [e.message for e in OPENAPI_30_VALIDATOR.iter_errors(DOCUMENT)] == []


def test_every_operation_documents_the_error_envelope_and_the_admin_key():
    assert DOCUMENT["components"]["securitySchemes"]["adminKey"]["scheme"] == "bearer"
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            assert {"400", "401", "403", "404", "429"} <= set(operation["responses"]), (
                path,
                method,
            )
            assert operation["security"] == [{"adminKey": []}], (path, method)


def test_the_error_envelope_is_the_inference_apis_in_openapi_3_0_terms():
    from responses_api.edge.openapi import openapi_schema

    public = openapi_schema()["components"]["schemas"]["Error"]["properties"]["error"]
    error = DOCUMENT["components"]["schemas"]["Error"]["properties"]["error"]
    assert error["required"] == public["required"]
    assert list(error["properties"]) == list(public["properties"])
    assert error["properties"]["param"] == {"type": "string", "nullable": True}
    assert "examples" not in error["properties"]["type"]


def test_write_only_and_read_only_fields_are_declared():
    components = DOCUMENT["components"]["schemas"]
    assert "upstream_api_key" in components["BackendRequest"]["properties"]
    assert "upstream_api_key" not in components["Backend"]["properties"]
    assert "key" in components["ApiKeyCreated"]["properties"]
    assert "key" not in components["ApiKey"]["properties"]


@pytest.fixture
def fuzz_target(api_server, provision, simulator):
    from accounts.admin_keys import admin_key_create

    acme = provision("acme", simulator.url)
    _, raw = admin_key_create(organisation=acme.organisation, name="fuzz", role="admin")
    return api_server.url + "/api/v1/admin", {"authorization": f"Bearer {raw}"}


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_fuzzing_the_management_api_from_its_schema_finds_no_server_error(case, fuzz_target):
    base_url, headers = fuzz_target
    case.call_and_validate(
        base_url=base_url,
        headers=headers,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
        ],
    )
