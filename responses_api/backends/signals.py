"""What a backend says of its own load, read by the health check.

vLLM publishes Prometheus metrics at ``/metrics``: the requests it holds
waiting (``vllm:num_requests_waiting``) and the part of its KV cache in use
(``vllm:kv_cache_usage_perc``, ``vllm:gpu_cache_usage_perc`` before 0.10;
a fraction despite the name), one sample per engine. llama-server lists its
slots at ``/slots`` (unless started with ``--no-slots``), each
``is_processing`` or idle. Both feed the load term of the routing score
(``scoring.Signals``); a backend that publishes neither has none, and
counts by its in-flight requests alone.
"""

from __future__ import annotations

from typing import Any

from responses_api.backends.client import BackendError, get
from responses_api.backends.scoring import Signals
from responses_api.catalogue.addresses import AddressPolicy

_WAITING = "vllm:num_requests_waiting"
_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


def vllm_signals(metrics: str) -> Signals | None:
    """The signals in vLLM's metrics text; None when it has none of them."""
    waiting: float | None = None
    usage: float | None = None
    for line in metrics.splitlines():
        if not line.startswith("vllm:"):
            continue
        name, _, rest = line.partition("{") if "{" in line else line.partition(" ")
        try:
            value = float(rest.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        if name == _WAITING:
            waiting = (waiting or 0.0) + max(value, 0.0)
        elif name in _USAGE:
            usage = max(usage or 0.0, min(max(value, 0.0), 1.0))
    if waiting is None and usage is None:
        return None
    return Signals(int(waiting or 0), usage or 0.0)


def llamacpp_signals(slots: Any) -> Signals | None:
    """The part of llama-server's slots busy; None when ``slots`` is not its list."""
    if not isinstance(slots, list) or not slots:
        return None
    busy = sum(1 for s in slots if isinstance(s, dict) and s.get("is_processing"))
    return Signals(0, busy / len(slots))


async def poll_signals(
    dialect: str, base_url: str, api_key: str, within: float, policy: AddressPolicy | None
) -> Signals | None:
    """The backend's signals now, by its dialect; None when it gives none."""
    if dialect not in ("vllm", "llamacpp"):
        return None
    root = base_url.rstrip("/").removesuffix("/v1")
    page = "/metrics" if dialect == "vllm" else "/slots"
    try:
        status, data, _ = await get(
            root, page, api_key=api_key, within=within, policy=policy, text=dialect == "vllm"
        )
    except BackendError:
        return None
    if status != 200:
        return None
    return vllm_signals(data) if dialect == "vllm" else llamacpp_signals(data)
