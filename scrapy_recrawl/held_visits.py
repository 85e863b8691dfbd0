"""Responses that arrived while the history store was away, held until it is back.

When a response cannot be recorded because the store did not answer (a Redis
restarting, a network cut) and the store did not take the visit, the middleware
holds the request and its response (or its download error) here, in arrival
order, and records them in that order once the store answers again: at its idle
flush tick (``RECRAWL_FLUSH_SECONDS``), when the hold is full, and before the store
closes. A response that arrives while others are held waits behind them, so each
URL's visits reach the store in the order they were made.

At most ``bound`` are held (``RECRAWL_FLUSH_EVERY``, the bound of the store's own
buffer). A response past it is lost (counted); so is what is still held when the
store closes. The crawl says how many in one line and exits 1
(history/__init__.py: ``before_close``).

:class:`StoreAway` is the middleware's side of it: each response goes through
:meth:`StoreAway.attempt`, which records it now or holds it, says the store's
absence and return once, and records what is held at the idle flush tick
(:meth:`StoreAway.tick`) and before the store closes.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from .history import HistoryStoreError, StoreLost
from .stored_request import META_AS_MADE
from .visit_recorder import VisitRecorder

#: the middleware's log lines keep its logger's name (a user's logging config names it)
logger = logging.getLogger("scrapy_recrawl.middleware")


@dataclass(frozen=True)
class Held:
    """One response (None: a failed download) the store was not there to record."""

    request: Request
    response: Response | None
    #: when it arrived (the crawl's wall clock): the visit's time when recorded later
    time: float
    #: the request's note of what it held as it left the scheduler (stored_request.py),
    #: dropped from its meta once the response was received: put back to record it
    note: Any = None


class HeldVisits:
    """A bounded first-in, first-out hold of :class:`Held` responses."""

    def __init__(self, bound: int) -> None:
        self.bound = max(1, int(bound))
        self._items: deque[Held] = deque()
        #: responses turned away because the hold was full: lost
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Held]:
        return iter(self._items)

    @property
    def full(self) -> bool:
        return len(self._items) >= self.bound

    def hold(self, item: Held) -> bool:
        """Hold ``item`` behind the others; False (and counted lost) when full."""
        if self.full:
            self.dropped += 1
            return False
        self._items.append(item)
        return True

    def replay(self, record: Callable[[Held], None]) -> int:
        """``record`` each held response, oldest first, and let it go once recorded;
        returns how many were. An error of ``record`` leaves that one first in the hold
        (and the rest behind it) and is raised."""
        done = 0
        while self._items:
            record(self._items[0])
            self._items.popleft()
            done += 1
        return done

    def give_up(self) -> int:
        """Empty the hold (the store closes); returns how many were lost in all."""
        lost = len(self._items) + self.dropped
        self._items.clear()
        self.dropped = 0
        return lost


class StoreAway:
    """Records each response now, or holds it while the store is away (module docstring).

    ``observe(request, response)`` records a response and returns what the engine gets;
    ``recorder`` records a failed download and says whether the store took a visit."""

    def __init__(
        self,
        held: HeldVisits,
        recorder: VisitRecorder,
        observe: Callable[[Request, Response], Any],
    ) -> None:
        self.held = held
        self.recorder = recorder
        self.store = recorder.store
        self.observe = observe
        #: the idle flush timer runs (RECRAWL_FLUSH_SECONDS > 0): it retries the held ones;
        #: without it each arrival does
        self.ticking = False
        self._away_said = False  # the store's absence said (once per outage)

    def attempt(self, request: Request, response: Response | None) -> Any:
        """Record a response (None: a failed download) now, or hold it: behind the ones
        held already (their order is the visits'), or because the store did not take it.
        Returns what the engine gets (the response, or a re-fetch of a bare 304)."""
        held = self.held
        if held and not self.ticking:
            self.replay()  # no idle timer (RECRAWL_FLUSH_SECONDS = 0): each arrival retries
        if held:
            self._hold(request, response, None)
            return response
        recorder = self.recorder
        recorder.accepted = False
        try:
            if response is None:
                recorder.failed(request)
                return None
            return self.observe(request, response)
        except HistoryStoreError as exc:
            if recorder.accepted or isinstance(exc, StoreLost):
                # taken by the store (its flush retries it), or gone with a lost store
                recorder.store_failed(exc, request.url)
            else:
                recorder.inc("store_errors")
                self._hold(request, response, exc)
        return response

    def tick(self) -> None:
        """The idle flush (RECRAWL_FLUSH_SECONDS): what is held first, then the store's
        buffer, responses or not (a crawl gone quiet records none); observations held
        for their items' verdict past their age are recorded with the text's."""
        observations = self.recorder.observations
        if observations is not None:
            observations.expire()
        if self.held and not self.replay():
            return  # still away: a flush would fail the same way (counted once)
        try:
            self.store.flush()
        except HistoryStoreError as exc:
            # the store keeps its buffer; the next tick (or visit) retries
            self.recorder.inc("store_errors")
            if isinstance(exc, StoreLost):
                return  # said once, in one line, as the crawl stops (history/epoch.py)
            logger.error("recrawl: could not flush buffered visits: %s", exc)

    def replay(self) -> bool:
        """Record the held responses, oldest first; True when none is left held."""
        try:
            self.held.replay(self._record_held)
        except HistoryStoreError:
            self.recorder.inc("store_errors")  # retried at the next tick
            return False
        if self._away_said:
            self._away_said = False
            logger.warning(
                "recrawl: the history store at %s answers again: the held responses are recorded",
                self.store.location,
            )
        return True

    def at_store_close(self) -> int:
        """Before the store closes (history/__init__.py: before_close): record what is
        held; returns how many visits could not be (lost, said with the store's own)."""
        observations = self.recorder.observations
        waiting = 0 if observations is None else observations.release_all()
        held = self.held
        if held:
            self.replay()
        stats = self.recorder.stats
        if (held or waiting) and stats is not None:
            stats.inc_value("recrawl/visits_lost", len(held) + waiting)
        return held.give_up() + waiting

    def _hold(
        self, request: Request, response: Response | None, exc: HistoryStoreError | None
    ) -> None:
        held = self.held
        if exc is not None and not self._away_said:
            self._away_said = True
            logger.error(
                "recrawl: the history store at %s did not answer (%s): the responses "
                "that arrive are held, at most %d (RECRAWL_FLUSH_EVERY), and recorded "
                "when it answers again",
                self.store.location,
                exc,
                held.bound,
            )
        if held.full:
            self.replay()  # one more try before one is turned away
        note = request.meta.get(META_AS_MADE)
        if held.hold(Held(request, response, self.recorder.now(), note)):
            self.recorder.inc("visits_held")
            return
        self.recorder.inc("visits_lost")
        if held.dropped == 1:
            logger.warning(
                "recrawl: %d responses held while the history store at %s is away "
                "(RECRAWL_FLUSH_EVERY): the visit of %s, and of any later response "
                "while it stays away, is not recorded (recrawl/visits_lost)",
                held.bound,
                self.store.location,
                request.url,
            )

    def _record_held(self, item: Held) -> None:
        """Record one held response as it would have been when it arrived (its time);
        raises when the store did not take it (it stays held)."""
        recorder = self.recorder
        recorder.accepted = False
        recorder.arrived = item.time
        # the request as the spider made it is what is stored: its note (gone from its
        # meta at response_received) put back for this record, as it was on arrival
        meta = item.request.meta
        restored = item.note is not None and META_AS_MADE not in meta
        if restored:
            meta[META_AS_MADE] = item.note
        try:
            if item.response is None:
                recorder.failed(item.request)
            else:
                # what the engine would get (a re-fetch of a bare 304) is too late now
                self.observe(item.request, item.response)
        except IgnoreRequest:
            pass  # RECRAWL_SKIP_UNCHANGED: the spider had the response already
        except HistoryStoreError as exc:
            if not recorder.accepted:
                raise
            recorder.store_failed(exc, item.request.url)  # the store's to write now
        finally:
            recorder.arrived = None
            if restored:
                meta.pop(META_AS_MADE, None)
        recorder.inc("visits_recorded_late")
