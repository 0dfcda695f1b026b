"""Waiting for petastream's threads to end, for tests that check a loader leaves none behind."""

from __future__ import annotations

import threading
import time


def petastream_threads() -> int:
    """Live threads petastream started (they are named ``petastream-*``); not TensorFlow's or
    torch's own, nor the foreign threads Python counts once they call into it."""
    return sum(t.name.startswith("petastream") for t in threading.enumerate())


def settles_to(limit: int, timeout: float = 60.0) -> int:
    """:func:`petastream_threads` once at most ``limit``, or at ``timeout``: threads that finish
    on their own (a read-ahead load, a joined decode thread on a loaded machine) may still be
    ending when an iteration does; a leaked one never ends, and the caller's assertion fails."""
    deadline = time.monotonic() + timeout
    while petastream_threads() > limit and time.monotonic() < deadline:
        time.sleep(0.05)
    return petastream_threads()
