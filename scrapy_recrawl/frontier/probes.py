"""Loop-time probes of new URLs, handed out by a frontier in this process.

Paper 001's baskets (estimate/probes.py, docs/baskets.md): a new URL is fetched
again at fixed offsets after its discovery, within the cycle, to measure how soon
it changes. The probe source (a plug-in, core/plugins.py: ``ProbeSource``) keeps
the schedule; this module hands its due probes out as requests: rebuilt from the
stored request, counted against the cycle's budget (within its probe cap), and
passed through ``first_fetch`` (a URL fetched since the probe came due stands for
it). The engine is nudged when the next probe comes due (its idle heartbeat is 5 s).
Only a frontier whose cycle lives in this process runs them (a probe keeps a clock
per process).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from scrapy import Request

from ..core.meta import KIND_PROBE, META_CYCLE, META_KIND
from ..core.plugins import ProbeSource

if TYPE_CHECKING:
    from .base import CycleFrontier, LocalHost


class ProbeDispatch:
    """The due probes of ``prober`` as requests of ``frontier``'s cycle (module docstring)."""

    def __init__(self, host: LocalHost, frontier: CycleFrontier, prober: ProbeSource) -> None:
        self.host = host
        self.frontier = frontier
        self.prober = prober
        self._wake_call: Any = None

    def due(self) -> bool:
        """A probe is due and the cycle may hand it out now."""
        frontier = self.frontier
        return self.prober.has_due() and frontier.budget_left() and frontier.probe_allowed()

    def next(self) -> Request | None:
        """The next due probe, or None (none due, or fetched this cycle already)."""
        prober, frontier, host = self.prober, self.frontier, self.host
        if not frontier.probe_allowed():
            return None
        # when the probe came due, at the earliest (the heap's head before the pop)
        due = prober.next_due_time()
        url_id = prober.pop_due()
        if url_id is None:
            self._wake_at(prober.next_due_time())
            return None
        store = host.store
        request = host.rebuild_request(
            store.requests(np.asarray([url_id], dtype=np.int64))[0], url_id
        )
        request.meta[META_CYCLE] = store.cycle
        request.meta[META_KIND] = KIND_PROBE
        # Dispatched either way, so its next offset is scheduled: when this cycle fetched
        # the URL since the probe came due, that fetch stands for the probe (if its
        # response is still to come, the prober takes it as the probe's).
        prober.dispatched(host.fingerprint(request), url_id)
        if not frontier.first_fetch(request, due=due):
            return None
        frontier.probe_taken()
        return request

    def _wake_at(self, when: float | None) -> None:
        """Nudge the engine when the next probe comes due (its idle heartbeat is 5 s)."""
        if when is None or (self._wake_call is not None and self._wake_call.active()):
            return
        from twisted.internet import reactor

        clock: Any = reactor  # the installed reactor (typed as the module)
        delay = max(0.0, when - time.time()) + 0.01  # the probes' due times: wall time
        self._wake_call = clock.callLater(delay, self.host.engine_link.wake)

    def cancel(self) -> None:
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
