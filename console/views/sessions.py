"""A client session (Codex's ``session-id``): its turns in order, with the
tokens, cost and time of each."""

from __future__ import annotations

from decimal import Decimal

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from responses_api.access.objects import SESSION_TURNS, session_turns_for_member


def session_page(request: HttpRequest, membership, session_id: str) -> HttpResponse:
    if "\x00" in session_id:
        # No stored session id holds a NUL (the usage writer replaces it),
        # and PostgreSQL refuses one in a query: not found, as any other.
        raise Http404("Not found.")
    turns = session_turns_for_member(membership=membership, session_id=session_id)
    first, last = turns[0], turns[-1]
    totals = {
        "turns": len(turns),
        "input_tokens": sum(t.input_tokens for t in turns),
        "cached_tokens": sum(t.cached_tokens for t in turns),
        "output_tokens": sum(t.output_tokens for t in turns),
        "cost": sum((t.cost for t in turns), Decimal(0)),
        "busy_ms": sum(t.duration_ms or 0.0 for t in turns),
        "threads": len({t.thread_id for t in turns if t.thread_id}),
    }
    end = last.finished_at or last.created_at
    context = {
        "session_id": session_id,
        "turns": turns,
        "totals": totals,
        "first": first,
        "span_ms": (end - first.created_at).total_seconds() * 1000,
        "truncated": len(turns) == SESSION_TURNS,
    }
    return render(request, "console/session.html", context)
