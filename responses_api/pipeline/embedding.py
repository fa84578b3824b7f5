"""Embedding texts with one of an organisation's embedding models: for
``POST /v1/embeddings`` and for the organisation's own features.

:func:`embed` is one embeddings request's life inside its handler: admitted
under the caller's limits, sent through routing and failover like any
backend request (``failover.upstream`` to the backend's ``/embeddings``),
its answer checked (``backends.embeddings``) and its tokens recorded for the
row. :func:`embed_for_organisation` is the entry point for code that embeds
on its own (vector store ingestion and search): the same life, run by the
same runner as an API request, so each call leaves exactly one usage row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from responses_api.access.auth import Caller
from responses_api.backends.embeddings import (
    EMBEDDINGS_PATH,
    Embedded,
    EmbeddingInput,
    embedding_draft,
    estimate_input_tokens,
    read_embeddings,
)
from responses_api.backends.routing import no_backend
from responses_api.catalogue.catalog import ModelEntry
from responses_api.pipeline import failover, runner
from responses_api.pipeline.admission import admit
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.exchange import Exchange, new_request_id
from responses_api.pipeline.model_lookup import model_for
from responses_api.pipeline.responder import Responder
from responses_api.protocol.errors import ApiError
from responses_api.translate.token_usage import Usage
from responses_api.usage.ratelimit import limits_release

# The usage row's endpoint for embeddings, requested or the organisation's own.
EMBEDDINGS = "/embeddings"


async def embed(
    exchange: Exchange,
    *,
    model: ModelEntry,
    inputs: list[EmbeddingInput],
    dimensions: int | None = None,
    pinned: str | None = None,
) -> Embedded:
    """The vectors of ``inputs`` from one of ``model``'s backends (``pinned``:
    that backend only, as ``X-Backend-Id`` asks). The
    exchange (authenticated, its model resolved) records the admission,
    the backend and the input tokens the row counts; an ``ApiError`` says
    what to answer (429, 502, 503, 504)."""
    if not model.routes:
        raise no_backend(model, "it has no enabled backend")
    draft = embedding_draft(inputs, dimensions)
    estimate = estimate_input_tokens(inputs)
    admission = await admit(exchange=exchange, estimate=estimate, draft=draft)
    try:
        waiting = failover.first_token_deadline(exchange, model.first_token_timeout)
        opened = failover.upstream(
            exchange, draft=draft, model=model, pinned=pinned, path=EMBEDDINGS_PATH
        )
        async with waiting, opened as attempt:
            embedded = await read_embeddings(
                attempt.answer,
                count=len(inputs),
                dimensions=dimensions,
                backend_name=attempt.route.backend.name,
                estimate=estimate,
            )
        exchange.produced(Usage(input_tokens=embedded.prompt_tokens, reported=True), None)
        return embedded
    finally:
        if admission is not None:
            release = limits_release(admission=admission, tokens=exchange.input_tokens or estimate)
            if release is not None:
                await exchange.give_back(release)


class HeldResponder(Responder):
    """Keeps the answer of a request made in-process: nothing is sent."""

    __slots__ = ("status", "refusal")

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(_nowhere, exchange)
        self.status = 0
        self.refusal: ApiError | None = None

    async def json(self, status: int, body: bytes, extra: Sequence[Any] = ()) -> None:
        self.started = self.finished = True
        self.status = status

    async def error(self, error: ApiError) -> None:
        self.refusal = error
        await self.json(error.status, b"")


async def _nowhere(message: Any) -> None:
    raise AssertionError("an in-process request sends nothing")


async def embed_for_organisation(
    caller: Caller,
    *,
    model: str,
    texts: Sequence[str],
    dimensions: int | None = None,
    endpoint: str = EMBEDDINGS,
) -> Embedded:
    """Embed ``texts`` with the organisation's embedding model ``model`` (a
    public id or alias), for a feature of the gateway's own.

    ``caller`` is whoever the work is for: the caller of the API request
    that needs it (a ``file_search``, a vector store search), or, for work
    with no request behind it (indexing files in a worker),
    ``access.auth.organisation_caller(organisation_id)``. The call is one
    request of that caller's: it is refused under the same limits (429),
    counts under them, and leaves exactly one usage row whatever happens,
    with ``endpoint`` (``/embeddings`` unless told) and the tokens the
    backend reports, priced at the model's input price.

    Returns the vectors in the order of ``texts`` and the input tokens.
    Raises the ``ApiError`` an API client would have been answered (an
    unknown model or a generation model, 404/400; no backend, 503; a backend
    that fails or answers badly, 502/504; limits, 429), after its row is
    handed over. A cancellation is a 499 row and goes on."""
    exchange = Exchange(request_id=new_request_id(), endpoint=endpoint)
    exchange.authenticated(caller)
    responder = HeldResponder(exchange)
    embedded: list[Embedded] = []

    async def handler(call: Call) -> Reply:
        exchange.asked(model=model, stream=False, prompt_cache_key=None)
        entry = await model_for(caller, model, kind="embed")
        exchange.served_by(entry)
        embedded.append(
            await embed(exchange, model=entry, inputs=list(texts), dimensions=dimensions)
        )
        return Reply({})

    await runner.run(Call(exchange, responder, {}), handler, begin=None, tracked=False)
    if responder.refusal is not None:
        raise responder.refusal
    return embedded[0]
