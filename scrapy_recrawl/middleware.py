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

RecrawlMiddleware is the Scrapy component (settings, signals, the ``process_*`` hooks);
each job is one collaborator's: the validators out (validators.py), a 304 in
(not_modified.py), a good body's change observation (change_observer.py), a visit
into the store and the cycle's figures (visit_recorder.py), the store away
(held_visits.py). Their log lines keep this module's logger name.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from twisted.internet import task

from .boilerplate_pairs import PairFetcher
from .change import ChangeDetector
from .change_observer import ChangeObserver
from .cycle_summary import CycleTally
from .held_observations import META_HELD
from .held_visits import HeldVisits, StoreAway
from .history import HistoryStore, HistoryStoreError, StoreRefused
from .history.state import gone_status
from .not_modified import NotModified
from .plugins import plugins_for_crawler, scorer_for_crawler
from .runtime import before_close, store_for_crawler
from .scope import not_a_page, off_reason, warn_http_cache
from .settings import RecrawlSettingError, get
from .skip import ignore_unchanged, skip_mode
from .startup import check_settings, enabled, startup_failure, watch_failed_close
from .stored_request import StoredRequests
from .validators import Validators, sent
from .visit_recorder import META_ITEMS_PAGE, VisitRecorder


class RecrawlMiddleware:
    """Record every visit's change observation in the history store (module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        conditional_get: bool = get(settings, "RECRAWL_CONDITIONAL_GET")
        max_body_bytes: int = get(settings, "RECRAWL_MAX_PARSE_BYTES")
        self.skip_all = skip_mode(settings) == "all"
        self.detector = ChangeDetector.from_settings(settings)
        max_failures: int = get(settings, "RECRAWL_MAX_FAILURES")
        self.flush_seconds: float = get(settings, "RECRAWL_FLUSH_SECONDS")
        #: the idle flush's clock (Twisted's IReactorTime; None: the reactor): a test may
        #: set a ``twisted.internet.task.Clock`` before the spider opens
        self.clock: Any = None
        self._flusher: task.LoopingCall | None = None
        #: responses the store was away for, recorded when it is back (held_visits.py)
        self.held = HeldVisits(get(settings, "RECRAWL_FLUSH_EVERY"))
        stored_requests = StoredRequests.from_settings(settings)
        self.tally: CycleTally | None = None
        self.pairs: PairFetcher | None = None
        # `scrapy shell`, `fetch`, `parse` ...: look at a URL, never write the history
        self.off = off_reason(crawler, building_engine=True)
        if self.off is not None:
            return
        if warn_http_cache(settings):
            # A 304 to our conditional request would be cached and served bare later
            conditional_get = False
        # Opened now (the engine is built once the spider is), so an unusable
        # RECRAWL_STORE, or another spider's store, stops the crawl at start-up.
        watch_failed_close(crawler)  # e.g. the store lost mid-crawl: scrapy crawl exits 1
        try:
            self.store: HistoryStore = store_for_crawler(crawler)
        except StoreRefused:
            self.off = "refused"  # said in the log; the spider closes once open
            return
        self.recorder = VisitRecorder(
            crawler, self.store, max_failures=max_failures, stored=stored_requests
        )
        self.away = StoreAway(self.held, self.recorder, self._observe)
        before_close(crawler, self.away.at_store_close)
        try:
            plugins = plugins_for_crawler(
                crawler, self.store, scorer_for_crawler(crawler).terminals_needed
            )
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        self.tally = self.recorder.tally
        self.fingerprint = crawler.request_fingerprinter.fingerprint
        self.validators = Validators(self.store, self.fingerprint, enabled=conditional_get)
        # the site's boilerplate, learned from pairs of fetches (boilerplate_pairs.py)
        try:
            self.pairs = PairFetcher(crawler, self.store, self.detector, self.recorder.inc)
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        except HistoryStoreError as exc:
            raise startup_failure(RecrawlSettingError(str(exc))) from None
        self.observer = ChangeObserver(
            self.store,
            self.detector,
            self.recorder,
            bags=plugins.bag_keeper,  # a plug-in declaring "bag_keeper" in this crawl
            pairs=self.pairs,
            max_body_bytes=max_body_bytes,
        )
        self.recorder.visit_hooks = plugins.visit_hooks  # plug-ins declaring "visit_hook"
        self.not_modified = NotModified(self.recorder)
        crawler.signals.connect(self._start_flusher, signal=signals.spider_opened)
        crawler.signals.connect(self._stop_flusher, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlMiddleware:
        try:
            if not enabled(crawler.settings):
                raise NotConfigured  # as HttpCacheMiddleware with HTTPCACHE_ENABLED off
            check_settings(crawler.settings)  # once per crawl; the add-on may have done it
            return cls(crawler)
        except (RecrawlSettingError, HistoryStoreError) as exc:
            raise startup_failure(exc) from None  # one line, no traceback, exit 1

    # -- the idle flush ----------------------------------------------------

    def _start_flusher(self, spider: Spider) -> None:
        """Flush every RECRAWL_FLUSH_SECONDS, responses or not: the store flushes when a
        visit is recorded, and a crawl gone quiet (slow site, long delays) records none."""
        if self.off is not None or self.flush_seconds <= 0 or self._flusher is not None:
            return
        self._flusher = task.LoopingCall(self.away.tick)
        if self.clock is not None:
            self._flusher.clock = self.clock
        self.away.ticking = True
        # twice per bound: a visit recorded just after a tick is on disk within the
        # bound, not up to a whole interval after it (tests/test_idle_flush.py measures it)
        self._flusher.start(self.flush_seconds / 2, now=False)

    def _stop_flusher(self, spider: Spider) -> None:
        if self._flusher is not None and self._flusher.running:
            self._flusher.stop()
        self._flusher = None  # the store's close() flushes what is left
        self.away.ticking = False  # each arrival retries what is held

    # -- the Scrapy hooks --------------------------------------------------

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

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if self._skipped(request):
            return None
        if self.pairs is not None and self.pairs.is_pair(request):
            return None  # the second fetch of a pair: unconditional, never recorded
        self.validators.outgoing(request)
        return None

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Request:
        # set for one download by the recorder: a request made with another response's
        # meta (Request(url, meta=response.meta)) must not pass as that page, recorded or not
        request.meta.pop(META_ITEMS_PAGE, None)
        request.meta.pop(META_HELD, None)
        pairs = self.pairs
        if pairs is not None and pairs.is_pair(request):
            pairs.pair_response(request, response)
            return response
        if self._skipped(request, response):
            return response
        return self.away.attempt(request, response)

    def process_exception(
        self, request: Request, exception: BaseException, spider: Spider | None = None
    ) -> None:
        if self.pairs is not None and self.pairs.is_pair(request):
            self.pairs.pair_failed(request, exception)
            return None
        if isinstance(exception, IgnoreRequest) and not sent(request):
            # a component above this middleware chose not to fetch it (robots.txt forbids
            # it, the offsite filter, a user's filter): nothing was tried, nothing recorded
            self._inc("not_recorded/ignored")
            return None
        if not self._skipped(request):
            # no response: refused, DNS, timeout, over DOWNLOAD_MAXSIZE, or dropped below
            self.away.attempt(request, None)
        return None

    # -- a response observed (now, or held and recorded late) ----------------

    def _observe(self, request: Request, response: Response) -> Response | Request:
        """Compare a response with the URL's history, record it, flag it (module docstring)."""
        fp = self.fingerprint(request)
        status = response.status
        # the (large) stored signature is only compared with a good body's
        rec = self.store.get(fp, signature=200 <= status < 300)
        if status == 304:
            stored = self.store.body(fp) if rec is not None and rec.has_body else None
            if stored is None:
                return self.not_modified.without_copy(request, response, fp, rec)
            assert rec is not None  # a stored copy: a known page
            self.recorder.note_refetch(request, rec, rec)  # the spider gets the kept copy
            return self._skip(self.not_modified.with_copy(request, response, fp, stored))
        if 200 <= status < 300:
            return self._skip(self.observer.good(request, response, fp, rec))
        self.recorder.bad(request, response.url, status, fp, rec, gone=bool(gone_status(status)))
        return response

    def _skip(self, response: Response) -> Response:
        """RECRAWL_SKIP_UNCHANGED = "all": an unchanged page, once recorded, is ignored."""
        if self.skip_all:
            return ignore_unchanged(response, self.recorder.inc)
        return response

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"recrawl/{key}")
