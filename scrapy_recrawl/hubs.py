"""Hubs in a crawl: which refetched page yielded which new URLs (core/hubs.py has the
rule).

Three parts of the crawl see a piece each, and share one :class:`HubTally` per crawler
(:func:`hubs_for_crawler`):

* the recording middleware notes each good refetch of a known page
  (:meth:`HubTally.refetched`: its URL id and the cycles since its previous fetch) and
  tags the response with the page's id (:data:`META_HUB_PAGE`);
* :class:`HubSpiderMiddleware` tags each request the callback yields from such a
  response with that id (:data:`META_VIA`);
* the scheduler, when it admits a URL the store has never seen, counts it for the page
  it came from (:meth:`HubTally.found`) and drops the tag.

When a cycle ends for the process, :func:`keep` folds the counts into the store's side
table ``hub_links`` (core/hubs.py: fold); when a cycle opens, :func:`read` gives the
hubs to the cycle core, which makes the due ones recrawls first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from .core.hubs import HUB_TABLE, fold, is_hub
from .history.cycle_log import start_url_ids
from .history.records import RecordError, pack_record, unpack_record
from .runtime import CrawlerRuntime
from .settings import get

#: on a refetched page's response: ``[url id, cycles since its previous fetch]``
META_HUB_PAGE = "_recrawl_hub_page"
#: on a request a callback yielded from such a page: the page's URL id
META_VIA = "_recrawl_via"
#: where the add-on puts the spider middleware (after the spider's own, like skip.py's)
HUB_MIDDLEWARE_ORDER = 960


class HubTally:
    """This process's refetched pages and the new URLs each yielded, since the last
    :meth:`drain`."""

    def __init__(self) -> None:
        self.gaps: dict[int, int] = {}
        self.links: Counter[int] = Counter()

    def refetched(self, url_id: int, gap: int) -> None:
        self.gaps[int(url_id)] = max(1, int(gap))

    def found(self, url_id: int) -> None:
        self.links[int(url_id)] += 1

    def drain(self) -> dict[int, tuple[int, int]]:
        """``{url id: (new links, cycles since its previous fetch)}``, then empty."""
        out = {i: (self.links.get(i, 0), gap) for i, gap in self.gaps.items()}
        self.gaps, self.links = {}, Counter()
        return out


def hubs_for_crawler(crawler: Any) -> HubTally:
    """The one hub tally of this crawler (kept by its runtime: runtime.py)."""
    return CrawlerRuntime.of(crawler).part(HubTally)


def keep(store: Any, tally: HubTally) -> int:
    """Fold this process's counts into the store's hub table; returns the hubs written."""
    counts = tally.drain()
    if not counts:
        return 0
    ids = sorted(counts)
    old = store.side_get(HUB_TABLE, ids)
    put: list[tuple[int, bytes]] = []
    drop: list[int] = []
    for url_id, data in zip(ids, old, strict=True):
        rate = None
        if data is not None:
            try:
                rate = float(unpack_record(data)["rate"])  # type: ignore[arg-type]
            except (RecordError, KeyError, TypeError, ValueError):
                rate = None
        links, gap = counts[url_id]
        if rate is None and links == 0:
            continue  # no hub, and never was
        new = fold(rate, links, gap)
        if is_hub(new):
            put.append((url_id, pack_record({"rate": new})))
        elif data is not None:
            drop.append(url_id)
    if put:
        store.side_put(HUB_TABLE, put)
    if drop:
        store.side_delete(HUB_TABLE, drop)
    return len(put)


def read(store: Any) -> tuple[np.ndarray, np.ndarray]:
    """The hubs the store knows, ``(URL ids ascending, new links per cycle)``, but for the
    spider's start URLs: fetched every cycle anyway, never worth a recrawl of their own."""
    ids: list[int] = []
    rates: list[float] = []
    for key, data in store.side_items(HUB_TABLE):
        try:
            rate = float(unpack_record(data)["rate"])  # type: ignore[arg-type]
        except (RecordError, KeyError, TypeError, ValueError):
            continue  # not this module's record: no hub
        ids.append(int(key))
        rates.append(rate)
    arr = np.asarray(ids, dtype=np.int64)
    keep = ~np.isin(arr, start_url_ids(store))
    order = np.argsort(arr[keep], kind="stable")
    return arr[keep][order], np.asarray(rates, dtype=np.float64)[keep][order]


class HubSpiderMiddleware(BaseSpiderMiddleware):
    """Tags the requests a refetched page's callback yields with the page's URL id
    (module docstring). Off (NotConfigured) when the add-on is off."""

    def __init__(self, crawler: Any) -> None:
        if not get(crawler.settings, "RECRAWL_ENABLED"):
            raise NotConfigured
        super().__init__(crawler)

    async def process_spider_output_async(
        self, response: Response | None, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        """The callback's output, each request tagged when ``response`` is a refetched
        page's: its own loop, not the base class's call per output through a deprecation
        wrapper (every link a crawl follows passes here; most pages tag none)."""
        page = response.meta.get(META_HUB_PAGE) if response is not None else None
        if page is None:
            async for o in result:
                yield o
            return
        via = int(page[0])
        async for o in result:
            if isinstance(o, Request):
                _tag(o, via)
            yield o

    def get_processed_request(self, request: Request, response: Response | None) -> Request:
        page = response.meta.get(META_HUB_PAGE) if response is not None else None
        if page is not None:
            _tag(request, int(page[0]))
        return request


def _tag(request: Request, via: int) -> None:
    """``request`` came from the refetched page ``via`` (a tag it had already stays)."""
    if META_VIA not in request.meta:
        request.meta[META_VIA] = via
