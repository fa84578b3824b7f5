"""What the vector store handlers share: the JSON body, the domain's errors
as OpenAI's envelopes, and OpenAI's cursor lists (``limit``, ``order``,
``after``, ``before``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import orjson
from asgiref.sync import sync_to_async
from django.db.models import Q

from responses_api.access.auth import Caller
from responses_api.api.endpoints import page_params
from responses_api.pipeline.call import Call
from responses_api.pipeline.parse import MAX_DEPTH, refuse_too_deep
from responses_api.pipeline.responder import JSON
from responses_api.pipeline.vector_ingest import FileMissing
from responses_api.protocol.body import metadata_checked
from responses_api.protocol.errors import ApiError, invalid, too_deep
from responses_api.retrieval.errors import InvalidParameter, NotFound

MAX_NAME = 256


def caller_of(call: Call) -> Caller:
    caller = call.exchange.caller
    assert caller is not None
    return caller


def json_body(call: Call, allowed: set[str]) -> dict[str, Any]:
    """The body, a JSON object of ``allowed`` fields only."""
    content_type = call.headers.get(b"content-type", JSON).split(b";")[0].strip().lower()
    if content_type and content_type not in (JSON, b"text/json"):
        raise ApiError(415, "Content-Type must be application/json.", code="unsupported_media_type")
    try:
        data = orjson.loads(call.body)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit exceeded"):
            raise too_deep(MAX_DEPTH) from None
        raise invalid(
            "The request body is not valid JSON; send a single JSON object.", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    refuse_too_deep(data)
    for name in data:
        if name not in allowed:
            raise invalid(f"Unrecognized request argument supplied: {name[:100]}", param=name)
    return data


def string_field(data: dict[str, Any], name: str, *, limit: int = MAX_NAME) -> str | None:
    value = data.get(name)
    if value is not None and (not isinstance(value, str) or len(value) > limit):
        raise invalid(f"{name} must be a string of at most {limit} characters.", param=name)
    return value


def metadata_field(data: dict[str, Any]) -> dict[str, str] | None:
    value = data.get("metadata")
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise invalid("metadata must be an object of strings.", param="metadata")
    try:
        return metadata_checked(value)
    except ValueError as error:
        raise invalid(str(error), param="metadata") from None


def id_list(data: dict[str, Any], name: str, *, limit: int) -> list[str]:
    value = data.get(name)
    if value is None:
        return []
    if (
        not isinstance(value, list)
        or len(value) > limit
        or not all(isinstance(v, str) and v for v in value)
    ):
        raise invalid(f"{name} must be a list of at most {limit} file ids.", param=name)
    return list(dict.fromkeys(value))


def as_api_error(error: Exception) -> ApiError:
    if isinstance(error, FileMissing):
        return ApiError(404, error.message, param="file_id", code="file_not_found")
    if isinstance(error, NotFound):
        return ApiError(404, error.message)
    assert isinstance(error, InvalidParameter)
    return invalid(error.message, param=error.param)


async def domain(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a domain function off the event loop, its errors as the API's."""
    try:
        return await sync_to_async(function)(*args, **kwargs)
    except (NotFound, InvalidParameter) as error:
        raise as_api_error(error) from None


def query_of(call: Call) -> dict[str, str]:
    try:
        query = parse_qs(call.query_string.decode("latin-1"))
    except ValueError:
        raise invalid("The query string is malformed.") from None
    return {k: v[-1] for k, v in query.items()}


def paged(
    queryset: Any, query: dict[str, str], id_field: str, render: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """OpenAI's list page of ``queryset`` (rows with ``created_at``),
    newest first unless ``order=asc``, from ``after`` or up to ``before``."""
    limit, order = page_params(query)
    ascending = order == "asc"
    fields = ("created_at", "pk") if ascending else ("-created_at", "-pk")
    rows = queryset.order_by(*fields)
    after, before = query.get("after"), query.get("before")
    for name, anchor_id in (("after", after), ("before", before)):
        if not anchor_id:
            continue
        anchor = queryset.filter(**{id_field: anchor_id}).first()
        if anchor is None:
            raise invalid(f"No object with id '{anchor_id[:100]}' to list {name}.", param=name)
        later = (name == "after") == ascending
        if later:
            key = Q(created_at__gt=anchor.created_at) | Q(
                created_at=anchor.created_at, pk__gt=anchor.pk
            )
        else:
            key = Q(created_at__lt=anchor.created_at) | Q(
                created_at=anchor.created_at, pk__lt=anchor.pk
            )
        rows = rows.filter(key)
    if before and not after:
        # The ``limit`` nearest the cursor, in the list's order.
        nearest = list(rows.reverse()[: limit + 1])
        has_more = len(nearest) > limit
        found = list(reversed(nearest[:limit]))
    else:
        found = list(rows[: limit + 1])
        has_more = len(found) > limit
        found = found[:limit]
    data = [render(row) for row in found]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
