"""One runtime per crawler: everything a crawl shares between its components.

The recording middleware, the recrawl scheduler (and its frontier) and the add-on are
built by Scrapy apart, each from the crawler; what they must share is kept on one
:class:`CrawlerRuntime`, built the first time one of them asks
(:meth:`CrawlerRuntime.of`) and kept as an attribute of the crawler, as Scrapy keeps
``crawler.stats`` and ``crawler.signals``. Two crawlers in one process (two spiders
run by one ``CrawlerProcess``) have two runtimes and share nothing; nothing is kept in
a module global.

The runtime owns:

* the crawl's one **history store** (:meth:`CrawlerRuntime.store`): opened for the
  spider on first use, claimed for it (history/ownership.py), watched for loss
  (store_loss.py), closed once -- by :meth:`CrawlerRuntime.release_store` (the
  scheduler's ``close()``) or when the engine stops -- after the hooks of
  :meth:`CrawlerRuntime.before_close`; or the refusal it met (another spider's store);
* the parts the modules above it keep per crawl (:meth:`CrawlerRuntime.part`): the
  **scorer** (``RECRAWL_SCORER`` parsed once) and the plug-ins (plugins.py), the cycle
  tally (cycle_summary.py), the hubs' tally (hubs.py), the Last-Modified tally
  (last_modified.py);
* whether the crawl is **off** (scope.py: a Scrapy command that only looks at a URL),
  decided once;
* the glue that makes ``scrapy crawl`` exit 1 (:func:`fail_crawl`) or closes a spider
  whose store was refused (:func:`close_refused`).

The modules above keep their accessors (``tally_for_crawler(crawler)``,
``plugins_for_crawler(...)``, ...) as thin functions over it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.utils.misc import load_object

from . import history
from .history import SCHEMA_VERSION, HistoryStore, HistoryStoreError
from .history.ownership import StoreRefused, claim_store, describe, warn_old_default
from .store_loss import watch_store_loss

logger = logging.getLogger("scrapy_recrawl.history")

#: the crawler attribute the runtime is kept in
ATTRIBUTE = "recrawl_runtime"

#: the close reason of a spider whose store belongs to another spider (exit 1)
STORE_REFUSED_REASON = "recrawl_store_refused"

P = TypeVar("P")

_UNDECIDED = object()


class CrawlerRuntime:
    """What one crawler's components share (module docstring). Built lazily: making it
    reads nothing of the crawler, so the first component to ask may be built before
    the spider or the engine exist."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self._store: HistoryStore | None = None
        #: the refusal met when opening the store: raised again at every later ask
        self.refused: StoreRefused | None = None
        #: closes the open store once (released early, or when the engine stops)
        self._closer: Callable[..., None] | None = None
        self._before_close: list[Callable[[], int]] = []
        self._parts: dict[type, Any] = {}
        self._off: Any = _UNDECIDED
        #: startup.watch_failed_close() connected its handlers for this crawler
        self.failed_close_watched = False

    @classmethod
    def of(cls, crawler: Any) -> CrawlerRuntime:
        """``crawler``'s runtime, built on first use and kept on the crawler."""
        runtime = getattr(crawler, ATTRIBUTE, None)
        if not isinstance(runtime, CrawlerRuntime):
            runtime = cls(crawler)
            setattr(crawler, ATTRIBUTE, runtime)
        return runtime

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawlerRuntime:
        """As Scrapy builds a component: the crawler's one runtime (:meth:`of`)."""
        return cls.of(crawler)

    # -- parts the modules above keep per crawl ------------------------------

    def part(self, cls: type[P], make: Callable[[], P] | None = None) -> P:
        """The crawl's one ``cls`` (the scorer, the plug-ins, a tally), made on first use
        by ``make`` (default: ``cls()``) and kept for the crawler's life. The module that
        defines a part says how it is made (its accessor: ``scorer_for_crawler``,
        ``tally_for_crawler``, ...): the runtime imports none of them."""
        found = self._parts.get(cls)
        if found is None:
            found = self._parts[cls] = make() if make is not None else cls()
        return found  # type: ignore[no-any-return]

    def off_reason(self, decide: Callable[[], str | None]) -> str | None:
        """Why the crawl neither reads nor writes the history (scope.py), decided once by
        ``decide`` (the first component that asks), then the same for every other."""
        if self._off is _UNDECIDED:
            self._off = decide()
        return self._off  # type: ignore[no-any-return]

    # -- the history store -----------------------------------------------------

    def store(self, spider: Any = None) -> HistoryStore:
        """The one open store shared by this crawler's scheduler and middleware.

        Opened on first use, for ``spider`` (default: ``crawler.spider``; the scheduler
        passes the spider it is opened with), whose name picks the default store and
        must own it (history/ownership.py). Without the recrawl scheduler (middleware
        alone), opening also starts a new cycle: one ``scrapy crawl`` = one cycle. The
        recrawl scheduler (``manages_recrawl_cycles``) starts cycles itself, so a
        JOBDIR resume can continue the cycle it interrupted. Closed (flushed, its lock
        released) by :meth:`release_store` (the recrawl scheduler's ``close()``), else
        when the engine stops; opened anew if asked for again after that.

        Another spider's store raises :class:`StoreRefused` (said once, in one log line)
        and closes the spider as soon as it is open, with the finish reason
        ``recrawl_store_refused``, before anything is fetched: the callers then stand
        aside.
        """
        if self.refused is not None:
            raise self.refused
        if self._store is not None:
            return self._store
        crawler = self.crawler
        spider = spider if spider is not None else getattr(crawler, "spider", None)
        if spider is None:
            raise RuntimeError("the history store is opened for a spider: none is known yet")
        settings = crawler.settings
        # looked up in its module at call time: a test suite may point it at its own stores
        store = history.open_store(settings, spider.name)
        history.check_directory(store, spider.name, settings)
        store.open()
        warn_old_default(store, spider.name, settings)
        try:
            claim_store(store, spider.name, settings)
        except StoreRefused as exc:
            store.close()
            self.refused = exc
            crawler.signals.connect(close_refused, signal=signals.spider_opened, weak=False)
            raise
        _log_store(store, spider.name)
        # a shared store lost mid-crawl stops it (or goes on: RECRAWL_ON_STORE_LOSS)
        stop_watch = watch_store_loss(crawler, store)
        scheduler = load_object(settings["SCHEDULER"])
        if not getattr(scheduler, "manages_recrawl_cycles", False):
            store.advance_cycle()
        self._store = store
        closer = self._closer = self._make_closer(store, stop_watch)
        crawler.signals.connect(closer, signal=signals.engine_stopped, weak=False)
        return store

    def release_store(self) -> None:
        """Close the store now, if one is open: flush it and release its lock, so another
        store object (the next scheduler on the same JOBDIR, another process) may open
        it. The recrawl scheduler's ``close()`` calls it: Scrapy's scheduler contract is
        that ``close()`` releases what ``open()`` took, and the engine calls it after the
        downloader and the scraper are closed (nothing records a visit after it). A visit
        that cannot be written is said lost in one line and ``scrapy crawl`` exits 1, as
        at the engine's stop; a later :meth:`store` opens the store again."""
        if self._closer is not None:
            self._closer(early=True)

    def before_close(self, hook: Callable[[], int]) -> None:
        """Run ``hook`` once, just before the store is closed, while it can still take
        visits: the middleware records there the responses it held while the store was
        away, and returns how many visits it could not record (lost). They are said with
        the store's own unwritten ones, in the one line of the closer."""
        self._before_close.append(hook)

    def _make_closer(
        self, store: HistoryStore, stop_watch: Callable[[], None]
    ) -> Callable[..., None]:
        """Close the store once (released early or when the engine stops); visits it still
        cannot write (a full disk, a store gone read-only), and responses the crawl could
        not record while the store was away (:meth:`before_close`), are said lost in one
        line with their count (stat ``recrawl/visits_lost``), and ``scrapy crawl`` exits
        1."""
        crawler = self.crawler

        def close(early: bool = False) -> None:
            if self._closer is not close:
                return  # closed already (released, then the engine stopped)
            self._closer = None
            if self._store is store:
                self._store = None
            stop_watch()
            hooks, self._before_close = self._before_close, []
            unrecorded = sum(hook() for hook in hooks)
            pending = store.buffered_visits
            why: str | None = None
            try:
                store.close()
            except HistoryStoreError as exc:
                why = str(exc)
            else:
                pending = 0
            if why is None and not unrecorded:
                return
            if why is None:
                why = f"the history store at {store.location} was away when they arrived"
            lost = pending + unrecorded
            stats = getattr(crawler, "stats", None)
            if stats is not None and pending:
                stats.inc_value("recrawl/visits_lost", pending)  # the middleware counts its own
            held = (
                f" ({unrecorded} of them responses that arrived while the store was away)"
                if unrecorded and pending
                else ""
            )
            logger.error(
                "recrawl: %d visit(s) recorded by this crawl could not be written and are "
                "lost%s: %s",
                lost,
                held,
                why,
            )
            if not early:
                fail_crawl(crawler)
                return
            # released by the scheduler's close(): the spider_closed handlers still
            # come, and fail_crawl() is for after them (connected last, runs last)
            crawler.signals.connect(
                lambda *a, **kw: fail_crawl(crawler), signal=signals.spider_closed, weak=False
            )

        return close


