"""The pure parts of scored routing: a prompt's blocks, the prefix index, the
score and its reason, the backends' own signals, and turn-state tokens."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from responses_api.backends import scoring
from responses_api.backends.prefix_index import (
    BLOCK_CHARS,
    LocalPrefixIndex,
    PromptBlocks,
    found_in_redis,
    prompt_blocks,
)
from responses_api.backends.scoring import Observed, Signals, rank, reason
from responses_api.backends.signals import llamacpp_signals, vllm_signals
from responses_api.pipeline import turn_state

SYSTEM = {"role": "system", "content": "You are a coding agent. " * 60}


def body(*turns: str) -> dict:
    return {"messages": [SYSTEM, *({"role": "user", "content": t} for t in turns)]}


def route(backend_id: str, max_concurrency: int = 0, enabled: bool = True):
    backend = SimpleNamespace(id=backend_id, max_concurrency=max_concurrency, enabled=enabled)
    return SimpleNamespace(backend=backend)


# --- the prompt's blocks and the index ---------------------------------------


def test_a_growing_conversation_keeps_its_leading_blocks():
    first = prompt_blocks(1, body("Fix the failing test in parser.py"))
    later = prompt_blocks(1, body("Fix the failing test in parser.py", "Now run it " * 40))
    assert len(first.hashes) >= 5
    assert later.hashes[: len(first.hashes) - 1] == first.hashes[:-1]
    assert len(later.hashes) > len(first.hashes)


def test_only_whole_blocks_count_and_short_prompts_have_none():
    assert prompt_blocks(1, {"messages": [{"role": "user", "content": "hi"}]}).hashes == ()
    blocks = prompt_blocks(1, body("x"))
    assert PromptBlocks.tokens(len(blocks.hashes)) == len(blocks.hashes) * BLOCK_CHARS // 4


def test_the_same_prompt_of_two_organisations_shares_no_block():
    ours, theirs = prompt_blocks(1, body("same")), prompt_blocks(2, body("same"))
    assert ours.hashes and not set(ours.hashes) & set(theirs.hashes)


def test_the_index_finds_the_leading_blocks_a_backend_was_sent():
    index = LocalPrefixIndex()
    sent = prompt_blocks(1, body("question one"))
    index.record(sent, "a")
    grown = prompt_blocks(1, body("question one", "and a follow-up " * 30))
    # All but perhaps the last block, which the follow-up may have changed.
    assert len(sent.hashes) - 1 <= index.found(grown, "a") <= len(sent.hashes)
    assert index.found(grown, "b") == 0
    assert index.found(prompt_blocks(2, body("question one")), "a") == 0


def test_the_index_is_bounded_and_forgets_the_least_recent(settings):
    settings.SWITCHYARD_ROUTING = {**settings.SWITCHYARD_ROUTING, "prefix_blocks": 10}
    index = LocalPrefixIndex()
    old = prompt_blocks(1, {"messages": [{"role": "user", "content": "old " * 1000}]})
    new = prompt_blocks(1, {"messages": [{"role": "user", "content": "new " * 1000}]})
    assert len(new.hashes) > 10
    index.record(old, "a")
    index.record(new, "a")
    assert index.found(old, "a") == 0
    # Ten are kept: the newest prompt's first ten, its tail went first.
    assert index.found(new, "a") == 10
    short = prompt_blocks(1, {"messages": [{"role": "user", "content": "short " * 100}]})
    assert 0 < len(short.hashes) <= 10
    index.record(short, "c")
    assert index.found(short, "c") == len(short.hashes)


def test_blocks_older_than_the_ttl_count_as_gone(settings):
    settings.SWITCHYARD_ROUTING = {**settings.SWITCHYARD_ROUTING, "prefix_ttl_seconds": 60}
    now = time.time()
    assert found_in_redis([str(now), str(now - 10), None, str(now)], now) == 2
    assert found_in_redis([str(now - 61), str(now)], now) == 0
    assert found_in_redis(None, now) == 0


# --- the score ---------------------------------------------------------------


def observed(counts, blocks, holder=None, signals=None):
    return Observed(counts, signals or [Signals()] * len(counts), blocks, holder)


def test_the_backend_holding_the_prefix_wins_over_an_idle_one():
    routes = [route("a", 8), route("b", 8)]
    ranking = rank(routes, observed([1, 0], [9, 0]), total_blocks=10)
    assert ranking.order[0] == 0
    assert reason(ranking, 0) == scoring.PREFIX


def test_with_nothing_cached_the_least_loaded_wins():
    routes = [route("a", 8), route("b", 8), route("c", 8)]
    ranking = rank(routes, observed([3, 1, 2], [0, 0, 0]), total_blocks=10)
    assert ranking.order == [1, 2, 0]
    assert reason(ranking, 1) == scoring.LEAST_LOADED


def test_the_holder_wins_while_its_load_is_comparable():
    routes = [route("a", 8), route("b", 8)]
    ranking = rank(routes, observed([2, 0], [0, 0], holder="a"), total_blocks=0)
    assert ranking.order[0] == 0
    assert reason(ranking, 0) == scoring.AFFINITY


def test_an_overloaded_holder_spills_to_the_next_best():
    routes = [route("a", 8), route("b", 8)]
    # The holder has the whole prefix but a full queue behind its slots.
    busy = [Signals(queued=12, pressure=0.95), Signals()]
    ranking = rank(routes, observed([8, 1], [10, 0], "a", busy), total_blocks=10)
    assert ranking.order[0] == 1
    assert reason(ranking, 1) == scoring.LEAST_LOADED


def test_the_weights_are_settings(settings):
    routes = [route("a", 8), route("b", 8)]
    seen = observed([4, 0], [10, 0], holder="a")
    assert rank(routes, seen, total_blocks=10).order[0] == 0
    settings.SWITCHYARD_ROUTING = {
        **settings.SWITCHYARD_ROUTING,
        "prefix_weight": 0.0,
        "affinity_weight": 0.0,
    }
    ranking = rank(routes, seen, total_blocks=10)
    assert ranking.order[0] == 1  # least loaded alone
    assert reason(ranking, 0) == scoring.LEAST_LOADED  # no term, no reason


def test_equal_scores_are_ordered_at_random():
    routes = [route("a"), route("b"), route("c")]
    firsts = {
        rank(routes, observed([0, 0, 0], [0, 0, 0]), total_blocks=0, rand=r).order[0]
        for r in range(30)
    }
    assert firsts == {0, 1, 2}


# --- the backends' signals ---------------------------------------------------

VLLM_METRICS = """# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
vllm:num_requests_running{engine="0",model_name="m"} 4.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.61
"""


def test_vllm_metrics_give_its_queue_and_kv_cache_usage():
    assert vllm_signals(VLLM_METRICS) == Signals(5, 0.61)
    older = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.25\n'
    assert vllm_signals(older) == Signals(0, 0.25)
    assert vllm_signals("# nothing of vLLM here\nprocess_cpu_seconds_total 3.0\n") is None
    assert vllm_signals("vllm:num_requests_waiting{} not-a-number\n") is None


def test_llamacpp_slots_give_the_part_busy():
    slots = [{"id": 0, "is_processing": True}, {"id": 1, "is_processing": False}]
    assert llamacpp_signals(slots) == Signals(0, 0.5)
    assert llamacpp_signals({"error": "slots disabled"}) is None
    assert llamacpp_signals([]) is None


# --- turn-state tokens -------------------------------------------------------


def model(*routes_, model_id: str = "7"):
    return SimpleNamespace(id=model_id, routes=tuple(routes_))


@pytest.mark.parametrize("organisation_id", [1, 2])
def test_a_turn_token_names_its_backend_for_its_organisation_only(organisation_id):
    served = model(route("a"), route("b"))
    token = turn_state.turn_token(organisation_id, served, "b")
    headers = {turn_state.HEADER: token.encode()}
    assert turn_state.turn_backend(headers, organisation_id, served) == ("b", token)
    other = 3 - organisation_id
    assert turn_state.turn_backend(headers, other, served) == (None, "")


def test_forged_stale_or_misplaced_turn_tokens_pin_nothing(monkeypatch):
    served = model(route("a"), route("b"))
    token = turn_state.turn_token(1, served, "b")
    for forged in ("b", "sy1.AAAA", token[:-2] + "AA", token + "x", "x" * 600):
        assert turn_state.turn_backend({turn_state.HEADER: forged.encode()}, 1, served) == (
            None,
            "",
        )
    headers = {turn_state.HEADER: token.encode()}
    # Another model, or the backend gone from this one.
    assert (
        turn_state.turn_backend(headers, 1, model(route("a"), route("b"), model_id="8"))[0] is None
    )
    assert turn_state.turn_backend(headers, 1, model(route("a")))[0] is None
    assert (
        turn_state.turn_backend(headers, 1, model(route("a"), route("b", enabled=False)))[0] is None
    )
    later = time.time() + turn_state.TURN_SECONDS + 1
    monkeypatch.setattr(turn_state.time, "time", lambda: later)
    assert turn_state.turn_backend(headers, 1, served)[0] is None


def test_a_backend_that_drew_most_recent_requests_yields_new_conversations():
    routes = [route("a", 8), route("b", 8)]
    # Both idle; "a" holds the shared system prompt (a fifth of this prompt)
    # but took nine of the last ten requests.
    first_turn = Observed([0, 0], [Signals()] * 2, [2, 0], None, recent=[9, 1])
    ranking = rank(routes, first_turn, total_blocks=10)
    assert ranking.order[0] == 1 and reason(ranking, 1) == scoring.LEAST_LOADED
    # A conversation already there stays: its own prefix outweighs the skew.
    later_turn = Observed([0, 0], [Signals()] * 2, [9, 0], "a", recent=[9, 1])
    assert rank(routes, later_turn, total_blocks=10).order[0] == 0
