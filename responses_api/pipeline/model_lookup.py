"""The model a request names, as the caller may use it: for
``POST /v1/responses`` (``pipeline.create``), ``/v1/embeddings`` and the
gateway's own embeddings (``pipeline.embedding``). A module of its own so
that the embeddings, which the tool loop's file search runs, need not
import the create handler that runs the tool loop."""

from __future__ import annotations

from responses_api.access.auth import Caller
from responses_api.catalogue.catalog import ModelEntry, get_catalog, wrong_kind
from responses_api.protocol.errors import ApiError


async def model_for(caller: Caller, name: str, *, kind: str = "generate") -> ModelEntry:
    catalog = await get_catalog(caller.organisation_id)
    model = catalog.by_name.get(name)
    if model is None:
        catalog = await get_catalog(caller.organisation_id, missing=name)
        model = catalog.by_name.get(name)
    if model is None:
        raise ApiError(
            404,
            f"The model '{name}' does not exist or you do not have access to it. "
            "Pick one of the models listed by GET /v1/models.",
            code="model_not_found",
            param="model",
        )
    allowed = caller.allowed_models
    if allowed and model.public_id not in allowed and name not in allowed:
        raise ApiError(
            403,
            f"This API key may not use the model '{name}'.",
            code="model_not_allowed",
            param="model",
        )
    if model.kind != kind:
        raise wrong_kind(model, name)
    return model
