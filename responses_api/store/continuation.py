"""Stored state on the request path: what a request continues, and what of
it is kept (docs/api/stored-responses.md).

Before translation, :func:`prepare` gives the backend the whole
conversation: the chain ending at ``previous_response_id`` (each earlier
turn's input items, then its output items), then the new input, with its
``item_reference`` items replaced by the items they name. Only this
request's ``instructions`` apply, as in OpenAI's API. After the answer, the
ending calls :meth:`Keep.save` before the terminal event or the JSON body
goes out, so that the very next request can continue from it.

An organisation that stores nothing, and a request that neither continues
nor refers to anything nor is kept, never reach this module's database
work: the hot path stays as it was.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from pydantic import TypeAdapter

from responses_api.access.auth import Caller
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import invalid
from responses_api.protocol.items import InputItem, ItemReference, MessageItem
from responses_api.runtime.metrics import STORED_WRITES
from responses_api.store import loop as store_loop
from responses_api.store import responses as store
from responses_api.translate.items import new_id

log = logging.getLogger(__name__)

_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])

# The prefix of an id minted for an input item that came without one, as
# OpenAI names its items.
ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
}


def previous_not_found(response_id: str) -> Exception:
    """The same answer for an id that is unknown, expired, deleted or
    another organisation's."""
    return invalid(
        f"Previous response with id '{response_id}' not found.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def item_not_found(item_id: str, index: int) -> Exception:
    return invalid(
        f"Item with id '{item_id}' not found: an item_reference names an input or output "
        "item of a response stored in this organisation.",
        param=f"input[{index}]",
        code="item_not_found",
    )


@functools.cache
def _writer() -> ThreadPoolExecutor:
    """The thread stored responses are written from when the event loop
    cannot write them (``store_loop``): one per process, with its own
    database connection."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="sy-store")


class _Group:
    """Stored responses written from the event loop (``store_loop``), in
    groups: the responses that end while one group is being written go
    together in the next, one transaction for all of them. When nothing is
    being written, SQLite writes a response at once, with no task at all.

    Each group that the loop cannot write (SQLite busy, PostgreSQL
    unreachable) goes to the worker thread in one hop. At concurrency 32,
    one hop and one commit per response made that thread the bottleneck,
    and stored requests ran at a third of the rate of the others."""

    def __init__(self) -> None:
        self.waiting: list[tuple[store.Entry, asyncio.Future[None]]] = []
        self.writing: asyncio.Task[None] | None = None

    async def save(self, entry: store.Entry) -> None:
        idle = self.writing is None or self.writing.done()
        if idle and store_loop.insert_now([entry]):
            _WRITTEN_ON_LOOP.inc()
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self.waiting.append((entry, done))
        if idle or self.writing is None or self.writing.get_loop() is not loop:
            self.writing = loop.create_task(self._write())
        await asyncio.shield(done)

    async def _write(self) -> None:
        while self.waiting:
            group, self.waiting = self.waiting, []
            errors: list[BaseException | None]
            try:
                errors = await _insert([entry for entry, _ in group])
            except BaseException as failure:  # each waiter is told
                errors = [failure] * len(group)
            for (_, done), failed in zip(group, errors, strict=True):
                if done.done():
                    continue
                if failed is None:
                    done.set_result(None)
                else:
                    done.set_exception(failed)


_group = _Group()


_WRITTEN_ON_LOOP = STORED_WRITES.labels("loop")
_WRITTEN_ON_THREAD = STORED_WRITES.labels("thread")


async def _insert(entries: list[store.Entry]) -> list[BaseException | None]:
    loop = asyncio.get_running_loop()
    try:
        if await store_loop.insert(entries):
            _WRITTEN_ON_LOOP.inc(len(entries))
            return [None] * len(entries)
    except Exception as error:
        if len(entries) == 1:
            return [error]
        _WRITTEN_ON_THREAD.inc(len(entries))
        return await loop.run_in_executor(_writer(), _insert_each, entries)
    _WRITTEN_ON_THREAD.inc(len(entries))
    return await loop.run_in_executor(_writer(), _insert_group, entries)


def _insert_group(entries: list[store.Entry]) -> list[BaseException | None]:
    """Write ``entries`` in one transaction; when that fails, each on its
    own, so that one response that cannot be written does not take the
    others."""
    try:
        store.responses_insert(entries)
        return [None] * len(entries)
    except Exception as error:
        if len(entries) == 1:
            return [error]
    return _insert_each(entries)


def _insert_each(entries: list[store.Entry]) -> list[BaseException | None]:
    errors: list[BaseException | None] = []
    for entry in entries:
        try:
            store.responses_insert([entry])
            errors.append(None)
        except Exception as error:
            errors.append(error)
    return errors


@dataclass(slots=True)
class Keep:
    """What is needed to store a response once it has ended."""

    organisation_id: int
    ttl_hours: int
    body: bytes
    instructions: str | None
    previous: store.Stored | None
    references: dict[str, dict[str, Any]]
    affinity: str

    async def save(self, response: dict[str, Any]) -> None:
        """Store ``response`` before the client is told it ended. Shielded:
        a client gone meanwhile does not cut the write off. A failed write
        is logged; the answer still goes out."""
        try:
            await _group.save(self.entry(response))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("response %s could not be stored", response.get("id"))

    def entry(self, response: dict[str, Any]) -> store.Entry:
        # Parsed again here: the items as the client sent them, which the
        # validated models do not keep whole.
        raw = orjson.loads(self.body)["input"]
        return store.response_entry(
            organisation_id=self.organisation_id,
            ttl_hours=self.ttl_hours,
            response=response,
            input_items=stored_input(raw, self.references),
            instructions=self.instructions,
            previous=self.previous,
            affinity=self.affinity,
        )


@dataclass(slots=True)
class Prepared:
    request: CreateResponse  # its input is the whole conversation
    previous: store.Stored | None
    references: dict[str, dict[str, Any]]


async def prepare(caller: Caller, request: CreateResponse) -> Prepared:
    """The request with everything it continues and refers to resolved, in
    an organisation that stores responses. Raises the 400s for what is not
    found."""
    if not isinstance(request.input, str):
        check_item_ids(request.input, "input")
    references = _references(request)
    if request.previous_response_id is None and not references:
        return Prepared(request, None, {})
    chain, found = await sync_to_async(_resolve)(
        caller, request.previous_response_id, [item_id for _, item_id in references]
    )
    if request.previous_response_id is not None and chain is None:
        raise previous_not_found(request.previous_response_id)
    for index, item_id in references:
        if item_id not in found:
            raise item_not_found(item_id, index)
    items: list[Any] = []
    for stored in chain or ():
        items.extend(stored[1])
    if isinstance(request.input, str):
        items.append(MessageItem(role="user", content=request.input))
    else:
        resolved = {item_id: model for item_id, (_, model) in found.items()}
        for item in request.input:
            items.append(resolved[item.id] if isinstance(item, ItemReference) else item)
    previous = chain[-1][0] if chain else None
    return Prepared(
        request.model_copy(update={"input": items}),
        previous,
        {item_id: raw for item_id, (raw, _) in found.items()},
    )


# The longest item id that is kept whole, and so found again by its id.
MAX_ITEM_ID = 128


def check_item_ids(items: Any, param: str) -> None:
    """Refuse, as OpenAI does an over-long string, an item id too long to be
    found again once stored (``item_reference``, the conversation item
    endpoints); a reference only names an item, which is then not found."""
    for index, item in enumerate(items):
        if isinstance(item, dict):
            kind, item_id = item.get("type"), item.get("id")
        else:
            kind, item_id = getattr(item, "type", None), getattr(item, "id", None)
        if kind == "item_reference" or not isinstance(item_id, str):
            continue
        if len(item_id) > MAX_ITEM_ID:
            name = f"{param}[{index}].id"
            raise invalid(
                f"Invalid '{name}': string too long. Expected a string with maximum length "
                f"{MAX_ITEM_ID}, but got a string with length {len(item_id)} instead.",
                param=name,
                code="string_above_max_length",
            )


def _references(request: CreateResponse) -> list[tuple[int, str]]:
    if isinstance(request.input, str):
        return []
    return [
        (index, item.id)
        for index, item in enumerate(request.input)
        if isinstance(item, ItemReference)
    ]


def _resolve(
    caller: Caller, previous_response_id: str | None, item_ids: list[str]
) -> tuple[list[tuple[store.Stored, list[Any]]] | None, dict[str, tuple[dict[str, Any], Any]]]:
    """The lookup and the validation of what it found as input items, in
    the worker thread: none of it on the event loop."""
    found = store.lookup(
        organisation_id=caller.organisation_id,
        ttl_hours=caller.store_ttl_hours,
        previous_response_id=previous_response_id,
        item_ids=item_ids,
    )
    chain = None
    if found.chain is not None:
        chain = [(stored, _ITEMS.validate_python(stored.items())) for stored in found.chain]
    items = {}
    for item_id, raw in found.items.items():
        (model,) = _ITEMS.validate_python([raw])
        items[item_id] = (raw, model)
    return chain, items


def stored_input(raw: Any, references: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's input items as they are stored and listed
    (``GET /v1/responses/{id}/input_items``): each with an id (the client's,
    or one minted), messages with their content as parts, and each
    ``item_reference`` as the item it names."""
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    out: list[dict[str, Any]] = []
    for given in raw:
        kind = given.get("type") or "message"
        if kind == "item_reference":
            out.append(references[given["id"]])
            continue
        item = {**given, "type": kind}
        if kind == "message":
            content = item.get("content")
            if isinstance(content, str):
                if item.get("role") == "assistant":
                    part = {"type": "output_text", "text": content, "annotations": []}
                else:
                    part = {"type": "input_text", "text": content}
                item["content"] = [part]
            if item.get("status") is None:
                item["status"] = "completed"
        if not isinstance(item.get("id"), str) or not item["id"]:
            item["id"] = new_id(ID_PREFIXES.get(kind, "item"))
        out.append(item)
    return out
