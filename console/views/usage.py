"""The usage log, its CSV export, and the request trace."""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from accounts.access import api_keys_for_member, membership_of
from console.forms.usage import UsageFilterForm, clean_request_id_or_prefix
from console.usage import pieces_async, usage_csv_lines, usage_filter, usage_page
from console.views.base import ConsoleRequest, is_htmx, query_without_page
from responses_api.access.objects import (
    backends_for_member,
    get_usage_row_for_member,
    get_usage_row_for_support,
    models_for_member,
    usage_for_member,
)
from responses_api.models import UsageDaily
from responses_api.usage.trace import usage_row_dict


def _filter_form(request: HttpRequest, membership) -> UsageFilterForm:
    models = set(models_for_member(membership=membership).values_list("public_id", flat=True))
    # Models named in the log that are no longer in the catalogue stay
    # filterable: the daily roll-ups name every model the log holds.
    logged = UsageDaily.objects.filter(organisation_id=membership.organisation_id)
    models.update(m for m in logged.values_list("model", flat=True).distinct() if m)
    return UsageFilterForm(
        request.GET or None,
        models=sorted(models),
        keys=api_keys_for_member(membership=membership),
        backends=backends_for_member(membership=membership),
    )


def _by_request_id(usage, wanted: str):
    """A whole id is one row; the first digits of one (what a log line or a
    colleague's message often carries) are the range of ids that begin with
    them, read from the same unique index."""
    if len(wanted) == 36:
        return usage.filter(request_id=wanted)
    low, high = (uuid.UUID(wanted.ljust(32, pad)) for pad in "0f")
    return usage.filter(request_id__gte=low, request_id__lte=high)


def _is_prefix(raw: str) -> bool:
    try:
        return bool(clean_request_id_or_prefix(raw))
    except ValidationError:
        return False


def _filtered(request: HttpRequest, membership):
    form = _filter_form(request, membership)
    usage = usage_for_member(membership=membership)
    if form.is_bound and form.is_valid():
        data = dict(form.cleaned_data)
        wanted = data.pop("request_id", "")
        usage = usage_filter(usage, data)
        if wanted:
            usage = _by_request_id(usage, wanted)
    elif form.is_bound:
        usage = usage.none()
    return form, usage


def usage_list(request: HttpRequest, membership) -> HttpResponse:
    form, usage = _filtered(request, membership)
    page = usage_page(
        usage.select_related("api_key"),
        before=request.GET.get("before"),
        after=request.GET.get("after"),
    )
    partial = is_htmx(request)
    context = {"form": form, "page": page, "query": query_without_page(request), "partial": partial}
    template = "console/_usage_rows.html" if partial else "console/usage.html"
    return render(request, template, context)


def usage_export(request: HttpRequest, membership) -> StreamingHttpResponse:
    _, usage = _filtered(request, membership)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    lines = usage_csv_lines(usage)
    # Under ASGI (daphne) an async iterator, else Django reads it whole first.
    content = pieces_async(lines) if isinstance(request, ASGIRequest) else lines
    response = StreamingHttpResponse(content, content_type="text/csv")
    response["Content-Disposition"] = (
        f'attachment; filename="usage-{membership.organisation.slug}-{stamp}.csv"'
    )
    return response


def trace_search(request: ConsoleRequest) -> HttpResponse:
    """The search box on every page: an X-Request-Id → its trace."""
    raw = (request.GET.get("q") or "").strip()
    console = request.console
    try:
        request_id = uuid.UUID(raw)
    except ValueError:
        if console.membership is not None and _is_prefix(raw):
            # The start of an id may match several requests: the log lists them.
            return redirect(f"{reverse('console:usage')}?{urlencode({'request_id': raw})}")
        return render(
            request,
            "console/trace_missing.html",
            {"q": raw[:80], "malformed": True},
            status=404,
        )
    membership = console.membership
    if (
        membership is not None
        and usage_for_member(membership=membership).filter(request_id=request_id).exists()
    ):
        return redirect("console:trace", request_id=request_id)
    if console.support:
        try:
            get_usage_row_for_support(user=request.user, request_id=request_id)
        except Http404:
            pass
        else:
            return redirect("console:support_trace", request_id=request_id)
    # Support staff searched every organisation: no row exists at all, which
    # is what a request refused before authentication leaves.
    context = {"q": str(request_id), "nowhere": console.support}
    return render(request, "console/trace_missing.html", context, status=404)


