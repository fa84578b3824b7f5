"""Compaction through the OpenAI SDK (docs/api/compaction.md): ``responses.compact``,
``compaction_trigger`` as the last input item, and the sealed ``compaction``
item given back to the backend as its summary, exactly."""

from __future__ import annotations

import pytest
from openai import BadRequestError, OpenAI

from responses_api.translate.compaction import SUMMARY_PREFIX, SUMMARY_PROMPT
from tests.conftest import wait_rows
from tests.sim import received

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url, dialect="vllm")


@pytest.fixture
def globex(provision, local_simulator):
    return provision("globex", local_simulator.url, dialect="vllm")


def conversation(marker: str) -> list[dict]:
    return [
        {"role": "user", "content": f"Plan the {marker} migration [[tokens:3]]"},
        {"role": "assistant", "content": "Step one is the schema."},
        {"type": "function_call", "call_id": "call_1", "name": "run", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "schema ok"},
        {"role": "user", "content": f"Now the {marker} data, please"},
    ]


def test_compact_answers_the_user_messages_and_one_sealed_compaction_item(
    gateway, acme, local_simulator
):
    client = gateway.openai(acme.key)
    compacted = client.responses.compact(
        model="sim-model", input=conversation("cmp-1"), instructions="Be brief."
    )
    assert compacted.object == "response.compaction"
    kinds = [item.type for item in compacted.output]
    assert kinds == ["message", "message", "compaction"]
    assert [item.role for item in compacted.output[:2]] == ["user", "user"]
    assert compacted.output[1].content[0].text == "Now the cmp-1 data, please"
    token = compacted.output[-1].encrypted_content
    assert token.startswith("sy1.") and "migration" not in token
    assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0
    request = received(local_simulator, "cmp-1")
    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    assert request["messages"][-1] == {"role": "user", "content": SUMMARY_PROMPT}
    assert "tools" not in request
    rows = wait_rows(organisation=acme.organisation)
    assert len(rows) == 1 and rows[0].status == 200 and rows[0].endpoint == "/responses/compact"
    assert rows[0].output_tokens == compacted.usage.output_tokens


def test_the_compaction_item_gives_the_backend_the_summary_exactly(gateway, acme, local_simulator):
    client = gateway.openai(acme.key)
    compacted = client.responses.compact(model="sim-model", input=conversation("cmp-2"))
    # What the simulator wrote as the summary, read from its own stream.
    summary = "The user asked: Plan the cmp-2 migration; Now the cmp-2 data, please."
    summary += " 1 tool call(s) ran; the last returned: schema ok."
    summary += " Next: answer the user's last request."
    follow = client.responses.create(
        model="sim-model",
        input=[
            *[item.model_dump(exclude_none=True) for item in compacted.output],
            {"role": "user", "content": "cmp-3 continue [[tokens:2]]"},
        ],
    )
    assert follow.status == "completed"
    messages = received(local_simulator, "cmp-3")["messages"]
    assert messages[2] == {"role": "user", "content": f"{SUMMARY_PREFIX}\n\n{summary}"}
    assert [m["role"] for m in messages] == ["user", "user", "user", "user"]


def test_a_compaction_trigger_answers_exactly_one_compaction_item_streamed_or_not(
    gateway, acme, local_simulator
):
    client = gateway.openai(acme.key)
    trigger = [*conversation("cmp-4"), {"type": "compaction_trigger"}]
    response = client.responses.create(model="sim-model", input=trigger)
    assert [item.type for item in response.output] == ["compaction"]
    assert response.status == "completed"
    with client.responses.stream(model="sim-model", input=trigger) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["compaction"]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["compaction"]
    assert done[0].encrypted_content == final.output[0].encrypted_content
    assert not [e for e in events if e.type == "response.output_text.delta"]
    # The summary is not streamed; that it is being written is.
    compacting = [e for e in events if e.type == "response.compaction.compacting"]
    assert compacting and compacting[0].item_id == done[0].id
    assert events[-1].type == "response.completed"
    rows = wait_rows(2, organisation=acme.organisation)
    assert all(row.status == 200 and row.output_tokens > 0 for row in rows)


