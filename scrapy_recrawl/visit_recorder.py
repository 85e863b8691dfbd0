"""A visit into the history store, and into this cycle's figures.

The middleware hands each response it observed (or a failed download) to one
:class:`VisitRecorder`, which builds the :class:`~scrapy_recrawl.history.Visit`, gives
it to the store, and counts it: the crawl's ``recrawl/*`` stats, the cycle's tally
(cycle_summary.py), a start URL noted once (history/cycle_log.py), a 200's server
clock and Last-Modified (last_modified.py), a refetch's new links (hubs.py). It also
says whether the store *took* the visit (:attr:`VisitRecorder.accepted`): a visit the
store took is its to write, even when a later read failed; one it did not take is
held (held_visits.py), and recorded later with the time it arrived
(:attr:`VisitRecorder.arrived`).

With ``RECRAWL_CHANGE_SIGNAL = "items"`` a good refetch's visit is held instead
(held_observations.py) and recorded once its page's items gave their verdict; the
request carries the page's URL id for the item comparison (:data:`META_ITEMS_PAGE`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Headers, Response

from .change import ChangeResult
from .core.meta import META_CYCLE, META_KIND
from .core.plugins import VisitHook
from .crawl_stats import stat_adder
from .cycle_summary import CycleTally, tally_for_crawler
from .held_observations import META_HELD, HeldObservation, HeldObservations
from .history import (
    FlushFailed,
    HistoryStore,
    HistoryStoreError,
    StoreLost,
    UrlRecord,
    Visit,
    cycle_log,
)
from .history.state import fold_failure
from .hubs import META_HUB_PAGE, hubs_for_crawler
from .last_modified import tally_for_crawler as last_modified_tally
from .settings import get
from .stored_request import META_REBUILT, StoredRequests, request_to_dict
from .validators import VOLATILE_META, drop_ours

#: the middleware's log lines keep its logger's name (a user's logging config names it)
logger = logging.getLogger("scrapy_recrawl.middleware")

# Headers of a stored body that would lie about it when it is handed out again.
_DROPPED_HEADERS = {"content-length", "content-encoding", "transfer-encoding", "set-cookie"}

#: on a recorded response's request: the page's URL id (item_watch.py keys its items by it)
META_ITEMS_PAGE = "_recrawl_items_page"
#: set for one download: never part of the request a later cycle re-issues
_VOLATILE = VOLATILE_META | {META_ITEMS_PAGE, META_HELD}


#: header name -> the key Scrapy's Headers keeps it under (its normkey: title case bytes)
_HEADER_KEYS: dict[str, bytes] = {}


def header(response: Response, name: str) -> str | None:
    """The response's last ``name`` header as text, None when it has none (empty)."""
    headers = response.headers
    if type(headers) is Headers:
        # Headers.get normalises the name (title case, bytes) and its default on every
        # call: three a response, each name the same every time
        key = _HEADER_KEYS.get(name)
        if key is None:
            key = _HEADER_KEYS[name] = headers.normkey(name)
        values = dict.get(headers, key)
        value = values[-1] if values else None
    else:
        value = headers.get(name)
    return value.decode("latin-1") if value else None


def _headers_to_dict(headers: Headers) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    # the stored pairs themselves: Headers.items() makes each key again (getlist,
    # normkey) for the same (bytes, [bytes]) it holds, a third of recording a first fetch
    pairs = dict.items(headers) if isinstance(headers, dict) else headers.items()
    for k, vs in pairs:
        name = k.decode("latin-1")  # once per header (a first fetch's every header)
        if name.lower() not in _DROPPED_HEADERS:
            out[name] = [v.decode("latin-1") for v in vs]
    return out


def first(rec: UrlRecord | None) -> bool:
    """Whether a visit is the URL's first, by its record before the visit."""
    return rec is None or rec.last_visit_cycle < 0


