"""The cycle's recrawl requests in one process, in score order per download slot."""

from __future__ import annotations

from collections import deque

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.pqueues import DownloaderInterface


class RecrawlQueue:
    """Recrawl requests in score order, one deque per download slot.

    Pops from the slot with the fewest active downloads (as Scrapy's
    DownloaderAwarePriorityQueue does), breaking ties by best rank, so one
    busy host does not hold back every other host's recrawls.
    """

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler
        self._downloader_interface: DownloaderInterface | None = None
        self._slots: dict[str, deque[tuple[int, Request]]] = {}
        self._len = 0

    @property
    def _downloader(self) -> DownloaderInterface:
        # Looked up on first use, not when the scheduler is built: Scrapy's contract
        # lets a scheduler be built (from_crawler) and opened before crawler.engine
        # exists (Scrapy's tests/test_scheduler.py::TestIncompatibility does).
        if self._downloader_interface is None:
            self._downloader_interface = DownloaderInterface(self._crawler)
        return self._downloader_interface

    def push(self, rank: int, request: Request) -> None:
        slot = self._downloader.get_slot_key(request)
        self._slots.setdefault(slot, deque()).append((rank, request))
        self._len += 1

    def pop(self) -> Request | None:
        if not self._slots:
            return None
        if len(self._slots) == 1:
            slot = next(iter(self._slots))
        else:
            active = dict((s, a) for a, s in self._downloader.stats(self._slots))
            slot = min(self._slots, key=lambda s: (active.get(s, 0), self._slots[s][0][0]))
        queue = self._slots[slot]
        _, request = queue.popleft()
        if not queue:
            del self._slots[slot]
        self._len -= 1
        return request

    def drain(self) -> list[Request]:
        out = [r for q in self._slots.values() for _, r in q]
        self._slots.clear()
        self._len = 0
        return out

    def __len__(self) -> int:
        return self._len
