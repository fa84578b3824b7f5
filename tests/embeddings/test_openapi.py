"""``POST /embeddings`` in the OpenAPI document, from the model it validates with."""

from __future__ import annotations

from responses_api.edge.openapi import openapi_schema
from responses_api.protocol.embeddings import EmbeddingRequest


def test_the_document_describes_the_embeddings_operation():
    document = openapi_schema()
    operation = document["paths"]["/embeddings"]["post"]
    assert operation["operationId"] == "createEmbedding"
    schemas = document["components"]["schemas"]
    request = schemas["CreateEmbeddingRequest"]
    assert set(request["properties"]) == set(EmbeddingRequest.model_fields)
    assert request["additionalProperties"] is False
    assert len(request["properties"]["input"]["anyOf"]) == 4
    answer = schemas["CreateEmbeddingResponse"]
    assert answer["properties"]["object"] == {"const": "list"}
