"""Codex's ``x-codex-turn-state``: the rest of a turn on the replica that took
its first request (README, "Routing, limits and usage guarantees").

Codex keeps the first ``x-codex-turn-state`` a response carries during a
turn and sends it back, unchanged, on every later request of that turn
(its retries, tool-call follow-ups), and never into the next turn. So the
token Switchyard issues names the backend that answered: sealed with the
organisation's key (``store.seal.reasoning_seal``, bound to this use), so
that no client can forge one or carry another organisation's across, and
with the model it was issued for and when. A token that opens, for the
same model, within ``TURN_SECONDS``, naming a backend that still serves the
model, puts that backend first; anything else (forged, another
organisation's, stale, a backend disabled, removed or offline) is ignored
and the request is routed as any other: the turn falls back, it never fails.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from responses_api.catalogue.catalog import ModelEntry
from responses_api.store.seal import reasoning_seal
from responses_api.translate.sealing import SealBroken

HEADER = b"x-codex-turn-state"
# A turn is minutes long; a token older than this names nothing.
TURN_SECONDS = 6 * 3600
# Longer than any token this module issues: nothing past it is opened.
MAX_TOKEN = 512
_CONTEXT = "x-codex-turn-state"


def turn_token(organisation_id: int, model: ModelEntry, backend_id: str) -> str:
    """The token naming ``backend_id`` for the model, sealed for the organisation."""
    text = f"{backend_id} {model.id} {int(time.time())}"
    return reasoning_seal(organisation_id).seal(text, _CONTEXT)


def turn_backend(
    headers: Mapping[bytes, bytes], organisation_id: int, model: ModelEntry
) -> tuple[str | None, str]:
    """The backend the request's token names, if it is to be honoured, and
    the token itself (empty when there was none, or it does not open)."""
    raw = headers.get(HEADER)
    if not raw or len(raw) > MAX_TOKEN:
        return None, ""
    token = raw.decode("latin-1").strip()
    try:
        text = reasoning_seal(organisation_id).open(token, _CONTEXT)
    except SealBroken:
        return None, ""
    backend_id, model_id, issued = (text.split(" ") + ["", "", ""])[:3]
    if model_id != model.id or not issued.isdigit() or time.time() - int(issued) > TURN_SECONDS:
        return None, ""
    if not any(r.backend.id == backend_id and r.backend.enabled for r in model.routes):
        return None, ""
    return backend_id, token
