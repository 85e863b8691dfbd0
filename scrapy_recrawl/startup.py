"""Once per crawl, before the first request: every ``RECRAWL_*`` setting checked, and
how a failure is told (docs/project-settings.md).

The add-on's ``update_settings``, the middleware and the scheduler all call
:func:`check_settings`; the first call does the work (misspelled names and
deprecated values are warned about once), the others reuse its outcome.

A failure a user causes is one log line naming the setting (or the store) and
the value, and a non-zero exit status of ``scrapy crawl``:

* **at start-up** the component raises, and Scrapy counts a crawl whose start
  raised as failed (``CrawlerProcess.bootstrap_failed``: exit status 1). The
  error was logged by :func:`startup_failure` as that one line, so the traceback
  Scrapy's runner would have printed for the same exception -- asyncio's "Task
  exception was never retrieved", Twisted's "Unhandled error in Deferred" -- is
  dropped by a logging filter that recognises it (and only it);
* **mid-crawl**, a spider the package closes for an error (a close reason in
  :data:`FAILED_CLOSE_REASONS`, e.g. ``recrawl_redis_unavailable``) is reported
  to Scrapy as a failed crawl the one way Scrapy has: both of its runners set
  ``bootstrap_failed`` when a crawler ends without a spider, so once the engine
  has stopped (the last step of a crawl) the crawler's ``spider`` is cleared.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from .history.epoch import STORE_LOST_REASON, on_store_loss
from .runtime import CrawlerRuntime, fail_crawl
from .settings import DEFAULTS, RecrawlSettingError, get, unknown_settings

logger = logging.getLogger(__name__)

#: Close reasons that mean "this crawl failed": ``scrapy crawl`` exits non-zero.
FAILED_CLOSE_REASONS = frozenset(
    {
        "recrawl_redis_unavailable",
        "recrawl_store_refused",
        "recrawl_enqueue_failed",  # scheduler.py: a request could not be queued
        STORE_LOST_REASON,
    }
)

#: the attribute of a settings object its check's outcome is kept in: a weak reference
#: to the settings checked (a copy of them is checked anew) and the RecrawlSettingError
#: they gave, if any
_CHECKED_ATTRIBUTE = "_recrawl_checked"


def enabled(settings: Any) -> bool:
    """``RECRAWL_ENABLED``: False turns the whole package off for this crawl."""
    return bool(get(settings, "RECRAWL_ENABLED"))


def check_settings(settings: Any) -> None:
    """Warn about unknown ``RECRAWL_*`` names and deprecated values, then check every
    value; once per settings object (per crawl: its outcome is kept on the settings
    object itself, nowhere else). Raises RecrawlSettingError."""
    known = getattr(settings, _CHECKED_ATTRIBUTE, None)
    if known is not None:
        ref, failure = known
        if ref() is settings:
            if failure is not None:
                raise failure
            return
    failure = None
    try:
        _warn(settings)
        _check(settings)
    except RecrawlSettingError as exc:
        failure = exc
    try:
        # kept with the settings (one crawl's): the add-on, the middleware and the
        # scheduler each ask, and only the first checks
        setattr(settings, _CHECKED_ATTRIBUTE, (weakref.ref(settings), failure))
    except (AttributeError, TypeError):
        pass  # a plain dict (tests, offline tools): not remembered, checked at every call
    if failure is not None:
        raise failure


def unknown_setting_messages(settings: Any) -> list[str]:
    """One message per misspelled ``RECRAWL_*`` name, with the closest valid one (the
    offline commands print them: their logging is off)."""
    return unknown_settings(_names(settings), _known_names(settings))


def _warn(settings: Any) -> None:
    from .core.budget import parse_budget
    from .core.plugins import warn_problems
    from .plugins import plugin_classes

    for message in unknown_setting_messages(settings):
        logger.warning("recrawl: %s", message)
    try:
        warn_problems(plugin_classes(settings))  # what a listed class declares, checked
    except RecrawlSettingError:
        pass  # a bad RECRAWL_PLUGINS path: the check says it (_check)
    _, deprecated = parse_budget(get(settings, "RECRAWL_BUDGET"))
    if deprecated:
        logger.warning("recrawl: %s", deprecated)


def _check(settings: Any) -> None:
    from .change import ChangeDetector
    from .core.cycle import CycleConfig
    from .plugin_terminals import scorer_from_settings
    from .plugins import check_plugins
    from .skip import skip_mode
    from .stored_request import StoredRequests

    for name in DEFAULTS:
        get(settings, name)  # each string of the kind it should be (settings.KINDS)
    CycleConfig.from_settings(settings)
    check_plugins(settings, scorer_from_settings(settings).terminals_needed)
    ChangeDetector.from_settings(settings)
    on_store_loss(settings)
    skip_mode(settings)
    StoredRequests.from_settings(settings)


def _names(settings: Any) -> list[str]:
    try:
        return [str(name) for name in settings]
    except TypeError:
        return []


def _known_names(settings: Any) -> set[str]:
    """DEFAULTS, and the settings a listed plug-in declares (``setting_names``)."""
    from .plugins import plugin_classes

    known = set(DEFAULTS)
    try:
        classes = plugin_classes(settings)
    except RecrawlSettingError:
        return known  # reported by the check itself
    for cls in classes:
        known.update(getattr(cls, "setting_names", ()))
    return known


# -- failures -----------------------------------------------------------------------


def startup_failure(exc: BaseException, *, logged: bool = False) -> BaseException:
    """Log ``exc`` as the one line the user sees (unless the raiser ``logged`` it),
    once, and mark it so no traceback of it follows; returns it, to be raised
    (Scrapy then fails the crawl: exit 1)."""
    if not getattr(exc, "_recrawl_reported", False):
        if not logged:
            logger.error("recrawl: %s", exc)
        try:
            exc._recrawl_reported = True  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover -- every exception class we raise takes it
            pass
        _FILTER.keep(exc)
    _install_filter()
    return exc


def reported(exc: BaseException | None) -> bool:
    """``exc``, or an exception it was raised while handling, was told by startup_failure()."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if getattr(exc, "_recrawl_reported", False):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class _DropReported(logging.Filter):
    """Drops a log record whose exception was already told as one line."""

    def __init__(self) -> None:
        super().__init__()
        self._told: list[BaseException] = []

    def keep(self, exc: BaseException) -> None:
        """Keep ``exc`` for the life of the process. Twisted says a Deferred's unhandled
        failure when the Deferred is garbage-collected -- Scrapy's Twisted runner leaves
        the failed crawl's Deferred unhandled -- as text with its traceback, through
        Scrapy's bridge (no exception on the record for :meth:`filter` to recognise) or,
        at the interpreter's exit, straight to stderr. The told exception's traceback
        holds that Deferred: kept, it is never collected, so never said. One per crawl
        that failed to start; the process then ends (``scrapy crawl`` exits 1)."""
        self._told.append(exc)

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and reported(record.exc_info[1]))


