"""The recording downloader middleware: validators out, change detection and history in.

Sits at 585 in ``DOWNLOADER_MIDDLEWARES`` (the add-on puts it there): below
``HttpCompressionMiddleware`` (590), so it sees decoded bodies, and below
``RedirectMiddleware`` (600), so a redirect is recorded under the URL that
finally answered. Per response it

* answers a 304 to *our* conditional request with the stored copy of the
  body, so callbacks and link extraction still run (as HttpCacheMiddleware's
  RFC2616 policy does; Heritrix loses outlinks behind 304s), and counts it as
  an unchanged visit without touching the stored signature (comparing a later
  body against a signature refreshed from a 304 is apache/stormcrawler#418);
  a 304 with no stored copy behind it is no observation: the URL is fetched
  again, once, without validators (``recrawl/304_without_copy``);
* compares any other good body with the stored signature, records the visit,
  and puts the :class:`~scrapy_recrawl.change.ChangeResult` in
  ``response.meta["recrawl"]``;
* flags each good response ``recrawl:new``, ``recrawl:changed``,
  ``recrawl:unchanged`` or ``recrawl:not_modified`` (Scrapy's "Crawled" log lines
  show it) and, with ``RECRAWL_SKIP_UNCHANGED = "all"``, ignores an unchanged one
  once recorded (skip.py);
* marks 404/410 gone, and records 5xx, other 4xx and download errors without
  counting them as change observations; a download that fails (no response:
  refused, DNS, timeout, over ``DOWNLOAD_MAXSIZE``, dropped below this middleware)
  is a failed visit: the URL is backed off for 1, 2, 4 ... cycles (core/selection.py)
  and gone after ``RECRAWL_MAX_FAILURES`` failed cycles in a row;
* flushes a buffering store every ``RECRAWL_FLUSH_SECONDS`` while the spider is
  open, responses or not, so a SIGKILL loses at most that window of visits;
* holds the responses that arrive while the store does not answer (a Redis
  restarting) and records them, in order, once it does (held_visits.py: at most
  ``RECRAWL_FLUSH_EVERY``); those it could not record are said lost in one line when
  the store closes, and ``scrapy crawl`` exits 1.

Only the spider's own pages enter the history (:mod:`scrapy_recrawl.scope`): non-GET
requests, ``meta["dont_recrawl"]``, ``callback=NO_CALLBACK`` (robots.txt), the
sitemaps a ``SitemapSpider`` reads and responses from Scrapy's HTTP cache pass
untouched, and under ``scrapy shell`` / ``fetch`` / ``parse`` the middleware is off.
``RECRAWL_ENABLED = False`` leaves the middleware out (NotConfigured).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Headers, Response
from scrapy.responsetypes import responsetypes
from twisted.internet import task

from .boilerplate_pairs import PairFetcher
from .change import ChangeDetector, ChangeResult, Signature, SignatureVersionError
from .core.meta import (
    FLAG_CHANGED,
    FLAG_NEW,
    FLAG_NOT_MODIFIED,
    FLAG_UNCHANGED,
    META_CYCLE,
    META_KIND,
    META_RESULT,
)
from .core.plugins import BagKeeper
from .cycle_summary import CycleTally, tally_for_crawler
from .held_visits import Held, HeldVisits
from .history import (
    FlushFailed,
    HistoryStore,
    HistoryStoreError,
    StoredBody,
    StoreLost,
    StoreRefused,
    UrlRecord,
    Visit,
    cycle_log,
)
from .history.state import fold_failure, gone_status
from .hubs import META_HUB_PAGE, hubs_for_crawler
from .last_modified import tally_for_crawler as last_modified_tally
from .plugins import plugins_for_crawler, scorer_for_crawler
from .runtime import before_close, store_for_crawler
from .scope import not_a_page, off_reason, warn_http_cache
from .settings import RecrawlSettingError, get
from .skip import skip_mode, unchanged
from .startup import check_settings, enabled, startup_failure, watch_failed_close
from .stored_request import VOLATILE_META, StoredRequests

logger = logging.getLogger(__name__)

#: meta key set when this middleware added the conditional headers
_META_CONDITIONAL = "_recrawl_conditional"
#: meta key: id() of the request this middleware let through to the download, so an
#: IgnoreRequest for it was raised below (a failed download), not by robots.txt or
#: the offsite filter above (which stop it before it reaches this middleware)
_META_SENT = "_recrawl_sent"
#: meta key of the one re-fetch, without validators, after a 304 with no stored copy
_META_REFETCH = "_recrawl_refetch"
#: meta keys set while downloading: not part of the request to re-issue later
_VOLATILE_META = VOLATILE_META | {_META_CONDITIONAL, _META_SENT, _META_REFETCH}
# Headers of a stored body that would lie about it when it is handed out again.
_DROPPED_HEADERS = {"content-length", "content-encoding", "transfer-encoding", "set-cookie"}
_NOT_OBSERVED = ChangeResult(False, 0, 0, 0, 0, 0)


def _header(response: Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def _headers_to_dict(headers: Headers) -> dict[str, list[str]]:
    return {
        k.decode("latin-1"): [v.decode("latin-1") for v in vs]
        for k, vs in headers.items()
        if k.decode("latin-1").lower() not in _DROPPED_HEADERS
    }


def _first(rec: UrlRecord | None) -> bool:
    """Whether a visit is the URL's first, by its record before the visit."""
    return rec is None or rec.last_visit_cycle < 0