def _compaction(client: OpenAI, marker: str) -> dict:
    out = client.responses.compact(model="sim-model", input=conversation(marker)).output[-1]
    return out.model_dump(exclude_none=True)


def _sent_back(client: OpenAI, item: dict, model: str = "sim-model"):
    return client.responses.create(
        model=model,
        input=[{"role": "user", "content": "hi"}, item, {"role": "user", "content": "go"}],
    )


def altered(token: str) -> str:
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


def test_an_altered_compaction_token_is_a_400_naming_the_item(gateway, acme):
    client = gateway.openai(acme.key)
    item = _compaction(client, "cmp-5")
    item["encrypted_content"] = altered(item["encrypted_content"])
    with pytest.raises(BadRequestError) as refused:
        _sent_back(client, item)
    error = refused.value.body
    assert error["param"] == "input[1].encrypted_content"
    assert error["code"] == "invalid_encrypted_content"
    assert "input[1]" in error["message"]
    assert refused.value.response.headers["x-request-id"]


def test_another_organisations_compaction_token_is_refused(gateway, acme, globex):
    item = _compaction(gateway.openai(acme.key), "cmp-6")
    with pytest.raises(BadRequestError) as refused:
        _sent_back(gateway.openai(globex.key), item)
    assert refused.value.body["param"] == "input[1].encrypted_content"
    assert "another organisation" in refused.value.body["message"]


def test_a_compaction_token_of_another_model_is_refused(gateway, acme, local_simulator):
    from responses_api.catalogue.services.served_models import model_ensure

    model_ensure(
        organisation=acme.organisation,
        public_id="other-model",
        backend=acme.backend,
        upstream_name="sim-model",
    )
    client = gateway.openai(acme.key)
    item = _compaction(client, "cmp-7")
    with pytest.raises(BadRequestError) as refused:
        _sent_back(client, item, model="other-model")
    assert refused.value.body["param"] == "input[1].encrypted_content"
    assert "another model" in refused.value.body["message"]
    assert _sent_back(client, item).status == "completed"


def test_an_openai_compaction_blob_is_a_400_that_says_it_is_openais(gateway, acme):
    client = gateway.openai(acme.key)
    blob = {"type": "compaction", "encrypted_content": "gAAAAABpZ3x" + "Q" * 120}
    with pytest.raises(BadRequestError) as refused:
        _sent_back(client, blob)
    assert refused.value.body["param"] == "input[1].encrypted_content"
    assert "OpenAI" in refused.value.body["message"]


def test_a_compaction_trigger_that_is_not_last_is_a_400_naming_it(gateway, acme):
    client = gateway.openai(acme.key)
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(
            model="sim-model",
            input=[{"type": "compaction_trigger"}, {"role": "user", "content": "hi"}],
        )
    assert refused.value.body["param"] == "input[0]"


def test_compact_refuses_unknown_fields_and_an_empty_conversation(gateway, acme):
    client = gateway.openai(acme.key)
    with pytest.raises(BadRequestError) as refused:
        client.responses.compact(model="sim-model", extra_body={"messages": []}, input="hi")
    assert refused.value.body["param"] == "messages"
    with pytest.raises(BadRequestError) as empty:
        client.responses.compact(model="sim-model")
    assert empty.value.body["param"] == "input"
    rows = wait_rows(2, organisation=acme.organisation)
    assert sorted(row.status for row in rows) == [400, 400]


def test_the_docs_state_the_summarisation_prompt_as_sent():
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "api" / "compaction.md").read_text()
    quoted = " ".join(line[2:] for line in page.splitlines() if line.startswith("> "))
    assert quoted == SUMMARY_PROMPT


