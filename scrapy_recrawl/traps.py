"""URL traps: caps on what a crawl keeps of a site that makes links for ever.

A calendar with a "next month" link, session ids in URLs, faceted search: a site
can hand a spider unboundedly many new URLs. Without a cap the known URLs, the
saved frontier and a share budget (``"5%"``) grow with the trap (one 150 s warm-up
reached 28,273 URLs, a 73,219-row frontier, and the next cycle's 5% was 1,414
pages). Three settings bound them:

* ``RECRAWL_MAX_URLS_PER_HOST``: a new URL of a host that already has this many
  known URLs (in the store, plus the new ones this process admitted) is dropped
  (:meth:`TrapCaps.admit`);
* ``RECRAWL_FRONTIER_MAX``: new URLs kept waiting in the store's frontier for a
  later cycle, the highest priority first (:meth:`TrapCaps.frontier_room`);
* ``RECRAWL_BUDGET_MAX``: the most pages a share budget gives a cycle
  (core/budget.py: budget_pages).

Each cap hit is counted in the stats (``recrawl/host_cap_dropped``,
``recrawl/frontier_cap_dropped``) and said once per crawl (per host for the host
cap) in one warning naming the setting. On Redis each process counts the store's
URLs when it first needs them and its own admissions since, so a cap may be passed
by what the other processes admitted meanwhile (at most one cycle's new URLs).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from .history import HistoryStore
from .settings import get

logger = logging.getLogger("scrapy_recrawl.traps")


def _cap(settings: Any, name: str) -> int:
    return int(get(settings, name))  # declared in settings.py: URLs >= 0 (0: no cap)


class TrapCaps:
    """A crawl's caps on new URLs (module docstring); the settings read (and checked:
    a bad one raises RecrawlSettingError naming it) when built."""

    def __init__(self, settings: Any, stats: Any = None) -> None:
        self.limit = _cap(settings, "RECRAWL_MAX_URLS_PER_HOST")
        self.frontier_max = _cap(settings, "RECRAWL_FRONTIER_MAX")
        self.stats = stats
        self._known: Counter[str] | None = None  # per host: the store's URLs + admitted
        self._said: set[str] = set()

    def admit(self, request: Request, store: HistoryStore) -> bool:
        """True: count the URL as known for its host; False: its host is full (dropped,
        counted, said once per host)."""
        if self.limit <= 0:
            return True
        known = self._counts(store)
        host = urlparse_cached(request).hostname or ""
        if known[host] < self.limit:
            known[host] += 1
            return True
        if self.stats is not None:
            self.stats.inc_value("recrawl/host_cap_dropped")
        if host not in self._said:
            self._said.add(host)
            logger.warning(
                "recrawl: %s has %d known URLs, RECRAWL_MAX_URLS_PER_HOST = %d: its new URLs "
                "are dropped from now on (a URL trap? raise the setting if the site is that "
                "big); first dropped: %s",
                host,
                known[host],
                self.limit,
                request.url,
            )
        return False

    def _counts(self, store: HistoryStore) -> Counter[str]:
        if self._known is None:
            # once a crawl, when the first new URL comes: every known URL's host
            ids = store.arrays().ids
            self._known = Counter(urlsplit(url).hostname or "" for url in store.urls(ids))
        return self._known

    def frontier_room(self, store: HistoryStore, wanted: int) -> int:
        """How many of ``wanted`` new URLs the store's frontier may take under
        ``RECRAWL_FRONTIER_MAX`` (all of them when there is no cap); those refused are
        counted in ``recrawl/frontier_cap_dropped`` and said in one warning a crawl."""
        limit = self.frontier_max
        if limit <= 0 or wanted <= 0:
            return wanted
        room = max(0, limit - store.frontier_size())
        if room >= wanted:
            return wanted
        dropped = wanted - room
        first = True
        if self.stats is not None:
            first = not self.stats.get_value("recrawl/frontier_cap_dropped")
            self.stats.inc_value("recrawl/frontier_cap_dropped", dropped)
        if first:
            logger.warning(
                "recrawl: the store's frontier may hold RECRAWL_FRONTIER_MAX = %d new URLs "
                "waiting for a later cycle: %d new URLs not kept, the lowest priority first "
                "(a URL trap? see RECRAWL_MAX_URLS_PER_HOST)",
                limit,
                dropped,
            )
        return room
