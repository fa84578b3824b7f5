"""A backend's output cannot set the gateway's memory (docs/operations/limits.md).

A hostile backend answers 256 MiB: as a chat stream, as one JSON body, or
as a stream whose first chunk claims one output token. The gateway reads
an answer only up to the request's output cap, then hangs up: a request
ends ``incomplete`` (``max_output_tokens``), or failed when the backend's
own count cannot hold what it sent; a compaction still completes, with a
summary (and so a sealed token) no longer than the cap. The web process's
peak memory stays within 64 MB of what it was before, its ``/healthz``
answers meanwhile and after, and each request leaves one usage row.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest
from openai import OpenAI

from responses_api.translate.output_cap import output_cap
from tests.conftest import usage_rows, wait_for
from tests.hostile import FLOOD_BYTES, HostileBackend
from tests.support import healthz_watch

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# What the web process's peak memory may grow by while it serves a flood.
SLACK_KB = 64 * 1024
# What the backend may have sent before the gateway hung up: the cap, what
# the sockets' buffers took meanwhile, and the reads in flight.
SENT_AT_MOST = 32 * 1024 * 1024
# What this test reads of an answer: a gateway that relays the whole flood
# fails here, before the test process holds it.
READ_AT_MOST = 16 * 1024 * 1024
ASKED = 100
MODEL_LIMIT = 500


@pytest.fixture(scope="module")
def hostile():
    with HostileBackend() as backend:
        yield backend


@pytest.fixture
def acme(provision, hostile):
    from responses_api.models import ServedModel

    tenant = provision("acme", hostile.url, backend_name="hostile")
    # Before any request, so that the server loads the model with its limit.
    ServedModel.objects.filter(pk=tenant.model.pk).update(max_output_tokens=MODEL_LIMIT)
    return tenant


@pytest.fixture
def client(api_server, acme):
    return OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0, timeout=60)


class Peak:
    """The web process's peak resident memory from now on (``VmHWM``, the
    kernel's high-water mark, reset here through ``clear_refs``), against
    its memory now."""

    def __init__(self, pid: int) -> None:
        self.status = Path(f"/proc/{pid}/status")
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        self.before = self._kb("VmRSS")

    def _kb(self, field: str) -> int:
        for line in self.status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field}")

    def grew_kb(self) -> int:
        return self._kb("VmHWM") - self.before


@pytest.fixture
def peak(api_server, client, hostile):
    client.responses.create(model="sim-model", input="warm up")  # everything loaded
    hostile.flooded.clear()
    return Peak(api_server.process.pid)


def _rows_settle(organisation, count: int):
    rows = wait_for(
        lambda: (rows := usage_rows(organisation=organisation)) and len(rows) >= count and rows,
        timeout=30,
    )
    assert len(rows) == count
    return rows


def _bounded(peak: Peak, hostile: HostileBackend, floods: int = 1) -> None:
    assert peak.grew_kb() < SLACK_KB, f"peak RSS grew by {peak.grew_kb()} kB"
    # The backend's handler sees the connection closed in its own time.
    sent = wait_for(lambda: len(hostile.flooded) >= floods and hostile.flooded, timeout=30)
    assert len(sent) == floods
    assert max(sent) < min(SENT_AT_MOST, FLOOD_BYTES)


def _ask(api_server, acme, body: dict, path: str = "/v1/responses") -> tuple[int, object]:
    """POST ``body``: the status and the decoded answer (a stream's events,
    as a list), read up to ``READ_AT_MOST`` bytes, while ``/healthz`` is
    watched: the process serves others while it reads the flood, and after."""
    read = bytearray()
    with (
        # Probed every 10 ms: a flood is cut within a tenth of a second.
        healthz_watch(api_server.url, interval=0.01),
        httpx.stream(
            "POST",
            api_server.url + path,
            headers={"Authorization": f"Bearer {acme.key}"},
            json=body,
            timeout=60,
        ) as answer,
    ):
        for data in answer.iter_raw():
            read += data
            if len(read) > READ_AT_MOST:
                pytest.fail(f"the gateway sent more than {READ_AT_MOST} bytes")
    if not body.get("stream"):
        return answer.status_code, orjson.loads(read)
    events = [
        orjson.loads(line[6:]) for line in bytes(read).split(b"\n") if line.startswith(b"data: ")
    ]
    return answer.status_code, events


def _text(response: dict) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def _notices(response: dict) -> list[str]:
    return [n["code"] for n in response["switchyard"]["notices"]]


@pytest.mark.parametrize("asked", [ASKED, None])
def test_a_flood_to_a_non_streamed_request_is_cut_at_its_output_cap(
    api_server, acme, hostile, peak, asked
):
    """Without max_output_tokens, the model's own limit sets the cap."""
    body = {"model": "sim-model", "input": "hostile:flood"}
    if asked is not None:
        body["max_output_tokens"] = asked
    status, response = _ask(api_server, acme, body)
    assert status == 200
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert 0 < len(_text(response)) <= output_cap(asked or MODEL_LIMIT)
    assert output_cap(ASKED) < output_cap(MODEL_LIMIT)
    _bounded(peak, hostile)
    assert _rows_settle(acme.organisation, 2)[-1].status == 200