class RecrawlMiddleware:
    """Record every visit's change observation in the history store (module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.conditional_get: bool = get(settings, "RECRAWL_CONDITIONAL_GET", bool)
        self.max_body_bytes: int = get(settings, "RECRAWL_MAX_PARSE_BYTES", int)
        self.skip_all = skip_mode(settings) == "all"
        self.detector = ChangeDetector.from_settings(settings)
        self._too_deep_seen = 0  # detector.too_deep already counted in the stats
        self.max_failures: int = get(
            settings,
            "RECRAWL_MAX_FAILURES",
            int,
            lambda v: v >= 0,
            "a number of failed cycles >= 0 (0: never gone for failures)",
        )
        self.flush_seconds: float = get(
            settings, "RECRAWL_FLUSH_SECONDS", (int, float), lambda v: v >= 0, "a number >= 0"
        )
        #: the idle flush's clock (Twisted's IReactorTime; None: the reactor): a test may
        #: set a ``twisted.internet.task.Clock`` before the spider opens
        self.clock: Any = None
        self._flusher: task.LoopingCall | None = None
        #: responses the store was away for, recorded when it is back (held_visits.py)
        self.held = HeldVisits(
            get(settings, "RECRAWL_FLUSH_EVERY", int, lambda v: v >= 1, "a positive number")
        )
        self._accepted = False  # the store took the visit of the response in hand
        self._arrived: float | None = None  # a held response's arrival, while recorded
        self._away_said = False  # the store's absence said (once per outage)
        self._unpicklable_warned = False
        self.stored_requests = StoredRequests.from_settings(settings)
        self.bags: BagKeeper | None = None
        self.tally: CycleTally | None = None
        self.pairs: PairFetcher | None = None
        # `scrapy shell`, `fetch`, `parse` ...: look at a URL, never write the history
        self.off = off_reason(crawler, building_engine=True)
        if self.off is not None:
            return
        if warn_http_cache(settings):
            # A 304 to our conditional request would be cached and served bare later
            self.conditional_get = False
        # Opened now (the engine is built once the spider is), so an unusable
        # RECRAWL_STORE, or another spider's store, stops the crawl at start-up.
        watch_failed_close(crawler)  # e.g. the store lost mid-crawl: scrapy crawl exits 1
        try:
            self.store: HistoryStore = store_for_crawler(crawler)
        except StoreRefused:
            self.off = "refused"  # said in the log; the spider closes once open
            return
        before_close(crawler, self._at_store_close)
        # A plug-in may keep each version's bag of words beside the store (content-aware
        # prediction: the chi-squared rule needs the previous bag, the D* terminals the last l).
        try:
            plugins = plugins_for_crawler(
                crawler, self.store, scorer_for_crawler(crawler).terminals_needed
            )
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        # this cycle's figures, shared with the scheduler, which sums them up per cycle
        self.tally = tally_for_crawler(crawler)
        # URL ids noted as start URLs (history/cycle_log.py: START_TABLE), once a process
        self._start_ids: set[int] = set()
        # the refetched pages whose callbacks' new links make them hubs (hubs.py)
        self.hubs = hubs_for_crawler(crawler)
        # Last-Modified ages at first fetches and the servers' clocks (last_modified.py)
        self.modified = last_modified_tally(crawler)
        keeper = plugins.bag_keeper
        self.bags = keeper if getattr(keeper, "keeps_bags", False) else None
        if self.bags is not None:
            self.detector.keep_bags = True
        # the site's boilerplate, learned from pairs of fetches (boilerplate_pairs.py)
        try:
            self.pairs = PairFetcher(crawler, self.store, self.detector, self._inc)
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        except HistoryStoreError as exc:
            raise startup_failure(RecrawlSettingError(str(exc))) from None
        crawler.signals.connect(self._start_flusher, signal=signals.spider_opened)
        crawler.signals.connect(self._stop_flusher, signal=signals.spider_closed)

    # -- the idle flush ----------------------------------------------------

    def _start_flusher(self, spider: Spider) -> None:
        """Flush every RECRAWL_FLUSH_SECONDS, responses or not: the store flushes when a
        visit is recorded, and a crawl gone quiet (slow site, long delays) records none."""
        if self.off is not None or self.flush_seconds <= 0 or self._flusher is not None:
            return
        self._flusher = task.LoopingCall(self._flush)
        if self.clock is not None:
            self._flusher.clock = self.clock
        # twice per bound: a visit recorded just after a tick is on disk within the
        # bound, not up to a whole interval after it (tests/test_idle_flush.py measures it)
        self._flusher.start(self.flush_seconds / 2, now=False)

    def _stop_flusher(self, spider: Spider) -> None:
        if self._flusher is not None and self._flusher.running:
            self._flusher.stop()
        self._flusher = None  # the store's close() flushes what is left

    def _flush(self) -> None:
        if self.held and not self._replay():
            return  # still away: a flush would fail the same way (counted once)
        try:
            self.store.flush()
        except HistoryStoreError as exc:
            # the store keeps its buffer; the next tick (or visit) retries
            self._inc("store_errors")
            if isinstance(exc, StoreLost):
                return  # said once, in one line, as the crawl stops (history/epoch.py)
            logger.error("recrawl: could not flush buffered visits: %s", exc)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlMiddleware:
        try:
            if not enabled(crawler.settings):
                raise NotConfigured  # as HttpCacheMiddleware with HTTPCACHE_ENABLED off
            check_settings(crawler.settings)  # once per crawl; the add-on may have done it
            return cls(crawler)
        except (RecrawlSettingError, HistoryStoreError) as exc:
            raise startup_failure(exc) from None  # one line, no traceback, exit 1

    def _fingerprint(self, request: Request) -> bytes:
        return self.crawler.request_fingerprinter.fingerprint(request)

    def _skipped(self, request: Request, response: Response | None = None) -> bool:
        """Not one of the spider's pages (scope.not_a_page), or the middleware is off."""
        if self.off is not None:
            return True
        why = not_a_page(request, response)
        if why is None:
            return False
        if response is not None:  # counted once per response, not per request too
            self._inc(f"not_recorded/{why}")
        return True

    # -- outgoing ----------------------------------------------------------

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if self._skipped(request):
            return None
        if self.pairs is not None and self.pairs.is_pair(request):
            return None  # the second fetch of a pair: unconditional, never recorded
        request.meta[_META_SENT] = id(request)
        if request.meta.pop(_META_CONDITIONAL, False):
            # a copy of our request (redirect, retry): its validators may be another URL's
            del request.headers["If-None-Match"]
            del request.headers["If-Modified-Since"]
        if not self.conditional_get or b"If-None-Match" in request.headers:
            return None
        if request.meta.get(_META_REFETCH):
            return None  # the re-fetch of a 304 with no copy: unconditional
        if b"If-Modified-Since" in request.headers:
            return None  # the spider asked for its own conditional request: leave it be
        try:
            rec = self.store.get(self._fingerprint(request), signature=False)
        except HistoryStoreError:
            return None  # the store away (said when the response comes): no validators
        if rec is None or not rec.has_body or rec.gone or not (rec.etag or rec.last_modified):
            return None
        if rec.etag:
            request.headers["If-None-Match"] = rec.etag
        if rec.last_modified:
            request.headers["If-Modified-Since"] = rec.last_modified
        request.meta[_META_CONDITIONAL] = True
        return None

    # -- incoming ----------------------------------------------------------

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Request:
        if self.pairs is not None and self.pairs.is_pair(request):
            self.pairs.pair_response(request, response)
            return response
        if self._skipped(request, response):
            return response
        return self._attempt(request, response, lambda: self._observe(request, response))

    def _observe(self, request: Request, response: Response) -> Response | Request:
        """Compare a response with the URL's history, record it, flag it (module docstring)."""
        fp = self._fingerprint(request)
        # the (large) stored signature is only compared with a good body's
        rec = self.store.get(fp, signature=200 <= response.status < 300)
        if response.status == 304:
            stored = self.store.body(fp) if rec is not None and rec.has_body else None
            if stored is None:
                return self._no_copy(request, response, fp, rec)
            assert rec is not None  # a stored copy: a known page
            self._note_refetch(request, rec, rec)  # the spider gets the kept copy
            return self._skip(request, self._not_modified(request, response, fp, stored))
        if 200 <= response.status < 300:
            return self._skip(request, self._good(request, response, fp, rec))
        self._bad(
            request,
            response.url,
            response.status,
            fp,
            rec,
            gone=bool(gone_status(response.status)),
        )
        return response

    def process_exception(
        self, request: Request, exception: BaseException, spider: Spider | None = None
    ) -> None:
        if self.pairs is not None and self.pairs.is_pair(request):
            self.pairs.pair_failed(request, exception)
            return None
        if isinstance(exception, IgnoreRequest) and request.meta.get(_META_SENT) != id(request):
            # a component above this middleware chose not to fetch it (robots.txt forbids
            # it, the offsite filter, a user's filter): nothing was tried, nothing recorded
            self._inc("not_recorded/ignored")
            return None
        if not self._skipped(request):
            # no response: refused, DNS, timeout, over DOWNLOAD_MAXSIZE, or dropped below
            self._attempt(request, None, lambda: self._failed(request))
        return None

    # -- the store away: held responses (held_visits.py) ---------------------

    def _attempt(
        self, request: Request, response: Response | None, observe: Callable[[], Any]
    ) -> Any:
        """Record a response (None: a failed download) now, or hold it: behind the ones
        held already (their order is the visits'), or because the store did not take it.
        Returns what the engine gets (the response, or a re-fetch of a bare 304)."""
        if self.held and self._flusher is None:
            self._replay()  # no idle timer (RECRAWL_FLUSH_SECONDS = 0): each arrival retries
        if self.held:
            self._hold(request, response, None)
            return response
        self._accepted = False
        try:
            return observe()
        except HistoryStoreError as exc:
            if self._accepted or isinstance(exc, StoreLost):
                # taken by the store (its flush retries it), or gone with a lost store
                self._store_failed(exc, request.url)
            else:
                self._inc("store_errors")
                self._hold(request, response, exc)
        return response

    def _hold(
        self, request: Request, response: Response | None, exc: HistoryStoreError | None
    ) -> None:
        if exc is not None and not self._away_said:
            self._away_said = True
            logger.error(
                "recrawl: the history store at %s did not answer (%s): the responses "
                "that arrive are held, at most %d (RECRAWL_FLUSH_EVERY), and recorded "
                "when it answers again",
                self.store.location,
                exc,
                self.held.bound,
            )
        if self.held.full:
            self._replay()  # one more try before one is turned away
        if self.held.hold(Held(request, response, self._now())):
            self._inc("visits_held")
            return
        self._inc("visits_lost")
        if self.held.dropped == 1:
            logger.warning(
                "recrawl: %d responses held while the history store at %s is away "
                "(RECRAWL_FLUSH_EVERY): the visit of %s, and of any later response "
                "while it stays away, is not recorded (recrawl/visits_lost)",
                self.held.bound,
                self.store.location,
                request.url,
            )

    def _replay(self) -> bool:
        """Record the held responses, oldest first; True when none is left held."""
        try:
            self.held.replay(self._record_held)
        except HistoryStoreError:
            self._inc("store_errors")  # retried at the next tick
            return False
        if self._away_said:
            self._away_said = False
            logger.warning(
                "recrawl: the history store at %s answers again: the held responses are recorded",
                self.store.location,
            )
        return True

    def _record_held(self, item: Held) -> None:
        """Record one held response as it would have been when it arrived (its time);
        raises when the store did not take it (it stays held)."""
        self._accepted = False
        self._arrived = item.time
        try:
            if item.response is None:
                self._failed(item.request)
            else:
                # what the engine would get (a re-fetch of a bare 304) is too late now
                self._observe(item.request, item.response)
        except IgnoreRequest:
            pass  # RECRAWL_SKIP_UNCHANGED: the spider had the response already
        except HistoryStoreError as exc:
            if not self._accepted:
                raise
            self._store_failed(exc, item.request.url)  # the store's to write now
        finally:
            self._arrived = None
        self._inc("visits_recorded_late")

    def _at_store_close(self) -> int:
        """Before the store closes (history/__init__.py: before_close): record what is
        held; returns how many visits could not be (lost, said with the store's own)."""
        if self.held:
            self._replay()
        if self.held and self.stats is not None:
            self.stats.inc_value("recrawl/visits_lost", len(self.held))
        return self.held.give_up()

    def _store_visit(self, visit: Visit) -> UrlRecord:
        """``store.record(visit)``; the visit is the store's once this returns, or once
        the store raised FlushFailed (its buffer kept: the next flush retries it)."""
        try:
            rec = self.store.record(visit)
        except FlushFailed as exc:
            self._accepted = True
            self._inc("store_errors")
            logger.error(
                "recrawl: could not write buffered visits to the history store (kept, "
                "retried at the next flush): %s",
                exc,
            )
            return exc.record
        self._accepted = True
        return rec

    def _failed(self, request: Request) -> None:
        """A failed download: one more failed cycle (history/state.py: fold_failure), and
        the URL gone when that makes RECRAWL_MAX_FAILURES in a row."""
        fp = self._fingerprint(request)
        rec = self.store.get(fp, signature=False)
        cycle = request.meta.get(META_CYCLE)
        if cycle is None:
            cycle = self.store.cycle
        # retries within one cycle are one failure: the store's own rule
        failures = (
            1 if rec is None else fold_failure(rec.failures, rec.last_failure_cycle, 0, cycle)[0]
        )
        gone = 0 < self.max_failures <= failures and not (rec is not None and rec.gone)
        self._store_visit(
            Visit(
                fingerprint=fp,
                url=request.url,
                time=self._now(),
                status=0,
                gone=gone,
                request=self._request_dict(request),
                cycle=cycle,
            )
        )
        self._inc("errors")
        self._inc("failed")
        self._count(request, _first(rec), "failed", cycle=cycle, gone=gone)
        if gone:
            self._inc("gone_after_failures")
            logger.info(
                "recrawl: %s failed to download in %d cycles in a row: marked gone "
                "(RECRAWL_MAX_FAILURES = %d)",
                request.url,
                failures,
                self.max_failures,
            )

    def _good(
        self, request: Request, response: Response, fp: bytes, rec: UrlRecord | None
    ) -> Response:
        body = response.body
        content_type = _header(response, "Content-Type")
        old = self._old_signature(rec, fp, response.url)
        keep_body = len(body) <= self.max_body_bytes and getattr(self.store, "store_bodies", False)
        if old is not None and old.kind == "deferred":
            if old.content_hash != self.detector.content_hash(body):
                old = self._resolve_deferred(fp, response.url) or old
            new = self.detector.signature(body, response.url, content_type, previous=old)
        elif old is None and keep_body and self.bags is None:
            # first visit of a body the store keeps: sign it only if it ever changes
            new = self.detector.deferred(body)
        else:
            new = self.detector.signature(body, response.url, content_type, previous=old)
        self._count_too_deep()
        old_bags = self.bags.previous(rec.id) if self.bags is not None and rec is not None else []
        ignore = None if self.pairs is None else self.pairs.ignore_for(response.url)
        result = self.detector.compare(
            old, new, old_bag=old_bags[0] if old_bags else None, ignore=ignore
        )
        first = _first(rec)
        saved = self._record(
            request,
            response,
            fp,
            changed=None if old is None else result.changed,
            result=result,
            signature=new.to_bytes(),
            body=body if len(body) <= self.max_body_bytes else None,
        )
        # paper 004: keep this version's bag (a byte-identical body reuses the last one)
        bag = new.bag if new.bag is not None else (old_bags[0] if new is old and old_bags else None)
        if self.bags is not None and bag is not None:
            self.bags.keep(saved.id, bag, old_bags)
        self._inc("visits")
        outcome = None if old is None else "changed" if result.changed else "unchanged"
        self._count(request, first, outcome)
        self._note_refetch(request, rec, saved)
        if first:
            self._inc("new")
        elif outcome is not None:
            self._inc(outcome)
        request.meta[META_RESULT] = result
        if self.pairs is not None and self._arrived is None:  # a held one: too late for a pair
            cycle = request.meta.get(META_CYCLE)
            self.pairs.after_visit(
                request,
                response,
                old,
                new,
                result.changed,
                self.store.cycle if cycle is None else cycle,
            )
        # nothing to compare with (first fetch, or an unreadable old signature): new
        tag = FLAG_NEW if old is None else FLAG_CHANGED if result.changed else FLAG_UNCHANGED
        response.flags.append(tag)  # in place, as HttpCacheMiddleware adds "cached"
        return response

    def _no_copy(
        self, request: Request, response: Response, fp: bytes, rec: UrlRecord | None
    ) -> Response | Request:
        """A 304 with no stored copy behind it (none kept, or a server answering 304 to a
        request without validators) says nothing about a change: fetch the URL once more,
        without validators. A 304 to that too is recorded as a visit, not an observation."""
        self._inc("304_without_copy")
        if not request.meta.get(_META_REFETCH):
            headers = request.headers.copy()
            for name in (b"If-None-Match", b"If-Modified-Since"):
                headers.pop(name, None)
            meta = {
                k: v for k, v in request.meta.items() if k not in (_META_CONDITIONAL, _META_SENT)
            }
            meta[_META_REFETCH] = True
            # the same fetch again, as a retry is: the once-per-cycle rule lets it pass
            # (frontier/base.py: first_fetch) and it is no new URL to budget
            meta.setdefault("retry_times", 0)
            logger.debug("recrawl: %s answered 304 with no stored copy: fetched again", request)
            return request.replace(headers=headers, meta=meta, dont_filter=True)
        logger.warning(
            "recrawl: %s answered 304 to a request without validators: not counted as a "
            "change observation; the spider gets the bare 304",
            response.url,
        )
        self._record(request, response, fp, changed=None, result=_NOT_OBSERVED)
        self._inc("visits")
        self._count(request, _first(rec), None)
        request.meta[META_RESULT] = _NOT_OBSERVED
        return response

    def _not_modified(
        self, request: Request, response: Response, fp: bytes, stored: StoredBody
    ) -> Response:
        # A 304 to our validators, the copy behind them kept: an unchanged observation.
        self._record(request, response, fp, changed=False, result=_NOT_OBSERVED)
        self._inc("visits")
        self._inc("not_modified")
        self._count(request, False, "not_modified")
        request.meta[META_RESULT] = _NOT_OBSERVED
        headers = Headers(stored.headers)
        for name in (b"ETag", b"Last-Modified", b"Date", b"Expires", b"Cache-Control"):
            if name in response.headers:  # RFC 9111 4.3.4: freshen the stored headers
                headers[name] = response.headers[name]
        cls = responsetypes.from_args(headers=headers, url=response.url, body=stored.body)
        return cls(
            url=response.url,
            status=stored.status,
            headers=headers,
            body=stored.body,
            flags=[*response.flags, FLAG_NOT_MODIFIED],
            request=request,
            certificate=response.certificate,
            ip_address=response.ip_address,
            protocol=response.protocol,
        )

    def _skip(self, request: Request, response: Response) -> Response:
        """RECRAWL_SKIP_UNCHANGED = "all": an unchanged page, once recorded, is ignored."""
        if self.skip_all and unchanged(response):
            self._inc("skipped_unchanged")
            raise IgnoreRequest(f"recrawl: {response.url} has not changed")
        return response

    def _bad(
        self,
        request: Request,
        url: str,
        status: int,
        fp: bytes,
        rec: UrlRecord | None,
        *,
        gone: bool,
    ) -> None:
        self._store_visit(
            Visit(
                fingerprint=fp,
                url=url,
                time=self._now(),
                status=status,
                gone=gone,
                request=self._request_dict(request),
                cycle=request.meta.get(META_CYCLE),
            )
        )
        self._inc("gone" if gone else "errors")
        self._count(request, _first(rec), "gone" if gone else "errors")

    def _record(
        self,
        request: Request,
        response: Response,
        fp: bytes,
        *,
        changed: bool | None,
        result: ChangeResult,
        signature: bytes | None = None,
        body: bytes | None = None,
    ) -> UrlRecord:
        rec = self._store_visit(
            Visit(
                fingerprint=fp,
                url=response.url,
                time=self._now(),
                status=response.status,
                changed=changed,
                signature=signature,
                distance=result.distance,
                added=result.added,
                removed=result.removed,
                modified=result.modified,
                attributes=result.attributes,
                size=len(response.body),
                etag=_header(response, "ETag"),
                last_modified=_header(response, "Last-Modified"),
                request=self._request_dict(request),
                body=body,
                headers=_headers_to_dict(response.headers) if body is not None else None,
                cycle=request.meta.get(META_CYCLE),
            )
        )
        if response.status == 200:  # its server's clock, its Last-Modified (last_modified.py)
            cycle = request.meta.get(META_CYCLE)
            self.modified.fetched(
                rec.id,
                response.url,
                self.store.cycle if cycle is None else cycle,
                response.headers,
                first=rec.n == 0,
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

    # -- helpers -----------------------------------------------------------

    def _resolve_deferred(self, fp: bytes, url: str) -> Signature | None:
        """The full signature of the stored body a deferred signature stands for."""
        stored = self.store.body(fp)
        if stored is None:
            return None
        content_type = next(
            (v[0] for k, v in stored.headers.items() if k.lower() == "content-type" and v), None
        )
        return self.detector.signature(stored.body, url, content_type)

    def _old_signature(self, rec: UrlRecord | None, fp: bytes, url: str) -> Signature | None:
        if rec is None or rec.signature is None:
            return None
        try:
            old = Signature.from_bytes(rec.signature)
        except SignatureVersionError:
            # made by another version of the hashing: sign the stored body again
            return self._resolve_deferred(fp, url)
        except ValueError as exc:
            logger.warning(
                "recrawl: stored signature of %s unreadable (%s); starting afresh", url, exc
            )
            return None
        if self.detector.same_rules(old):
            return old
        # made under other signing rules (RECRAWL_IGNORE_XPATHS edited): the kept copy is
        # signed again under today's, so the edit itself is no change; with no copy kept,
        # this visit is the new baseline (recorded without a change observation)
        self._inc("resigned")
        resigned = self._resolve_deferred(fp, url)
        if resigned is None:
            self._inc("rebaselined")
        return resigned

    def _request_dict(self, request: Request) -> dict[str, Any] | None:
        """The request to re-issue later: as the spider made it, before the downloader
        middlewares (stored_request.py), with the callbacks' names."""
        spider = getattr(self.crawler, "spider", None)
        try:
            d = self._to_dict(request, spider)
        except ValueError as exc:
            if not self._unpicklable_warned:
                self._unpicklable_warned = True
                logger.warning(
                    "recrawl: cannot store %s for later recrawls (%s); recrawls of such URLs "
                    "use the spider's default callback",
                    request,
                    exc,
                )
            return {"url": request.url, "method": request.method}
        d = self.stored_requests.stored(d, request, downloaded=True, volatile=_VOLATILE_META)
        if request.meta.get(_META_CONDITIONAL):
            d["headers"] = {
                k: v
                for k, v in d["headers"].items()
                if k.lower() not in (b"if-none-match", b"if-modified-since")
            }
        return d

    @classmethod
    def _to_dict(cls, request: Request, spider: Spider | None) -> dict[str, Any]:
        """``request.to_dict(spider=spider)``, without its per-call scan of the spider.

        Scrapy finds a callback's name with inspect.getmembers(spider) on every
        call, which costs more than the rest of recording a visit; a bound method
        of the spider is named by its own ``__name__`` (checked against the spider).
        """
        names = [cls._method_name(spider, f) for f in (request.callback, request.errback)]
        if None in names[:1] or (request.errback is not None and names[1] is None):
            return request.to_dict(spider=spider)  # not a plain spider method: Scrapy decides
        return request.replace(callback=None, errback=None).to_dict() | {
            "callback": names[0],
            "errback": names[1],
        }

    @staticmethod
    def _method_name(spider: Spider | None, func: Any) -> str | None:
        if func is None or isinstance(func, str):
            return func
        name = getattr(func, "__name__", None)
        if (
            spider is not None
            and name is not None
            and getattr(func, "__self__", None) is spider
            and getattr(getattr(spider, name, None), "__func__", None)
            is getattr(func, "__func__", 0)
        ):
            return name
        return None

    def _note_refetch(self, request: Request, before: UrlRecord | None, after: UrlRecord) -> None:
        """A good refetch of a known page: the new links its callback yields count for it
        (hubs.py); its first fetch's links are all new and say nothing."""
        if before is None or _first(before):
            return
        cycle = request.meta.get(META_CYCLE, self.store.cycle)
        gap = max(1, int(cycle) - int(before.last_visit_cycle))
        self.hubs.refetched(after.id, gap)
        request.meta[META_HUB_PAGE] = [after.id, gap]

    def _count(
        self,
        request: Request,
        first: bool,
        outcome: str | None,
        *,
        cycle: int | None = None,
        gone: bool = False,
    ) -> None:
        """One recorded visit in its cycle's figures (cycle_summary.py), in the cycle the
        visit log has it in; ``first``: the URL's first visit (:func:`_first`)."""
        if self.tally is None:
            return
        if cycle is None:
            cycle = request.meta.get(META_CYCLE)
        if cycle is None:
            cycle = self.store.cycle  # as the store records a visit with no cycle
        self.tally.count(request, cycle, first, outcome, gone=gone)

    def _count_too_deep(self) -> None:
        """``recrawl/too_deep``: pages signed since the last call that nest deeper than the
        parser reads (their text past the limit was compared as one hash)."""
        seen = self.detector.too_deep
        if seen != self._too_deep_seen and self.stats is not None:
            self.stats.inc_value("recrawl/too_deep", seen - self._too_deep_seen)
        self._too_deep_seen = seen

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"recrawl/{key}")

    def _now(self) -> float:
        if self._arrived is not None:
            return self._arrived  # a held response: the visit is when it arrived
        # the crawl's wall clock: the shared store's on Redis (cycle_summary.py)
        return self.tally.wall() if self.tally is not None else time.time()

    def _store_failed(self, exc: HistoryStoreError, url: str) -> None:
        # After the store took the visit (a read that followed failed, e.g. a pending
        # record's): it keeps its unwritten buffer and retries at the next flush.
        self._inc("store_errors")
        if isinstance(exc, StoreLost):
            return  # said once, in one line, as the crawl stops (history/epoch.py)
        logger.error(
            "recrawl: the visit of %s is in the store's buffer, but the store failed after "
            "it (written at the next flush, or counted lost at the end): %s",
            url,
            exc,
        )
