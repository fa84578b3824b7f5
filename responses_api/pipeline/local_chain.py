"""``previous_response_id`` kept by the WebSocket itself.

A socket remembers its last response: the whole conversation that response
was given and what it answered. A ``response.create`` naming it gets that
conversation with its own input appended, without the store, so it works in
an organisation that stores nothing (zero data retention) and costs no
lookup anywhere. The chain lives in the socket's memory only and ends with
it; nothing of it is written.

A response that was stored (an organisation that stores, ``store`` not
false) is continued from the store instead, like any other stored id, so
that the stored chain links each response to the one before it.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.items import InputItem, ItemReference, MessageItem

_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])

# The statuses of a response that a later one may continue.
CONTINUABLE = frozenset({"completed", "incomplete"})


class LocalChain:
    """One socket's last response, and the conversation up to its end."""

    __slots__ = ("_asked", "items", "last_id", "stored")

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.items: list[Any] = []
        self.stored = False
        self._asked: Any = None

    def continued(self, request: CreateResponse) -> CreateResponse | None:
        """``request`` with the conversation it continues put before its
        input, when it names this socket's last response; None otherwise
        (the store, or the error for an unknown id, answers)."""
        previous = request.previous_response_id
        if previous is None or previous != self.last_id or self.stored:
            return None
        items = list(self.items)
        if isinstance(request.input, str):
            items.append(MessageItem(role="user", content=request.input))
        else:
            if any(isinstance(item, ItemReference) for item in request.input):
                return None  # references are resolved from the store
            items.extend(request.input)
        return request.model_copy(update={"input": items})

    def asked(self, request: CreateResponse) -> None:
        """The whole conversation this turn sends the backend."""
        self._asked = request.input

    def answered(self, response: dict[str, Any] | None) -> None:
        """The turn ended with ``response`` (the terminal event's): a
        response that completed becomes the one to continue."""
        asked, self._asked = self._asked, None
        if response is None or asked is None or response.get("status") not in CONTINUABLE:
            return
        items = [MessageItem(role="user", content=asked)] if isinstance(asked, str) else list(asked)
        items.extend(_ITEMS.validate_python(response.get("output") or []))
        self.items = items
        self.last_id = response.get("id")
        self.stored = bool(response.get("store"))
