"""What the example sites share: a simulated calendar and an HTTP server in a thread.

Both the demo site (site.py) and the reference site (reference/) count simulated days:
moved on by hand (``advance``, the ``/_admin/advance`` endpoint, once per crawl cycle)
and, with ``day_seconds`` > 0, by the wall clock too.
"""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer


class SimulatedClock:
    """The current simulated day: days advanced by hand, plus one per ``day_seconds`` of
    wall time when that is > 0. Thread-safe; ``day_began`` is the monotonic time the
    current day was entered by hand (what relative dates count from)."""

    def __init__(self, day_seconds: float = 0.0) -> None:
        if day_seconds < 0:
            raise ValueError(f"day_seconds must be >= 0, got {day_seconds}")
        self.day_seconds = day_seconds
        self.lock = threading.Lock()
        self._manual_days = 0
        #: the wall clock the days of ``day_seconds`` are counted on: a test may set its own
        self.monotonic = time.monotonic
        self._t0 = self.day_began = self.monotonic()

    @property
    def day(self) -> int:
        """The current simulated day (0 at the start)."""
        day = self._manual_days
        if self.day_seconds > 0:
            day += int((self.monotonic() - self._t0) / self.day_seconds)
        return day

    def advance(self, days: int = 1) -> int:
        """Move the clock on by ``days``; returns the new day."""
        if days < 0:
            raise ValueError(f"days must be >= 0, got {days}")
        with self.lock:
            self._manual_days += days
            self.day_began = self.monotonic()
            return self.day

    def reset_clock(self) -> None:
        """Back to day 0 (the caller holds ``lock``)."""
        self._manual_days = 0
        self._t0 = self.day_began = self.monotonic()


class ServerThread:
    """``server`` served from a daemon thread until :meth:`stop`; a context manager.
    ``base_url`` is its address without a trailing slash."""

    def __init__(self, server: ThreadingHTTPServer, name: str) -> None:
        self.server = server
        bound_host, bound_port = server.server_address[:2]
        if isinstance(bound_host, bytes):
            bound_host = bound_host.decode()
        self.base_url = f"http://{bound_host}:{bound_port}"
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"{name}-{bound_port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
