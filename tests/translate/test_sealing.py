"""Reasoning carried by the client as a sealed token."""

from __future__ import annotations

import pytest

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError
from responses_api.translate.request import build_chat_request
from responses_api.translate.sealing import VERSION, ReasoningSeal, SealBroken

KEY = b"\x01" * 32
ACME = ReasoningSeal([KEY], 1)
GLOBEX = ReasoningSeal([KEY], 2)
THOUGHT = 'Step 1: "quote" \\ back\nslash, caf\u00e9 \U0001f600 \u2014 done.'


def test_a_token_opens_to_the_exact_text_for_its_organisation_only():
    token = ACME.seal(THOUGHT)
    assert token.startswith(VERSION) and THOUGHT not in token
    assert ACME.open(token) == THOUGHT
    assert ReasoningSeal([KEY], "1").open(token) == THOUGHT  # the id, however typed
    with pytest.raises(SealBroken):
        GLOBEX.open(token)
    with pytest.raises(SealBroken):
        ReasoningSeal([b"\x02" * 32], 1).open(token)


def test_the_same_text_seals_differently_each_time():
    assert ACME.seal(THOUGHT) != ACME.seal(THOUGHT)


def flipped(token: str, at: int) -> str:
    char = token[at]
    return token[:at] + ("A" if char != "A" else "B") + token[at + 1 :]


@pytest.mark.parametrize("at", [len(VERSION), len(VERSION) + 5, 30, -2, -1])
def test_any_altered_character_breaks_the_token(at):
    token = ACME.seal(THOUGHT)
    with pytest.raises(SealBroken):
        ACME.open(flipped(token, at))


@pytest.mark.parametrize(
    "token",
    ["", "sy1.", "sy2." + "A" * 60, "gAAAAABnotours", "sy1.!!!!", "sy1.AAAA", "sy1.AAAA=="],
)
def test_what_is_not_a_token_of_this_platform_does_not_open(token):
    with pytest.raises(SealBroken):
        ACME.open(token)


def test_appended_or_trimmed_tokens_do_not_open():
    token = ACME.seal(THOUGHT)
    for changed in (token + "A", token[:-1], token + "=", token + " "):
        with pytest.raises(SealBroken):
            ACME.open(changed)


def test_a_rotated_key_still_opens_tokens_sealed_before():
    old = ReasoningSeal([KEY], 1).seal(THOUGHT)
    rotated = ReasoningSeal([b"\x03" * 32, KEY], 1)
    assert rotated.open(old) == THOUGHT
    assert ReasoningSeal([b"\x03" * 32], 1).open(rotated.seal(THOUGHT)) == THOUGHT


def plan(items, seal=ACME, dialect="vllm", **fields):
    request = CreateResponse.model_validate({"model": "m", "input": items, **fields})
    return build_chat_request(request, upstream_model="up", dialect=dialect, seal=seal)


def conversation(reasoning: dict) -> list[dict]:
    return [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_1", **reasoning},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "more"},
    ]


@pytest.mark.parametrize("dialect,field", [("vllm", "reasoning_content"), ("ollama", "reasoning")])
def test_a_sealed_reasoning_item_alone_gives_the_backend_that_reasoning(dialect, field):
    items = conversation({"summary": [], "encrypted_content": ACME.seal(THOUGHT)})
    assistant = plan(items, dialect=dialect).body["messages"][1]
    assert assistant == {"role": "assistant", "content": "answer", field: THOUGHT}


def test_the_sealed_reasoning_wins_over_plaintext_beside_it():
    items = conversation(
        {
            "summary": [{"type": "summary_text", "text": "edited"}],
            "content": [{"type": "reasoning_text", "text": "edited"}],
            "encrypted_content": ACME.seal(THOUGHT),
        }
    )
    assert plan(items).body["messages"][1]["reasoning_content"] == THOUGHT


@pytest.mark.parametrize(
    "token", [flipped(ACME.seal(THOUGHT), 40), GLOBEX.seal(THOUGHT), "gAAAAAB-not-ours"]
)
def test_a_token_that_does_not_open_is_a_400_naming_the_item(token):
    items = [{"role": "user", "content": "x"}, *conversation({"encrypted_content": token})]
    with pytest.raises(ApiError) as caught:
        plan(items)
    error = caught.value
    assert error.status == 400 and error.param == "input[2].encrypted_content"
    assert error.code == "invalid_encrypted_content" and "input[2]" in error.message


def test_another_organisations_token_and_an_altered_one_get_the_same_message():
    messages = set()
    for token in (flipped(ACME.seal(THOUGHT), 40), GLOBEX.seal(THOUGHT)):
        with pytest.raises(ApiError) as caught:
            plan(conversation({"encrypted_content": token}))
        messages.add(caught.value.message)
    assert len(messages) == 1


def test_without_a_seal_a_token_is_refused_and_plaintext_reasoning_still_goes_back():
    with pytest.raises(ApiError):
        plan(conversation({"encrypted_content": ACME.seal(THOUGHT)}), seal=None)
    plain = conversation(
        {"content": [{"type": "reasoning_text", "text": "t"}], "encrypted_content": None}
    )
    assert plan(plain, seal=None).body["messages"][1]["reasoning_content"] == "t"


def test_the_answer_is_sealed_only_when_the_request_includes_it():
    assert plan("hi").seal is None
    assert plan("hi", include=["reasoning.encrypted_content"]).seal is ACME
    assert plan("hi", include=["message.input_image.image_url"]).seal is None
