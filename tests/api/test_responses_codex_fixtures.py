"""Real captured Codex 0.171 requests replayed through the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import wait_rows

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex"
# Headers Codex sends besides authorization.
HEADER_NAMES = ("session-id", "thread-id", "x-client-request-id", "originator", "user-agent")


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url)


def replay(gateway, key: str, name: str, prompt: str | None = None) -> list[dict]:
    body = json.loads((FIXTURES / f"{name}_request.json").read_text())
    captured = json.loads((FIXTURES / f"{name}_request_headers.json").read_text())["headers"]
    captured = {k.lower(): v for k, v in captured.items()}
    if prompt is not None:
        last_user = [i for i in body["input"] if i.get("role") == "user"][-1]
        last_user["content"] = [{"type": "input_text", "text": prompt}]
    headers = {k: captured[k] for k in HEADER_NAMES if k in captured}
    headers["authorization"] = f"Bearer {key}"
    with gateway.http.stream(
        "POST", "/v1/responses", json=body, headers=headers, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert "data: [DONE]" not in lines
    return [json.loads(line[6:]) for line in lines]


def check_codex_contract(events: list[dict]) -> dict:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    terminal = [e for e in events if e["type"].startswith("response.") and "response" in e]
    assert events[-1]["type"] == "response.completed"
    assert sum(e["type"] == "response.completed" for e in terminal) == 1
    final = events[-1]["response"]
    assert final["id"].startswith("resp_")
    usage = final["usage"]
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        assert isinstance(usage[name], int)
    # Codex builds items only from output_item.done: one per output item.
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done == final["output"]
    return final


def test_turn1_is_accepted_and_answered(gateway, acme):
    final = check_codex_contract(replay(gateway, acme.key, "turn1"))
    assert final["output"][0]["type"] == "message"
    notices = {n["code"] for n in final["switchyard"]["notices"]}
    assert "hosted_tools_dropped" in notices  # web_search


def test_turn1_exec_directive_calls_the_shell_tool(gateway, acme):
    final = check_codex_contract(replay(gateway, acme.key, "turn1", "[[exec:echo hello]]"))
    (call,) = final["output"]
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    assert json.loads(call["arguments"])["cmd"] == "echo hello"


def test_turn1_edit_directive_calls_apply_patch_as_a_custom_tool(gateway, acme):
    events = replay(gateway, acme.key, "turn1", "[[write:hello.txt hello]]")
    final = check_codex_contract(events)
    (call,) = final["output"]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
    assert call["input"] == "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


def test_turn2_after_exec_answers_with_the_command_output(gateway, acme):
    final = check_codex_contract(replay(gateway, acme.key, "turn2_after_exec"))
    text = final["output"][0]["content"][0]["text"]
    assert text.startswith("Tool result:") and "hello" in text


def test_turn2_after_apply_patch_answers(gateway, acme):
    final = check_codex_contract(replay(gateway, acme.key, "apply_patch_turn2"))
    assert "Success. Updated the following files" in final["output"][0]["content"][0]["text"]
    row = wait_rows(organisation=acme.organisation)[0]
    assert row.status == 200 and row.stream