class VisitRecorder:
    """Records visits in ``store`` and counts them (module docstring); one per
    middleware, built once its store is open."""

    def __init__(
        self, crawler: Crawler, store: HistoryStore, *, max_failures: int, stored: StoredRequests
    ) -> None:
        self.crawler = crawler
        self.store = store
        self.stats = crawler.stats
        self._add_stat = stat_adder(self.stats)  # three to five counts a response
        #: RECRAWL_MAX_FAILURES: failed cycles in a row before a URL is gone (0: never)
        self.max_failures = max_failures
        self.stored_requests = stored
        # this cycle's figures, shared with the scheduler, which sums them up per cycle
        self.tally: CycleTally = tally_for_crawler(crawler)
        # the refetched pages whose callbacks' new links make them hubs (hubs.py)
        self.hubs = hubs_for_crawler(crawler)
        # Last-Modified ages at first fetches and the servers' clocks (last_modified.py)
        self.modified = last_modified_tally(crawler)
        # URL ids noted as start URLs (history/cycle_log.py: START_TABLE), once a process
        self._start_ids: set[int] = set()
        #: the store took the visit of the response in hand (set by :meth:`store_visit`)
        self.accepted = False
        #: a held response's arrival, while it is recorded late (None: a response now)
        self.arrived: float | None = None
        self._unstorable_warned = False
        #: the plug-ins told of every recorded visit and its record (declared "visit_hook")
        self.visit_hooks: list[VisitHook] = []
        #: RECRAWL_CHANGE_SIGNAL = "items": good refetches held for their items' verdict
        self.observations: HeldObservations | None = None
        settings = crawler.settings
        if get(settings, "RECRAWL_CHANGE_SIGNAL") == "items":
            flush_seconds: float = get(settings, "RECRAWL_FLUSH_SECONDS")
            self.observations = HeldObservations(
                self.record_held,
                bound=get(settings, "RECRAWL_FLUSH_EVERY"),
                # held no longer than the store's flush bound (5 s with no idle flush)
                max_age=flush_seconds if flush_seconds > 0 else 5.0,
                inc=self.inc,
            )

    # -- counting ------------------------------------------------------------

    def inc(self, key: str) -> None:
        self._add_stat(f"recrawl/{key}", 1)

    def now(self) -> float:
        if self.arrived is not None:
            return self.arrived  # a held response: the visit is when it arrived
        # the crawl's wall clock: the shared store's on Redis (cycle_summary.py)
        return self.tally.wall()

    def count(
        self,
        request: Request,
        is_first: bool,
        outcome: str | None,
        *,
        cycle: int | None = None,
        gone: bool = False,
    ) -> None:
        """One recorded visit in its cycle's figures (cycle_summary.py), in the cycle the
        visit log has it in; ``is_first``: the URL's first visit (:func:`first`)."""
        if cycle is None:
            cycle = self.cycle_of(request)
        held: HeldObservation | None = request.meta.get(META_HELD)
        if held is not None and not held.done and outcome in ("changed", "unchanged"):
            held.count = (cycle, is_first)  # counted once its verdict is final
            return
        self.tally.count(request, cycle, is_first, outcome, gone=gone)

    def record_held(self, held: HeldObservation, changed: bool | None) -> None:
        """Record a held visit with its items' verdict (None: the text verdict stands),
        and count it in its cycle's figures with that outcome."""
        visit = held.visit
        if changed is not None and changed != visit.changed:
            self.inc("items_signal/overruled")
            visit = dataclasses.replace(visit, changed=changed)
        self.accepted = False
        self.store_visit(visit)
        self.inc("items_signal/" + ("fallback" if changed is None else "judged"))
        if held.count is not None:
            cycle, is_first = held.count
            outcome = "changed" if visit.changed else "unchanged"
            self.tally.count(held.request, cycle, is_first, outcome)

    def cycle_of(self, request: Request) -> int:
        """The cycle ``request``'s visit is in: its own (meta), else the store's, as the
        store records a visit with no cycle."""
        cycle = request.meta.get(META_CYCLE)
        return self.store.cycle if cycle is None else cycle

    def note_refetch(self, request: Request, before: UrlRecord | None, after: UrlRecord) -> None:
        """A good refetch of a known page: the new links its callback yields count for it
        (hubs.py); its first fetch's links are all new and say nothing."""
        if before is None or first(before):
            return
        gap = max(1, int(self.cycle_of(request)) - int(before.last_visit_cycle))
        self.hubs.refetched(after.id, gap)
        request.meta[META_HUB_PAGE] = [after.id, gap]

    # -- into the store ----------------------------------------------------

    def store_visit(self, visit: Visit) -> UrlRecord:
        """``store.record(visit)``; the visit is the store's once this returns, or once
        the store raised FlushFailed (its buffer kept: the next flush retries it)."""
        try:
            rec = self.store.record(visit)
        except FlushFailed as exc:
            self.inc("store_errors")
            logger.error(
                "recrawl: could not write buffered visits to the history store (kept, "
                "retried at the next flush): %s",
                exc,
            )
            rec = exc.record
        self.accepted = True
        for hook in self.visit_hooks:
            hook.visited(visit, rec)
        return rec

    def store_failed(self, exc: HistoryStoreError, url: str) -> None:
        """The store failed after it took the visit of ``url`` (a read that followed, e.g.
        a pending record's): it keeps its unwritten buffer and retries at the next flush."""
        self.inc("store_errors")
        if isinstance(exc, StoreLost):
            return  # said once, in one line, as the crawl stops (history/epoch.py)
        logger.error(
            "recrawl: the visit of %s is in the store's buffer, but the store failed after "
            "it (written at the next flush, or counted lost at the end): %s",
            url,
            exc,
        )

    def record(
        self,
        request: Request,
        response: Response,
        fp: bytes,
        *,
        changed: bool | None,
        result: ChangeResult,
        signature: bytes | None = None,
        body: bytes | None = None,
        before: UrlRecord | None = None,
    ) -> UrlRecord:
        """The visit of a response (good, or a 304), with its change observation;
        ``before``: the URL's record before it (given for a good body: with the items
        signal, a refetch's visit is then held for its items' verdict and ``before``
        returned)."""
        cycle = request.meta.get(META_CYCLE)
        visit = Visit(
            fingerprint=fp,
            url=response.url,
            time=self.now(),
            status=response.status,
            changed=changed,
            signature=signature,
            distance=result.distance,
            added=result.added,
            removed=result.removed,
            modified=result.modified,
            attributes=result.attributes,
            size=len(response.body),
            etag=header(response, "ETag"),
            last_modified=header(response, "Last-Modified"),
            request=self.request_dict(request),
            body=body,
            headers=_headers_to_dict(response.headers) if body is not None else None,
            cycle=cycle,
        )
        observations = self.observations
        if (
            observations is not None
            and before is not None
            and changed is not None
            and self.arrived is None  # a response recorded late: the spider had it already
        ):
            request.meta[META_HELD] = observations.hold(request, visit)
            self.accepted = True  # ours to record, whatever the store does now
            rec = before
        else:
            rec = self.store_visit(visit)
        request.meta[META_ITEMS_PAGE] = rec.id
        if response.status == 200:  # its server's clock, its Last-Modified (last_modified.py)
            self.modified.fetched(
                rec.id,
                response.url,
                self.cycle_of(request),
                response.headers,
                first=rec.n == 0 and META_HELD not in request.meta,  # held: a refetch
            )
        if (
            request.meta.get("is_start_request")
            and META_KIND not in request.meta
            and rec.id not in self._start_ids
        ):
            # a start URL: fetched on the spider's say-so, never the budget's waste
            self._start_ids.add(rec.id)
            cycle_log.note_start_urls(self.store, [rec.id])
        return rec

    def bad(
        self,
        request: Request,
        url: str,
        status: int,
        fp: bytes,
        rec: UrlRecord | None,
        *,
        gone: bool,
    ) -> None:
        """The visit of an error response: gone (404, 410), or an error (5xx, other 4xx);
        no change observation."""
        self.store_visit(
            Visit(
                fingerprint=fp,
                url=url,
                time=self.now(),
                status=status,
                gone=gone,
                request=self.request_dict(request),
                cycle=request.meta.get(META_CYCLE),
            )
        )
        self.inc("gone" if gone else "errors")
        self.count(request, first(rec), "gone" if gone else "errors")

    def failed(self, request: Request) -> None:
        """A failed download: one more failed cycle (history/state.py: fold_failure), and
        the URL gone when that makes RECRAWL_MAX_FAILURES in a row."""
        fp = self.crawler.request_fingerprinter.fingerprint(request)
        rec = self.store.get(fp, signature=False)
        cycle = self.cycle_of(request)
        # retries within one cycle are one failure: the store's own rule
        failures = (
            1 if rec is None else fold_failure(rec.failures, rec.last_failure_cycle, 0, cycle)[0]
        )
        gone = 0 < self.max_failures <= failures and not (rec is not None and rec.gone)
        self.store_visit(
            Visit(
                fingerprint=fp,
                url=request.url,
                time=self.now(),
                status=0,
                gone=gone,
                request=self.request_dict(request),
                cycle=cycle,
            )
        )
        self.inc("errors")
        self.inc("failed")
        self.count(request, first(rec), "failed", cycle=cycle, gone=gone)
        if gone:
            self.inc("gone_after_failures")
            logger.info(
                "recrawl: %s failed to download in %d cycles in a row: marked gone "
                "(RECRAWL_MAX_FAILURES = %d)",
                request.url,
                failures,
                self.max_failures,
            )

    def request_dict(self, request: Request) -> dict[str, Any] | None:
        """The request to re-issue later: as the spider made it, before the downloader
        middlewares (stored_request.py), with the callbacks' names; None (the store
        keeps the stored one) for a recrawl rebuilt from it, which would store the same."""
        if request.meta.get(META_REBUILT) == id(request):  # this very request, no copy
            return None
        spider = getattr(self.crawler, "spider", None)
        try:
            d = request_to_dict(request, spider)
        except ValueError as exc:
            if not self._unstorable_warned:
                self._unstorable_warned = True
                logger.warning(
                    "recrawl: cannot store %s for later recrawls (%s); recrawls of such URLs "
                    "use the spider's default callback",
                    request,
                    exc,
                )
            return {"url": request.url, "method": request.method}
        d = self.stored_requests.stored(d, request, downloaded=True, volatile=_VOLATILE)
        drop_ours(d, request)
        return d
