"""The Conversations API (``/v1/conversations``, docs/api/conversations.md), as
OpenAI's: a conversation, its metadata, and its items.

Only organisations that store responses have conversations: for the others
creating one is a 400 and naming one is the 404 of an unknown id, as for
stored responses. Another organisation's id answers exactly as a missing
one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import orjson
from asgiref.sync import sync_to_async
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from responses_api.access.auth import Caller
from responses_api.api.endpoints import page_params
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.parse import MAX_DEPTH, refuse_too_deep
from responses_api.pipeline.responder import JSON
from responses_api.protocol.body import INCLUDE_ACCEPTED, metadata_checked
from responses_api.protocol.errors import ApiError, from_validation_error, invalid, too_deep
from responses_api.protocol.items import InputItem, ItemReference
from responses_api.store import conversations as store
from responses_api.store.continuation import check_item_ids
from responses_api.store.conversation_turns import conversation_not_found, not_stored

# As OpenAI's: at most 20 items per request that adds items.
MAX_ITEMS = 20


class _Items(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("items", check_fields=False)
    @classmethod
    def _no_references(cls, value: list[Any] | None) -> list[Any] | None:
        for item in value or ():
            if isinstance(item, ItemReference):
                raise ValueError("item_reference is not accepted in a conversation's items")
        return value


class NewConversation(_Items):
    items: list[InputItem] | None = Field(default=None, max_length=MAX_ITEMS)
    metadata: dict[StrictStr, StrictStr] | None = None

    _check_metadata = field_validator("metadata")(metadata_checked)


class NewItems(_Items):
    items: list[InputItem] = Field(min_length=1, max_length=MAX_ITEMS)


class MetadataUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[StrictStr, StrictStr] | None

    _check_metadata = field_validator("metadata")(metadata_checked)


def _caller(call: Call) -> Caller:
    caller = call.exchange.caller
    assert caller is not None
    return caller


def _retained(call: Call) -> Caller:
    """The caller, when its organisation stores conversations."""
    caller = _caller(call)
    if caller.retention_policy != "store":
        raise ApiError(
            404,
            "Conversations are not stored for this organisation (zero data retention), "
            "so there is nothing to retrieve, change or delete.",
            code="conversation_not_found",
        )
    return caller


def _body(call: Call, model: type[BaseModel], *, empty_ok: bool = False) -> tuple[Any, Any]:
    """The body as ``model`` validates it, and as the client sent it."""
    content_type = call.headers.get(b"content-type", JSON).split(b";")[0].strip().lower()
    if (
        content_type
        and content_type not in (JSON, b"text/json")
        and not content_type.endswith(b"+json")
    ):
        raise ApiError(415, "Content-Type must be application/json.", code="unsupported_media_type")
    if not call.body.strip() and empty_ok:
        data: Any = {}
    else:
        try:
            data = orjson.loads(call.body)
        except orjson.JSONDecodeError as exc:
            if exc.msg.startswith("depth limit exceeded"):
                raise too_deep(MAX_DEPTH) from None
            raise invalid(
                "The request body is not valid JSON; send a single JSON object.",
                code="invalid_json",
            ) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    refuse_too_deep(data)
    try:
        return model.model_validate(data), data
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    except RecursionError:
        raise invalid("The request body is nested too deeply.", code="invalid_json") from None


def _query(call: Call) -> dict[str, list[str]]:
    query = parse_qs(call.query_string.decode("latin-1"))
    for entry in query.get("include", []) + query.get("include[]", []):
        if entry not in INCLUDE_ACCEPTED:
            raise invalid(f"'{entry}' is not a supported include value.", param="include")
    return query


def _item_not_found(item_id: str, conversation_id: str) -> ApiError:
    return ApiError(
        404,
        f"Item with id '{item_id}' not found in conversation '{conversation_id}'.",
        code="item_not_found",
    )


async def _run(function: Any, **kwargs: Any) -> Any:
    """Call a store function off the event loop, its ``Missing`` as a 404."""
    try:
        return await sync_to_async(function)(**kwargs)
    except store.Missing as missing:
        if missing.what == "item":
            raise _item_not_found(missing.identifier, kwargs["conversation_id"]) from None
        raise conversation_not_found(missing.identifier) from None


def _item_list(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


# --- conversations ------------------------------------------------------------------


async def create_conversation(call: Call) -> Reply:
    caller = _caller(call)
    if caller.retention_policy != "store":
        raise not_stored()
    _, raw = _body(call, NewConversation, empty_ok=True)
    check_item_ids(raw.get("items") or [], "items")
    conversation = await _run(
        store.conversation_create,
        organisation_id=caller.organisation_id,
        ttl_hours=caller.store_ttl_hours,
        metadata=raw.get("metadata"),
        items=raw.get("items") or [],
    )
    return Reply(conversation)


async def retrieve_conversation(call: Call) -> Reply:
    caller = _retained(call)
    return Reply(
        await _run(
            store.conversation_get,
            organisation_id=caller.organisation_id,
            conversation_id=call.params["conversation_id"],
        )
    )


async def update_conversation(call: Call) -> Reply:
    caller = _retained(call)
    _, raw = _body(call, MetadataUpdate)
    return Reply(
        await _run(
            store.conversation_update,
            organisation_id=caller.organisation_id,
            ttl_hours=caller.store_ttl_hours,
            conversation_id=call.params["conversation_id"],
            metadata=raw["metadata"] or {},
        )
    )


async def delete_conversation(call: Call) -> Reply:
    caller = _retained(call)
    conversation_id = call.params["conversation_id"]
    await _run(
        store.conversation_delete,
        organisation_id=caller.organisation_id,
        conversation_id=conversation_id,
    )
    return Reply({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


# --- items ------------------------------------------------------------------------


async def list_items(call: Call) -> Reply:
    """``limit`` (1–100, 20), ``order`` (``desc``, newest first, or ``asc``),
    ``after`` (an item id) and ``include`` (accepted, changes nothing)."""
    caller = _retained(call)
    query = {name: values[-1] for name, values in _query(call).items()}
    limit, order = page_params(query)
    conversation_id = call.params["conversation_id"]
    try:
        page = await _run(
            store.items_list,
            organisation_id=caller.organisation_id,
            conversation_id=conversation_id,
            after=query.get("after"),
            limit=limit,
            order=order,
        )
    except store.UnknownCursor as unknown:
        raise invalid(f"No item with id '{unknown}' in this conversation.", param="after") from None
    return Reply(_item_list(page.items, page.has_more))


async def create_items(call: Call) -> Reply:
    caller = _retained(call)
    _query(call)
    _, raw = _body(call, NewItems)
    check_item_ids(raw["items"], "items")
    items = await _run(
        store.items_add,
        organisation_id=caller.organisation_id,
        ttl_hours=caller.store_ttl_hours,
        conversation_id=call.params["conversation_id"],
        items=raw["items"],
    )
    return Reply(_item_list(items, False))


async def retrieve_item(call: Call) -> Reply:
    caller = _retained(call)
    _query(call)
    return Reply(
        await _run(
            store.item_get,
            organisation_id=caller.organisation_id,
            conversation_id=call.params["conversation_id"],
            item_id=call.params["item_id"],
        )
    )


async def delete_item(call: Call) -> Reply:
    caller = _retained(call)
    return Reply(
        await _run(
            store.item_delete,
            organisation_id=caller.organisation_id,
            ttl_hours=caller.store_ttl_hours,
            conversation_id=call.params["conversation_id"],
            item_id=call.params["item_id"],
        )
    )


# The routes (``routes.ROUTES``): path, then by method the handler, the
# operation id, the summary, what the answer is, its schema and the request's.
CONVERSATION_OPERATIONS: dict[str, dict[str, tuple[Any, ...]]] = {
    "/conversations": {
        "POST": (
            create_conversation,
            "createConversation",
            "Create a conversation, with up to 20 items",
            "The conversation.",
            "Conversation",
            "NewConversation",
        )
    },
    "/conversations/{conversation_id}": {
        "GET": (
            retrieve_conversation,
            "getConversation",
            "Retrieve a conversation",
            "The conversation.",
            "Conversation",
        ),
        "POST": (
            update_conversation,
            "updateConversation",
            "Replace a conversation's metadata",
            "The conversation.",
            "Conversation",
            "MetadataUpdate",
        ),
        "DELETE": (
            delete_conversation,
            "deleteConversation",
            "Delete a conversation and its items",
            "Deleted.",
            "ConversationDeleted",
        ),
    },
    "/conversations/{conversation_id}/items": {
        "GET": (
            list_items,
            "listConversationItems",
            "A conversation's items (after, limit, order, include)",
            "The items, in OpenAI's list format.",
            "ConversationItemList",
        ),
        "POST": (
            create_items,
            "createConversationItems",
            "Add up to 20 items to a conversation",
            "The items added, with their ids.",
            "ConversationItemList",
            "NewItems",
        ),
    },
    "/conversations/{conversation_id}/items/{item_id}": {
        "GET": (
            retrieve_item,
            "getConversationItem",
            "Retrieve an item of a conversation",
            "The item.",
            {"type": "object"},
        ),
        "DELETE": (
            delete_item,
            "deleteConversationItem",
            "Delete an item of a conversation",
            "The conversation.",
            "Conversation",
        ),
    },
}
