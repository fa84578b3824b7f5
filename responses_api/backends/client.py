"""HTTP to backends: one long-lived httpx client per backend, kept alive.

Clients live on the event loop that made them (httpx pools are bound to one
loop); a process normally has one loop, tests may have several.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import orjson
from django.conf import settings

_clients: dict[tuple[int, str, str], httpx.AsyncClient] = {}


def get_client(base_url: str, api_key: str) -> httpx.AsyncClient:
    loop_id = id(asyncio.get_running_loop())
    key = (loop_id, base_url, api_key)
    client = _clients.get(key)
    if client is None or client.is_closed:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        client = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(
                connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
                read=settings.SWITCHYARD_READ_TIMEOUT,
                write=30.0,
                pool=settings.SWITCHYARD_CONNECT_TIMEOUT,
            ),
            limits=httpx.Limits(
                max_connections=None, max_keepalive_connections=256, keepalive_expiry=60
            ),
        )
        _clients[key] = client
    return client


async def close_clients() -> None:
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _clients if k[0] == loop_id]:
        client = _clients.pop(key)
        with contextlib.suppress(Exception):
            await client.aclose()


def chat_request(client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Request:
    return client.build_request("POST", "chat/completions", content=orjson.dumps(body))