DEEP = b"[" * 300 + b"]" * 300
MALFORMED = [
    (b"[]", "application/json", 400),
    (b'"compact me"', "application/json", 400),
    (b"{not json", "application/json", 400),
    (b"", "application/json", 400),
    (b'{"model": "sim-model", "input": "hi"}', "text/plain", 415),
    (b'{"model": 5, "input": "hi"}', "application/json", 400),
    (b'{"model": "sim-model", "input": 5}', "application/json", 400),
    (b'{"model": "sim-model", "input": [{"type": "compaction"}]}', "application/json", 400),
    (b'{"model": "sim-model", "input": [{"type": "compaction_trigger"}]}', "application/json", 400),
    (b'{"model": "nope", "input": "hi"}', "application/json", 404),
    (b'{"model": "sim-model", "input": "hi", "tools": 3}', "application/json", 400),
    # Nested deeper than any request may be (docs/api/responses.md).
    (b'{"model": "sim-model", "input": "hi", "tools": ' + DEEP + b"}", "application/json", 400),
    (
        b'{"model": "sim-model", "input": "hi", "tool_choice": ' + DEEP + b"}",
        "application/json",
        400,
    ),
    (b'{"model": "sim-model", "input": ' + DEEP + b"}", "application/json", 400),
]


@pytest.mark.parametrize("path", ["/v1/responses/compact", "/v1/responses/input_tokens"])
@pytest.mark.parametrize(("body", "content_type", "status"), MALFORMED)
def test_a_malformed_request_is_a_4xx_envelope_with_a_row(
    gateway, acme, path, body, content_type, status
):
    answer = gateway.http.post(
        path,
        content=body,
        headers={"authorization": f"Bearer {acme.key}", "content-type": content_type},
    )
    assert answer.status_code == status, answer.text
    assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert answer.headers["x-request-id"]
    rows = wait_rows(organisation=acme.organisation)
    assert [row.status for row in rows] == [status]


def test_a_compaction_token_opens_while_its_key_is_listed(gateway, acme, settings):
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    client = gateway.openai(acme.key)
    settings.SWITCHYARD_ENCRYPTION_KEY = old
    item = _compaction(client, "cmp-8")
    settings.SWITCHYARD_ENCRYPTION_KEY = f"{new},{old}"
    assert _sent_back(client, item).status == "completed"
    settings.SWITCHYARD_ENCRYPTION_KEY, settings.SWITCHYARD_ENCRYPTION_KEYS_OLD = new, old
    assert _sent_back(client, item).status == "completed"
    settings.SWITCHYARD_ENCRYPTION_KEYS_OLD = ""
    with pytest.raises(BadRequestError) as retired:
        _sent_back(client, item)
    assert retired.value.body["param"] == "input[1].encrypted_content"


def test_codexs_context_compaction_name_for_the_item_is_taken_too(gateway, acme, local_simulator):
    client = gateway.openai(acme.key)
    item = {**_compaction(client, "cmp-9"), "type": "context_compaction"}
    assert _sent_back(client, item).status == "completed"
    sent = received(local_simulator, "cmp-9")["messages"]
    assert sent[1]["content"].startswith(SUMMARY_PREFIX) and "cmp-9" in sent[1]["content"]


def test_compact_takes_the_body_codex_sends(gateway, acme, local_simulator):
    """Codex's remote compaction (v1) body: its tools, reasoning and text
    settings come along and are not used for the summary."""
    body = {
        "model": "sim-model",
        "input": conversation("cmp-10"),
        "instructions": "You are a coding agent.",
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
            {"type": "web_search"},
        ],
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "service_tier": "priority",
        "prompt_cache_key": "session-1",
        "text": {"verbosity": "low"},
    }
    answer = gateway.http.post(
        "/v1/responses/compact", json=body, headers={"authorization": f"Bearer {acme.key}"}
    )
    assert answer.status_code == 200, answer.text
    assert [item["type"] for item in answer.json()["output"]][-1] == "compaction"
    sent = received(local_simulator, "cmp-10")
    assert "tools" not in sent and sent["messages"][-1]["content"] == SUMMARY_PROMPT


def test_a_summary_cut_at_max_output_tokens_still_compacts_and_says_so(
    gateway, acme, local_simulator
):
    client = gateway.openai(acme.key)
    response = client.responses.create(
        model="sim-model",
        input=[*conversation("cmp-11"), {"type": "compaction_trigger"}],
        max_output_tokens=3,
    )
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["compaction"]
    notices = response.model_extra["switchyard"]["notices"]
    assert [n["code"] for n in notices] == ["compaction_summary_truncated"]
    assert received(local_simulator, "cmp-11")["max_tokens"] == 3
