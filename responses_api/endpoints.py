"""The API's handlers other than ``POST /v1/responses`` (SPEC §4.1)."""

from __future__ import annotations

from responses_api.call import Call, Reply
from responses_api.catalog import get_catalog
from responses_api.errors import ApiError


async def list_models(call: Call) -> Reply:
    caller = call.exchange.caller
    assert caller is not None
    catalog = await get_catalog(caller.organisation_id)
    data = [
        {
            "id": m.public_id,
            "object": "model",
            "created": m.created_at,
            "owned_by": caller.organisation_slug,
        }
        for m in catalog.models
        if m.routes and (not caller.allowed_models or m.public_id in caller.allowed_models)
    ]
    return Reply({"object": "list", "data": data})


async def stored_response(call: Call) -> Reply:
    caller = call.exchange.caller
    assert caller is not None
    if caller.retention_policy != "store":
        raise ApiError(
            404,
            "Responses are not stored for this organisation (zero data retention), "
            "so there is nothing to retrieve or delete.",
            code="response_not_found",
        )
    raise ApiError(404, "No response with this id was found.", code="response_not_found")


async def not_served(call: Call) -> Reply:
    raise ApiError(
        404, f"{call.exchange.endpoint} is not served by this server.", code="unknown_url"
    )
