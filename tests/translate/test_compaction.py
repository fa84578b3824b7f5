"""The pure parts of compaction (``translate.compaction``): items opened,
the summarisation request, tokens bound to organisation and model."""

from __future__ import annotations

import pytest

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError
from responses_api.translate import compaction
from responses_api.translate.request import ModelLimits, prepare_chat
from responses_api.translate.sealing import ReasoningSeal

SEAL = ReasoningSeal([b"k" * 32], 7)


def request(*items: dict, **fields) -> CreateResponse:
    return CreateResponse.model_validate({"model": "m", "input": list(items), **fields})


def test_a_summary_opens_only_for_its_organisation_and_model():
    token = SEAL.seal("the summary", compaction.context("m"))
    assert compaction.open_summary(token, SEAL, "m", 0) == "the summary"
    for seal, model in ((ReasoningSeal([b"k" * 32], 8), "m"), (SEAL, "other")):
        with pytest.raises(ApiError) as refused:
            compaction.open_summary(token, seal, model, 3)
        assert refused.value.param == "input[3].encrypted_content"
    # A reasoning token (no context) is no compaction token, and the reverse.
    with pytest.raises(ApiError):
        compaction.open_summary(SEAL.seal("thought"), SEAL, "m", 0)


def test_a_trigger_makes_the_summarisation_request_without_tools():
    asked = request(
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer"},
        {"type": "compaction_trigger"},
        tools=[{"type": "function", "name": "f", "parameters": {}}],
        tool_choice="required",
    )
    compacting = compaction.resolve(asked, seal=SEAL, model_id="m")
    assert compacting.trigger and [m.content for m in compacting.kept] == ["first"]
    summarising = compacting.request
    assert summarising.tools is None and summarising.tool_choice is None
    body = prepare_chat(summarising, limits=ModelLimits()).body
    assert body["messages"][-1] == {"role": "user", "content": compaction.SUMMARY_PROMPT}
    assert "tools" not in body


def test_an_opened_item_is_a_user_message_and_an_unopened_one_is_never_dropped():
    token = SEAL.seal("done so far", compaction.context("m"))
    carried = request(
        {"type": "compaction", "encrypted_content": token}, {"role": "user", "content": "go"}
    )
    opened = compaction.resolve(carried, seal=SEAL, model_id="m").request
    messages = prepare_chat(opened, limits=ModelLimits()).body["messages"]
    assert messages[0] == {"role": "user", "content": compaction.summary_message("done so far")}
    with pytest.raises(ApiError) as refused:
        prepare_chat(carried, limits=ModelLimits())
    assert refused.value.param == "input[0]"


def test_the_estimate_is_a_quarter_of_the_json_bytes():
    messages = [{"role": "user", "content": "x" * 400}]
    assert (
        compaction.estimate_tokens(messages, None)
        == len(b'[{"role":"user","content":"' + b"x" * 400 + b'"}]') // 4
    )