def _timing(row) -> dict:
    """Segments of the request's life for the timing bar, in ms."""
    total = row.duration_ms or 0.0
    queue = min(row.queue_wait_ms or 0.0, total)
    segments = [("queue", "Queue wait", queue)]
    if row.ttft_ms is not None:
        first = max(min(row.ttft_ms, total) - queue, 0.0)
        segments += [
            ("prefill", "Until first token", first),
            ("generation", "Generation", max(total - queue - first, 0.0)),
        ]
    else:
        segments.append(("waiting", "No token produced", max(total - queue, 0.0)))
    drawn: list[dict] = []
    start = 0.0
    for css, label, ms in segments:
        pct = (100 * ms / total) if total else 0
        drawn.append({"css": css, "label": label, "ms": ms, "pct": pct, "x": start})
        start += pct
    return {"total": total, "segments": drawn}


# What a request to one of the API's endpoints was, for people reading its
# trace: a poll, a cancel or a compaction is not an ordinary response.
_RESPONSE_PATH = re.compile(r"^/responses/(?P<id>resp_[\w-]+)(?P<rest>/[\w]+)?/?$")
_OF_A_RESPONSE = {
    ("GET", None): "Poll of a response",
    ("DELETE", None): "Deletion of a stored response",
    ("POST", "/cancel"): "Cancel of a background response",
    ("GET", "/input_items"): "Input items of a response",
}
_KINDS = {
    ("POST", "/responses"): "Response",
    ("POST", "/responses/compact"): "Compaction",
    ("POST", "/responses/input_tokens"): "Token count",
    ("GET", "/models"): "Model list",
    ("POST", "/conversations"): "Conversation create",
}
# A generation shorter than this is no generation: the whole answer came in
# one piece (a compaction, a non-streamed reply), and a rate over it would be
# the inverse of the time spent parsing it.
MIN_GENERATION_MS = 1.0


def request_kind(
    method: str, endpoint: str, *, response_id: str = "", background: bool = False
) -> tuple[str, str]:
    """What the request was, and the ``resp_…`` id it was about (or "").
    Rows name the path under the API's prefix; older ones may carry it. A
    create's row names the response it made (``response_id``)."""
    if background:
        return "Background response", response_id
    endpoint = re.sub(r"^/(?:api/)?v1(?=/)", "", endpoint)
    found = _RESPONSE_PATH.match(endpoint)
    if found is not None:
        kind = _OF_A_RESPONSE.get((method, found["rest"]), f"{method} of a response")
        return kind, found["id"]
    if endpoint.startswith("/conversations") and (method, endpoint) not in _KINDS:
        return f"{method} of a conversation", ""
    kind = _KINDS.get((method, endpoint.rstrip("/")), f"{method} {endpoint}")
    return kind, response_id


def _trace_context(row) -> dict:
    trace = usage_row_dict(row)
    generation = trace["timing"]["generation_ms"]
    if generation is not None and generation < MIN_GENERATION_MS:
        trace["timing"]["tokens_per_second"] = None
    kind, response_id = request_kind(
        row.method, row.endpoint, response_id=row.response_id, background=row.background
    )
    return {
        "row": row,
        "trace": trace,
        "timing": _timing(row),
        "currency": row.organisation.currency,
        "kind": kind,
        "response_id": response_id,
    }


def trace_page(request: HttpRequest, membership, request_id) -> HttpResponse:
    row = get_usage_row_for_member(membership=membership, request_id=request_id)
    return render(request, "console/trace.html", _trace_context(row))


def support_trace_page(request: HttpRequest, request_id) -> HttpResponse:
    row = get_usage_row_for_support(user=request.user, request_id=request_id)
    context = _trace_context(row)
    context["support_view"] = True
    context["member_of_row"] = membership_of(request.user, row.organisation_id) is not None
    return render(request, "console/trace.html", context)