_FILTER = _DropReported()


def _install_filter() -> None:
    # asyncio logs a task's unretrieved exception on its own logger; Scrapy bridges
    # Twisted's log (an unhandled Deferred error) to the "twisted" logger
    for name in ("asyncio", "twisted"):
        log = logging.getLogger(name)
        if _FILTER not in log.filters:
            log.addFilter(_FILTER)


def watch_failed_close(crawler: Any) -> None:
    """Make ``scrapy crawl`` exit non-zero if this crawl's spider is closed for an error."""
    from scrapy import signals

    runtime = CrawlerRuntime.of(crawler)
    if runtime.failed_close_watched:
        return
    runtime.failed_close_watched = True

    def spider_closed(spider: Any, reason: str) -> None:
        if reason not in FAILED_CLOSE_REASONS:
            return
        engine = getattr(crawler, "engine", None)
        if engine is not None and not engine.running:
            # closed while the engine was opening the spider (CloseSpider from open):
            # the engine never started, so no engine_stopped will come; nothing reads
            # crawler.spider any more once its spider is closed
            engine_stopped()
            return
        # connected now, so it runs after every other engine_stopped handler
        crawler.signals.connect(engine_stopped, signal=signals.engine_stopped, weak=False)

    def engine_stopped() -> None:
        fail_crawl(crawler)

    crawler.signals.connect(spider_closed, signal=signals.spider_closed, weak=False)
