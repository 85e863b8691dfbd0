"""The processes of a shared cycle: this one's heartbeat in Redis, and who else is there.

Each process of a RedisRecrawlScheduler crawl writes its status -- the cycle it is
in, whether it is busy -- to the spider's workers hash (frontier/redis.py), stamped
by the Redis's clock: liveness never reads a machine's own clock (the one rule of
history/redis_liveness.py). A worker not seen within ``RECRAWL_REDIS_WORKER_TIMEOUT``
is gone. The frontier asks here whether another process is still busy in the cycle
(it may discover more URLs: a process whose queues are empty stays open), and
whether anyone is left when it leaves (the last one out closes the cycle).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..history.redis_liveness import holder_id
from .redis import RedisFrontier

#: Seconds between this worker's status writes while nothing changes.
STATUS_EVERY = 1.0
#: Seconds another worker's business is taken as known (asked before each request).
_BUSY_CACHED = 0.2


class WorkerRegistry:
    """This process's status among a shared cycle's workers, and the others' (module
    docstring). ``timeout``: ``RECRAWL_REDIS_WORKER_TIMEOUT``; the shared state is
    attached when the frontier opens (:meth:`attach`)."""

    def __init__(self, timeout: float, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        #: this process among the workers: host:pid:token
        self.worker_id = holder_id()
        # how often a status is written: this process's own steady clock
        self._monotonic = monotonic
        self._shared: RedisFrontier | None = None
        self._written = -STATUS_EVERY  # the first write is due
        self._busy: bool | None = None
        self._others_busy = (0.0, False)

    def attach(self, shared: RedisFrontier) -> None:
        self._shared = shared

    @property
    def shared(self) -> RedisFrontier:
        assert self._shared is not None, "the frontier is not open"
        return self._shared

    def write(self, cycle: int, *, busy: bool, force: bool = False) -> bool:
        """Write this worker's status, unless written a moment ago as it is: True when
        written (the Redis answered)."""
        now = self._monotonic()
        if not force and busy == self._busy and now - self._written < STATUS_EVERY:
            return False
        self.shared.write_status(cycle, busy)
        self._written, self._busy = now, busy
        return True

    def live(self) -> dict[str, dict[str, Any]]:
        """The workers seen within the timeout, by id, with their status."""
        return self.shared.workers(self.timeout)

    def others(self) -> list[str]:
        """The other processes still in the crawl."""
        return [w for w in self.live() if w != self.worker_id]

    def others_busy(self, cycle: int) -> bool:
        """Another process is busy in ``cycle`` (it may still find new URLs); asked
        often, so known for a moment once read."""
        at, busy = self._others_busy
        if self._monotonic() - at < _BUSY_CACHED:
            return busy
        busy = any(
            st["busy"] and st["cycle"] == cycle
            for w, st in self.live().items()
            if w != self.worker_id
        )
        self._others_busy = (self._monotonic(), busy)
        return busy

    def forget_others(self) -> None:
        """A new cycle: what the others were doing is asked again."""
        self._others_busy = (0.0, False)

    def leave(self) -> None:
        """This process leaves the crawl (its status goes)."""
        self.shared.deregister()
