"""``RECRAWL_CHANGE_SIGNAL = "items"``: a visit's change observation held until its
page's items are known.

Why: the recording middleware observes a response before the spider's callback runs,
but with the items signal the page's change is whether its items changed, known only
once the callback's output is exhausted (item_watch.py). So the visit (signed and
compared by the text detector as usual, the text verdict in it) is held here instead of
recorded, and recorded once, with the items' verdict, when the spider middleware
completes it. Nothing in the store changes: the visit is recorded one time, later.

Bounded like the store's own buffer: at most ``bound`` held (``RECRAWL_FLUSH_EVERY``;
past it the oldest is recorded with its text verdict), none longer than ``max_age``
seconds (``RECRAWL_FLUSH_SECONDS``, checked at the idle flush tick and at each hold);
the oldest that the store does not take when the hold is full is lost (counted).
A response that never reaches the callback's end (dropped by another middleware, an
error in the callback, the crawl closing) keeps its text verdict. A store that does not
take the visit when it is completed keeps it held (retried at the next tick, counted lost
when the store closes with it still held).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .history import HistoryStoreError, StoreLost, Visit

#: on a held response's request: its :class:`HeldObservation` (never stored)
META_HELD = "_recrawl_held_observation"


@dataclass(eq=False)
class HeldObservation:
    """One visit waiting for its items' verdict."""

    request: Any
    visit: Visit
    since: float
    owner: HeldObservations
    #: the cycle tally's count of it, made with the final outcome (VisitRecorder.count)
    count: tuple[int, bool] | None = None
    #: the items' verdict once given (None: the text verdict stands)
    verdict: bool | None = None
    done: bool = False

    def complete(self, changed: bool | None) -> None:
        """The page's items said ``changed`` (None: no verdict, the text one stands)."""
        self.owner.complete(self, changed)


class HeldObservations:
    """The held observations of one crawl (module docstring). ``record(obs, changed)``
    records a visit with its final verdict; it raises HistoryStoreError when the store
    did not take it."""

    def __init__(
        self,
        record: Callable[[HeldObservation, bool | None], None],
        *,
        bound: int,
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
        inc: Callable[[str], None] | None = None,
    ) -> None:
        self._record = record
        self.bound = max(1, int(bound))
        self.max_age = float(max_age)
        self.clock = clock
        self.inc = inc or (lambda key: None)
        self._held: OrderedDict[int, HeldObservation] = OrderedDict()
        #: observations the store never took (counted lost at close)
        self.lost = 0

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, request: Any, visit: Visit) -> HeldObservation:
        obs = HeldObservation(request, visit, self.clock(), self)
        self.expire()
        while len(self._held) >= self.bound:
            oldest = next(iter(self._held.values()))
            self.inc("items_signal/released_full")
            if not self._release(oldest, None):
                # the store refuses visits: the oldest is lost (counted), as a response
                # past a full HeldVisits is, not retried here without end
                oldest.done = True
                self._held.pop(id(oldest), None)
                self.lost += 1
        self._held[id(obs)] = obs
        return obs

    def complete(self, obs: HeldObservation, changed: bool | None) -> None:
        if obs.done or id(obs) not in self._held:
            return  # released already (too old, the hold full): its text verdict stands
        self._release(obs, changed)

    def expire(self) -> None:
        """Record, with their text verdict, the ones held longer than ``max_age``; retry
        the completed ones the store did not take."""
        now = self.clock()
        for obs in list(self._held.values()):
            if obs.verdict is None and now - obs.since < self.max_age:
                return  # held in arrival order: the rest are younger
            if obs.verdict is None:
                self.inc("items_signal/released_late")
            if not self._release(obs, obs.verdict):
                return  # the store is away: the rest waits for the next tick

    def release_all(self) -> int:
        """Before the store closes: record every held one; returns how many could not be."""
        for obs in list(self._held.values()):
            self._release(obs, obs.verdict)
        lost = len(self._held) + self.lost
        self._held.clear()
        self.lost = 0
        return lost

    def _release(self, obs: HeldObservation, changed: bool | None) -> bool:
        obs.verdict = changed
        try:
            self._record(obs, changed)
        except StoreLost:
            self.lost += 1  # said once as the crawl stops (history/epoch.py)
        except HistoryStoreError:
            self.inc("store_errors")
            return False  # kept, with its verdict: retried at the next tick
        obs.done = True
        self._held.pop(id(obs), None)
        return True
