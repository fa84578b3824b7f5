"""What the simulator backend received, read back from ``GET /_sim/requests``."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support import wait_until


def received(simulator: Any, marker: str) -> dict[str, Any]:
    """The latest chat request the simulator got with a message holding ``marker``."""

    def find() -> dict[str, Any] | None:
        recent = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/requests", timeout=5)
        for request in recent.json()["data"]:
            if any(marker in str(m.get("content")) for m in request["messages"]):
                return request
        return None

    return wait_until(find, timeout=5, message=f"no request with {marker}")
