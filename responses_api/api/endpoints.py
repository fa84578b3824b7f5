"""The API's handlers other than ``POST /v1/responses``: models,
and the stored responses of an organisation that keeps them (docs/api/stored-responses.md)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async

from responses_api.catalogue.catalog import get_catalog
from responses_api.pipeline.call import Call, Reply
from responses_api.protocol.errors import ApiError, invalid
from responses_api.store import responses as store


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


def _retained(call: Call) -> int:
    """The caller's organisation, when it stores responses."""
    caller = call.exchange.caller
    assert caller is not None
    if caller.retention_policy != "store":
        raise ApiError(
            404,
            "Responses are not stored for this organisation (zero data retention), "
            "so there is nothing to retrieve or delete.",
            code="response_not_found",
        )
    return caller.organisation_id


def _not_found(response_id: str) -> ApiError:
    # The same for an id that is unknown, expired, deleted or another
    # organisation's: nothing in the answer tells them apart.
    return ApiError(
        404, f"No response with id '{response_id}' was found.", code="response_not_found"
    )


def page_params(query: Mapping[str, str]) -> tuple[int, str]:
    """A list's ``limit`` (1–100, 20) and ``order`` (``desc``, newest first,
    or ``asc``), as OpenAI's lists take them."""
    limit_text = query.get("limit", "20")
    # ASCII digits, few enough for int(): str.isdigit also takes "²", which
    # int() refuses, and int() refuses a number of thousands of digits.
    digits = limit_text.isascii() and limit_text.isdigit() and len(limit_text) <= 3
    if not digits or not 1 <= int(limit_text) <= 100:
        raise invalid("limit must be an integer from 1 to 100.", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid("order must be 'asc' or 'desc'.", param="order")
    return int(limit_text), order


def _query(call: Call) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(call.query_string.decode("latin-1")).items()}


async def retrieve_response(call: Call) -> Reply:
    organisation_id = _retained(call)
    response_id = call.params["response_id"]
    if _query(call).get("stream", "").lower() in ("true", "1"):
        raise invalid(
            "Stream replay is not served: GET /v1/responses/{id} without stream "
            "returns the stored response as JSON.",
            param="stream",
        )
    stored = await sync_to_async(store.response_get)(
        organisation_id=organisation_id, response_id=response_id
    )
    if stored is None:
        raise _not_found(response_id)
    return Reply(stored.response)


async def delete_response(call: Call) -> Reply:
    organisation_id = _retained(call)
    response_id = call.params["response_id"]
    deleted = await sync_to_async(store.response_delete)(
        organisation_id=organisation_id, response_id=response_id
    )
    if not deleted:
        raise _not_found(response_id)
    return Reply({"id": response_id, "object": "response", "deleted": True})


async def list_input_items(call: Call) -> Reply:
    """OpenAI's list of a response's input items: ``limit`` (1–100, 20),
    ``order`` (``desc``, newest first, or ``asc``) and ``after`` (an id)."""
    organisation_id = _retained(call)
    response_id = call.params["response_id"]
    query = _query(call)
    limit, order = page_params(query)
    stored = await sync_to_async(store.response_get)(
        organisation_id=organisation_id, response_id=response_id
    )
    if stored is None:
        raise _not_found(response_id)
    items = stored.input if order == "asc" else stored.input[::-1]
    after = query.get("after")
    if after:
        index = next((i for i, item in enumerate(items) if item.get("id") == after), None)
        if index is None:
            raise invalid(f"No input item with id '{after}' in this response.", param="after")
        items = items[index + 1 :]
    page = items[:limit]
    return Reply(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > len(page),
        }
    )


async def not_served(call: Call) -> Reply:
    raise ApiError(
        404, f"{call.exchange.endpoint} is not served by this server.", code="unknown_url"
    )
