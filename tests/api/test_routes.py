"""The route table is the API's one list of paths: the consumer dispatches on
it, the OpenAPI document describes it, and the ASGI router and Django's URLs
split the API's prefixes by it. These tests ask the dispatching functions
themselves, so a path served but not described (or described but not
served) fails here."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import resolve as django_resolve

from responses_api import views
from responses_api.api.endpoints import not_served
from responses_api.edge import routes
from responses_api.edge.openapi import openapi_schema

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def concrete(path: str) -> str:
    """The path with a value in each of its parameters."""
    return routes.PARAMETER.sub("resp_x", path)


def dispatched() -> set[tuple[str, str]]:
    """(path, method) of every request the consumer answers with a handler
    that serves it, rather than a 404, a 405 or a refusal."""
    found = set()
    for route in routes.ROUTES:
        for method in METHODS:
            match = routes.resolve("/v1" + concrete(route.path), method)
            if match.handler is not None and match.handler is not not_served:
                found.add((route.path, method))
    return found


def documented() -> set[tuple[str, str]]:
    return {
        (path, method.upper())
        for path, item in openapi_schema()["paths"].items()
        for method in item
        if method != "parameters"
    }


def test_the_document_describes_exactly_the_operations_the_consumer_serves():
    assert documented() == dispatched()


@pytest.mark.parametrize("prefix", routes.PREFIXES)
def test_each_described_operation_reaches_its_handler_with_its_parameters(prefix):
    for route in routes.ROUTES:
        for method, operation in route.described().items():
            match = routes.resolve(prefix + concrete(route.path), method)
            assert match.handler is operation.handler, (route.path, method)
            assert match.error is None
            assert sorted(match.params) == sorted(route.parameters())


def test_every_path_of_openais_responses_api_is_served_and_described():
    refused = [route for route in routes.ROUTES if not route.described()]
    assert refused == []
    paths = openapi_schema()["paths"]
    for path in ("/responses/compact", "/responses/input_tokens"):
        assert routes.resolve("/v1" + path, "POST").handler is not not_served
        assert set(paths[path]) == {"post"}


@pytest.mark.parametrize("prefix", routes.PREFIXES)
def test_the_asgi_router_sends_the_routes_to_the_consumer_and_the_pages_to_django(prefix):
    to_consumer = re.compile(routes.asgi_pattern())
    for route in routes.ROUTES:
        assert to_consumer.match((prefix + concrete(route.path)).lstrip("/")), route.path
    assert to_consumer.match((prefix + "/nowhere").lstrip("/"))
    pages = {routes.SCHEMA_PAGE: views.openapi_json, routes.DOCS_PAGE: views.api_docs}
    assert set(pages) == set(routes.PAGES)
    for page, view in pages.items():
        assert not to_consumer.match((prefix + page.path).lstrip("/"))
        assert django_resolve(prefix + page.path).func is view
    assert django_resolve(prefix + "/docs/").func is views.api_docs


def test_every_reference_in_the_document_names_one_of_its_schemas():
    document = openapi_schema()
    names = set(document["components"]["schemas"])

    def references(node: Any) -> list[str]:
        if isinstance(node, dict):
            own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return own + [ref for value in node.values() for ref in references(value)]
        if isinstance(node, list):
            return [ref for value in node for ref in references(value)]
        return []

    found = references(document)
    assert "#/components/schemas/Error" in found
    assert {ref.removeprefix("#/components/schemas/") for ref in found} <= names


def test_the_document_describes_compaction_and_token_counts():
    document = openapi_schema()
    schemas = document["components"]["schemas"]
    compact = document["paths"]["/responses/compact"]["post"]
    assert compact["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CompactResponse"
    }
    assert schemas["CompactedResponse"]["properties"]["object"] == {"const": "response.compaction"}
    assert schemas["InputTokens"]["properties"]["object"] == {"const": "response.input_tokens"}
    assert {"model", "input", "instructions", "previous_response_id"} <= set(
        schemas["CompactResponse"]["properties"]
    )
    assert "context_management" in schemas["CreateResponse"]["properties"]
    assert schemas["ContextManagement"]["properties"]["type"]["const"] == "compaction"
