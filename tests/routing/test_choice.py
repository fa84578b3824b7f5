"""The pure parts of routing and limits: which backend, which conversation."""

from __future__ import annotations

from responses_api.backends.routing import affinity_key
from responses_api.backends.routing_state import Terms, choose
from responses_api.protocol.body import CreateResponse
from responses_api.usage.ratelimit import Scope, _headers, _verdict


def test_least_loaded_wins_and_ties_are_shared_when_nothing_is_scored():
    assert choose([3, 1, 2], [0, 0, 0], [True] * 3, None, 0) == 1
    picks = {choose([1, 1, 1], [0, 0, 0], [True] * 3, None, rand) for rand in range(6)}
    assert picks == {0, 1, 2}


def test_full_backends_are_skipped_and_all_full_means_wait():
    assert choose([2, 5], [2, 8], [True, True], None, 0) == 1
    assert choose([2, 8], [2, 8], [True, True], Terms([5.0, 0.0], [0.1, 0.1]), 0) is None


def test_the_best_score_with_a_free_slot_wins_counting_requests_in_flight():
    terms = Terms([1.0, 0.2, 0.5], [0.125, 0.125, 0.125])
    assert choose([0, 0, 0], [8, 8, 8], [True] * 3, terms, 0) == 0
    # Six in flight on the best take 0.75 off it: the next best wins.
    assert choose([6, 0, 0], [8, 8, 8], [True] * 3, terms, 0) == 2
    # The best full, the third loaded: the second, idle, wins.
    assert choose([8, 0, 3], [8, 8, 8], [True] * 3, terms, 0) == 1


def test_requests_choosing_together_spread_over_equal_backends():
    terms, counts = Terms([0.0] * 3, [0.125] * 3), [0, 0, 0]
    for rand in range(6):
        counts[choose(counts, [0, 0, 0], [True] * 3, terms, rand)] += 1
    assert counts == [2, 2, 2]


def test_suspect_backends_are_used_only_when_nothing_else_is_left():
    assert choose([0, 4], [0, 0], [False, True], Terms([9.0, 0.0], [1.0, 1.0]), 0) == 1
    assert choose([0, 4], [0, 0], [False, False], None, 0) == 0


def test_a_conversation_is_its_cache_key_or_its_leading_items():
    base = {"organisation_id": 1, "model_id": "m", "instructions": "be brief"}

    def items(*raw):
        return CreateResponse.model_validate({"model": "m", "input": list(raw)}).input

    turn1 = items({"role": "user", "content": "hello"})
    turn2 = [
        *turn1,
        *items({"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}),
    ]
    turn3 = [
        *turn2,
        *items({"role": "assistant", "content": "ok"}, {"role": "user", "content": "end"}),
    ]
    leading = affinity_key(prompt_cache_key=None, input=turn1, **base)
    assert leading == affinity_key(prompt_cache_key=None, input=turn2, **base)
    assert leading == affinity_key(prompt_cache_key=None, input=turn3, **base)
    other = [*items({"role": "developer", "content": "x"}), *turn1]
    assert affinity_key(prompt_cache_key=None, input=other, **base) != leading
    assert affinity_key(prompt_cache_key=None, input="just a string", **base) is None
    keyed = affinity_key(prompt_cache_key="s1", input=turn1, **base)
    assert keyed == affinity_key(prompt_cache_key="s1", input=turn3, **base)
    assert keyed != affinity_key(
        prompt_cache_key="s1", input=turn1, **{**base, "organisation_id": 2}
    )


def test_limit_verdicts_and_headers_name_the_tightest_limit():
    key = Scope("key", "k", rpm=10, tpm=0, concurrency=0)
    org = Scope("organisation", "1", rpm=100, tpm=1000, concurrency=2)
    assert _verdict([key, org], [(9, 0, 0), (50, 0, 0)], 5) is None
    assert _verdict([key, org], [(10, 0, 0), (50, 0, 0)], 5) == (0, "requests")
    assert _verdict([key, org], [(1, 0, 0), (1, 996, 0)], 5) == (1, "tokens")
    assert _verdict([key, org], [(1, 0, 0), (1, 0, 2)], 5) == (1, "concurrency")
    headers = dict(_headers([key, org], [(9, 0, 0), (50, 400, 1)], 12.2))
    assert headers[b"x-ratelimit-limit-requests"] == b"10"
    assert headers[b"x-ratelimit-remaining-requests"] == b"1"
    assert headers[b"x-ratelimit-remaining-tokens"] == b"600"
    assert headers[b"x-ratelimit-reset-tokens"] == b"13s"
