"""A response created in a conversation (``conversation`` on ``POST /v1/responses``).

Before translation the conversation's items go before the request's input,
so the backend sees every earlier turn. Once the response has ended, the
request's input items and the response's output items are appended to the
conversation, before the client is told it ended, so that the next turn
sees this one. A failed response adds nothing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from pydantic import TypeAdapter

from responses_api.access.auth import Caller
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.items import InputItem, MessageItem
from responses_api.store import conversations
from responses_api.store.continuation import Keep, stored_input

log = logging.getLogger(__name__)

_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])

# The ``code`` of the 400 a zero-data-retention organisation gets for any
# use of conversations.
NOT_STORED = "conversations_not_stored"


def conversation_not_found(conversation_id: str, param: str | None = None) -> ApiError:
    """The same answer for an id that is unknown, expired, deleted or
    another organisation's."""
    return ApiError(
        404,
        f"Conversation with id '{conversation_id}' not found.",
        code="conversation_not_found",
        param=param,
    )


def not_stored() -> ApiError:
    return invalid(
        "Conversations are not available: this organisation stores nothing (zero data "
        "retention). Send the whole conversation as input items instead.",
        param="conversation",
        code=NOT_STORED,
    )


@dataclass(slots=True)
class Joined:
    """The conversation a request is created in, with its items."""

    conversation_id: str
    items: list[Any]

    def prepend(self, request: CreateResponse) -> CreateResponse:
        current: list[Any]
        if isinstance(request.input, str):
            current = [MessageItem(role="user", content=request.input)]
        else:
            current = list(request.input)
        return request.model_copy(update={"input": [*self.items, *current]})

    def keep(
        self,
        kept: Keep | None,
        *,
        caller: Caller,
        body: bytes,
        references: dict[str, dict[str, Any]],
    ) -> Keep:
        """What saves the response's turn into the conversation, after
        ``kept`` (when the response is stored) has saved the response."""
        return KeepInConversation(
            organisation_id=caller.organisation_id,
            ttl_hours=caller.store_ttl_hours,
            body=body,
            instructions=None,
            previous=None,
            references=references,
            affinity="",
            conversation_id=self.conversation_id,
            inner=kept,
        )


async def join(caller: Caller, request: CreateResponse) -> Joined:
    """Load the conversation named by ``request.conversation``; the 400s and
    404 of a request that cannot be created in it."""
    conversation_id = request.conversation_id() or ""
    if caller.retention_policy != "store":
        raise not_stored()
    if request.previous_response_id is not None:
        raise invalid(
            "Mutually exclusive parameters: send either 'previous_response_id' or "
            "'conversation', not both.",
            param="conversation",
            code="mutually_exclusive_parameters",
        )
    try:
        items = await sync_to_async(_load)(caller, conversation_id)
    except conversations.Missing:
        raise conversation_not_found(conversation_id, param="conversation") from None
    return Joined(conversation_id, items)


def _load(caller: Caller, conversation_id: str) -> list[Any]:
    raw = conversations.history(
        organisation_id=caller.organisation_id,
        ttl_hours=caller.store_ttl_hours,
        conversation_id=conversation_id,
    )
    return _ITEMS.validate_python(raw)


@dataclass(slots=True)
class KeepInConversation(Keep):
    """A :class:`Keep` that adds the turn to the conversation; ``inner`` is
    the one that stores the response itself, if any."""

    conversation_id: str = ""
    inner: Keep | None = None

    async def save(self, response: dict[str, Any]) -> None:
        if self.inner is not None:
            await self.inner.save(response)
        if response.get("status") not in ("completed", "incomplete"):
            return
        try:
            raw = orjson.loads(self.body)["input"]
            items = [*stored_input(raw, self.references), *response.get("output", ())]
            await sync_to_async(conversations.items_add)(
                organisation_id=self.organisation_id,
                ttl_hours=self.ttl_hours,
                conversation_id=self.conversation_id,
                items=items,
            )
        except asyncio.CancelledError:
            raise
        except conversations.Missing:
            # Deleted while the response ran: nothing to add it to.
            log.info("conversation %s is gone; response not added", self.conversation_id)
        except Exception:
            log.exception("response %s could not be added to its conversation", response.get("id"))