def _log_store(store: HistoryStore, spider: str) -> None:
    """Which history this crawl continues, said once at start: a crawl pointed at the
    wrong store otherwise only shows itself as an unexpected full warm-up."""
    logger.info(
        "recrawl: history store %s for spider %r: %d URLs known, cycle %d, schema version %d",
        describe(store),
        spider,
        len(store),
        store.cycle,
        SCHEMA_VERSION,  # open() migrated it to this one or refused it
    )


def fail_crawl(crawler: Any) -> None:
    """Make ``scrapy crawl`` exit with status 1 once this crawl is over: Scrapy's runners
    count a crawler left with no spider as failed (``bootstrap_failed``). Called only
    once the spider is closed (startup.watch_failed_close, the store's closer above):
    nothing reads ``crawler.spider`` after that."""
    logger.debug("recrawl: the crawl failed; scrapy crawl exits with status 1")
    crawler.spider = None


def close_refused(spider: Any = None) -> None:
    """A ``spider_opened`` handler that closes the spider at once with the reason
    ``recrawl_store_refused`` (startup.FAILED_CLOSE_REASONS: exit 1): Scrapy (2.13+)
    closes a spider whose ``spider_opened`` handler raises CloseSpider, before its start
    requests -- a clean stop with a reason, not a traceback."""
    raise CloseSpider(STORE_REFUSED_REASON)


# -- the accessors the crawl's components call -----------------------------------


def store_for_crawler(crawler: Any, spider: Any = None) -> HistoryStore:
    """``crawler``'s one open store (:meth:`CrawlerRuntime.store`)."""
    return CrawlerRuntime.of(crawler).store(spider)


def release_store(crawler: Any) -> None:
    """Close ``crawler``'s store now, if it has one open (:meth:`CrawlerRuntime.release_store`)."""
    CrawlerRuntime.of(crawler).release_store()


def before_close(crawler: Any, hook: Callable[[], int]) -> None:
    """Run ``hook`` just before ``crawler``'s store closes (:meth:`CrawlerRuntime.before_close`)."""
    CrawlerRuntime.of(crawler).before_close(hook)
