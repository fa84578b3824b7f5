"""Who sent a request, as its headers say: kept on its usage row."""

from __future__ import annotations

from typing import NamedTuple

# What a client says of the conversation a request belongs to, kept on its
# row at most this long (Codex sends UUIDs).
CLIENT_ID_LENGTH = 128


def _client_value(headers: dict[bytes, bytes], name: bytes) -> str:
    value = headers.get(name)
    return value.decode("latin-1").strip()[:CLIENT_ID_LENGTH] if value else ""


# Built on every request: a named tuple builds three times as fast as a
# frozen dataclass.
class Client(NamedTuple):
    """Who sent the request, as it says: its address, its user agent, and
    its session, thread and request ids and name (Codex's ``session-id``,
    ``thread-id``, ``x-client-request-id`` and ``originator`` headers)."""

    ip: str | None = None
    user_agent: str = ""
    session_id: str = ""
    thread_id: str = ""
    request_id: str = ""
    originator: str = ""

    @classmethod
    def from_headers(cls, headers: dict[bytes, bytes], ip: str | None) -> Client:
        """Each value bounded; ``session-id`` else ``x-session-id`` names the session."""
        return cls(
            ip=ip,
            user_agent=headers.get(b"user-agent", b"").decode("latin-1")[:300],
            session_id=_client_value(headers, b"session-id")
            or _client_value(headers, b"x-session-id"),
            thread_id=_client_value(headers, b"thread-id"),
            request_id=_client_value(headers, b"x-client-request-id"),
            originator=_client_value(headers, b"originator"),
        )


NO_CLIENT = Client()