def test_a_flood_to_a_streamed_request_is_cut_at_its_output_cap(api_server, acme, hostile, peak):
    body = {"model": "sim-model", "input": "hostile:flood", "max_output_tokens": ASKED}
    status, events = _ask(api_server, acme, {**body, "stream": True})
    assert status == 200
    last = events[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert 0 < len(deltas) <= output_cap(ASKED)
    assert _text(last["response"]) == deltas
    _bounded(peak, hostile)
    assert _rows_settle(acme.organisation, 2)[-1].status == 200


@pytest.mark.parametrize("stream", [False, True])
def test_a_backend_whose_count_cannot_hold_its_flood_fails(api_server, acme, hostile, peak, stream):
    """It said one output token, then sent more than any one token holds."""
    body = {"model": "sim-model", "input": "hostile:flood-lying", "max_output_tokens": ASKED}
    status, answer = _ask(api_server, acme, {**body, "stream": stream})
    if stream:
        last = answer[-1]
        assert last["type"] == "response.failed"
        assert "Backend 'hostile'" in last["response"]["error"]["message"]
    else:
        assert status == 502
        assert answer["error"]["code"] == "backend_error"
    _bounded(peak, hostile)
    row = _rows_settle(acme.organisation, 2)[-1]
    assert row.status == 502 and row.error_code == "backend_error"


@pytest.mark.parametrize("stream", [False, True])
def test_a_flood_as_one_json_body_fails_at_the_line_limit(api_server, acme, hostile, peak, stream):
    """A JSON body is one line to the stream reader: refused past 1 MB."""
    body = {"model": "sim-model", "input": "hostile:flood-json", "max_output_tokens": ASKED}
    status, answer = _ask(api_server, acme, {**body, "stream": stream})
    if stream:
        assert answer[-1]["type"] == "response.failed"
    else:
        assert status == 502
    _bounded(peak, hostile)
    assert _rows_settle(acme.organisation, 2)[-1].status == 502


def _trigger() -> list[dict]:
    return [
        {"role": "user", "content": "hostile:flood"},
        {"role": "assistant", "content": "Working on it."},
        {"type": "compaction_trigger"},
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_a_flooded_compaction_seals_a_summary_cut_at_the_cap(
    api_server, acme, hostile, peak, stream
):
    body = {"model": "sim-model", "input": _trigger(), "max_output_tokens": ASKED}
    status, answer = _ask(api_server, acme, {**body, "stream": stream})
    response = answer[-1]["response"] if stream else answer
    assert status == 200
    assert response["status"] == "completed"
    [item] = response["output"]
    assert item["type"] == "compaction"
    # A sealed summary of at most the cap's characters: base64 of its bytes.
    assert len(item["encrypted_content"]) < output_cap(ASKED) * 4 // 3 + 1024
    assert "compaction_summary_truncated" in _notices(response)
    _bounded(peak, hostile)
    assert _rows_settle(acme.organisation, 2)[-1].status == 200


def test_a_flooded_compact_call_is_bounded_by_the_models_limit(api_server, acme, hostile, peak):
    """``/responses/compact`` takes no max_output_tokens: the model's limit caps it."""
    body = {"model": "sim-model", "input": _trigger()[:2]}
    status, answer = _ask(api_server, acme, body, "/v1/responses/compact")
    assert status == 200, answer
    item = answer["output"][-1]
    assert item["type"] == "compaction"
    assert len(item["encrypted_content"]) < output_cap(MODEL_LIMIT) * 4 // 3 + 1024
    assert "compaction_summary_truncated" in _notices(answer)
    _bounded(peak, hostile)
    assert _rows_settle(acme.organisation, 2)[-1].status == 200


def test_a_flood_compacted_ahead_of_its_answer_is_cut_twice(api_server, acme, hostile, peak):
    """``context_management``: the summary is cut at its cap and sealed, then
    the answer, flooded too, is cut at its own."""
    body = {
        "model": "sim-model",
        "input": [*_trigger()[:2], {"role": "user", "content": "hostile:flood again"}],
        "max_output_tokens": ASKED,
        "context_management": [{"type": "compaction", "compact_threshold": 1}],
    }
    status, response = _ask(api_server, acme, body)
    assert status == 200
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    first, answer = response["output"]
    assert first["type"] == "compaction"
    assert len(first["encrypted_content"]) < output_cap(ASKED) * 4 // 3 + 1024
    assert 0 < len(answer["content"][0]["text"]) <= output_cap(ASKED)
    assert "context_compacted" in _notices(response)
    _bounded(peak, hostile, floods=2)
    assert _rows_settle(acme.organisation, 2)[-1].status == 200
