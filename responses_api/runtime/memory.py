"""Give memory back to the operating system after a burst of requests.

A thousand concurrent streams leave most of what they allocated free but
held by the C allocator (glibc keeps freed chunks in its heap for reuse), so
a web process's RSS stays at its peak long after the burst. When the
process falls idle after one, ``malloc_trim(0)`` returns those pages
(bench/README.md, optimisation 19, has the figures). It runs at most once
per burst. A no-op where the C library
has no ``malloc_trim`` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

# Exchanges in flight that make a burst worth trimming after.
BURST = 100


def _load_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _load_trim()


class BurstWatch:
    """Counts exchanges in flight; trims when they fall to zero after a burst."""

    __slots__ = ("in_flight", "peak")

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0

    def started(self) -> None:
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight

    def ended(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0 and self.peak >= BURST:
            self.peak = 0
            trim()


def trim() -> None:
    if _malloc_trim is not None:
        _malloc_trim(0)
