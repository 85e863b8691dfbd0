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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from scrapy import Request
from scrapy.http import Response


@dataclass(frozen=True)
class Held:
    """One response (None: a failed download) the store was not there to record."""

    request: Request
    response: Response | None
    #: when it arrived (the crawl's wall clock): the visit's time when recorded later
    time: float


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
