"""Scoring a request's candidate backends (README, "Routing, limits and usage
guarantees").

Each candidate gets ``score = prefix_weight × reuse + affinity_weight ×
holder − load_weight × load`` (weights: ``SWITCHYARD_ROUTING``):

- *reuse*, the part of the prompt the backend is expected to have in its
  prefix cache (``prefix_index``), from 0 to 1; for a backend in precise
  mode, the part of the prompt's token blocks its KV-cache events say it
  holds (``Held``, from ``kv_events``);
- *holder*, 1 for the backend that served the conversation last (its
  ``previous_response_id`` chain, ``prompt_cache_key`` or leading items), or
  that a Codex turn-state token names;
- *load*, its in-flight requests plus the requests it reports waiting, over
  its ``max_concurrency`` (or ``load_scale``), plus the part of its KV cache
  or slots in use (polled by the health check: ``backends.signals``);

and ``− balance_weight × (its share of the requests placed in the last
recent_seconds − an even share)``: a conversation's later turns follow its
first, so where first turns go decides the load to come, which in-flight
counts of short requests do not show.

So affinity is a strong term, not an override: a holder loaded well past
the others loses to the next best, and a full one is passed over by the
claim (``routing_state.choose``), which adds the in-flight counts it reads
to the rest of the score and takes the best with a free slot.
Pure: no I/O, no Django but the settings read.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings

from responses_api.backends.prefix_index import PromptBlocks
from responses_api.catalogue.catalog import Route

# Why a backend was chosen (the usage row's ``route_reason``).
PINNED, AFFINITY, PREFIX, LEAST_LOADED, FAILOVER = (
    "pinned",
    "affinity",
    "prefix",
    "least-loaded",
    "failover",
)


class Signals(NamedTuple):
    """What a backend says of its own load (its health check's last poll)."""

    # Requests it holds waiting (vLLM's ``vllm:num_requests_waiting``).
    queued: int = 0
    # Part of its KV cache in use (vLLM), or of its slots busy (llama.cpp), 0 to 1.
    pressure: float = 0.0


class Held(NamedTuple):
    """A precise backend's view of the prompt: its leading token blocks the
    backend holds, of how many, of how many tokens each."""

    found: int
    total: int
    block_size: int


NO_SIGNALS = Signals()
SHARE_PRIOR = 2
# Above any score: the backend a turn-state token names comes first.
PIN_BONUS = 1e6


@dataclass(frozen=True, slots=True)
class Observed:
    """The candidates' state as read before the choice, index for index."""

    counts: Sequence[int]
    signals: Sequence[Signals]
    # Leading prompt blocks found in each backend's prefix index.
    blocks: Sequence[int]
    # The backend the conversation was remembered on, if any.
    holder: str | None = None
    # Requests scored onto each backend lately (``recent_seconds``).
    recent: Sequence[int] = ()
    # For each backend in precise mode, what its events say it holds.
    precise: Sequence[Held | None] = ()


@dataclass(frozen=True, slots=True)
class Ranking:
    """The candidates best first, and what each was scored on. ``bonus`` is
    a score without its in-flight requests, ``per_request`` what each of them
    takes off: the claim counts them afresh (``routing_state.choose``)."""

    order: list[int]
    scores: list[float]
    blocks: Sequence[int]
    holder: int | None
    bonus: list[float]
    per_request: list[float]
    # Each candidate's reuse term, and the prompt tokens that is.
    reuse: Sequence[float] = ()
    tokens: Sequence[int] = ()

    def first(self, index: int) -> Ranking:
        """The same, with ``index`` first while it has a free slot (a turn's backend)."""
        bonus = [b + PIN_BONUS if i == index else b for i, b in enumerate(self.bonus)]
        order = [index, *(i for i in self.order if i != index)]
        return Ranking(
            order,
            self.scores,
            self.blocks,
            self.holder,
            bonus,
            self.per_request,
            self.reuse,
            self.tokens,
        )


def reuse_of(observed: Observed, i: int, total_blocks: int) -> tuple[float, int]:
    """Candidate ``i``'s reuse term and the prompt tokens it stands for."""
    held = observed.precise[i] if i < len(observed.precise) else None
    if held is not None:
        reuse = held.found / held.total if held.total else 0.0
        return reuse, held.found * held.block_size
    reuse = observed.blocks[i] / total_blocks if total_blocks else 0.0
    return reuse, PromptBlocks.tokens(observed.blocks[i])


def scale_of(route: Route) -> float:
    return route.backend.max_concurrency or settings.SWITCHYARD_ROUTING["load_scale"]


def load_of(route: Route, count: int, signals: Signals) -> float:
    return (count + signals.queued) / scale_of(route) + signals.pressure


def rank(
    routes: Sequence[Route], observed: Observed, *, total_blocks: int, rand: int | None = None
) -> Ranking:
    """The candidates by score, best first; equal scores in an order drawn
    by ``rand``, so that idle backends share the load."""
    weights = settings.SWITCHYARD_ROUTING
    holder = next(
        (i for i, r in enumerate(routes) if observed.holder and r.backend.id == observed.holder),
        None,
    )
    scores = []
    placed = sum(observed.recent)
    terms = [reuse_of(observed, i, total_blocks) for i in range(len(routes))]
    for i, route in enumerate(routes):
        reuse = terms[i][0]
        score = weights["prefix_weight"] * reuse - weights["load_weight"] * load_of(
            route, observed.counts[i], observed.signals[i]
        )
        if placed:
            # Its share of the recent requests over an even share: sessions
            # stick where they started, so a backend that drew most of
            # them is loaded ahead of its in-flight count. Counted from
            # SHARE_PRIOR requests on each, so that a lone conversation's
            # few turns are not taken for a skew.
            share = (observed.recent[i] + SHARE_PRIOR) / (placed + SHARE_PRIOR * len(routes))
            score -= weights["balance_weight"] * (share - 1 / len(routes))
        if i == holder:
            score += weights["affinity_weight"]
        scores.append(score)
    shuffled = list(range(len(routes)))
    random.Random(rand).shuffle(shuffled)
    order = sorted(shuffled, key=lambda i: -scores[i])
    per_request = [weights["load_weight"] / scale_of(route) for route in routes]
    bonus = [s + per_request[i] * observed.counts[i] for i, s in enumerate(scores)]
    reuses, tokens = [t[0] for t in terms], [t[1] for t in terms]
    return Ranking(order, scores, observed.blocks, holder, bonus, per_request, reuses, tokens)


def reason(ranking: Ranking, chosen: int) -> str:
    """Why ``chosen`` won: it holds the conversation, it has the longest
    expected prefix, or neither (it was the least loaded)."""
    weights = settings.SWITCHYARD_ROUTING
    if chosen == ranking.holder and weights["affinity_weight"] > 0:
        return AFFINITY
    reuse = ranking.reuse or [float(b) for b in ranking.blocks]
    found = reuse[chosen]
    if found and found == max(reuse) and weights["prefix_weight"] > 0:
        return PREFIX
    return LEAST_LOADED
