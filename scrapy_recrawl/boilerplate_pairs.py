"""Learning a site's boilerplate as the crawl goes (change/boilerplate.py has the rule).

The recording middleware owns one :class:`PairFetcher`. When a page of a section that has
not been learned yet is fetched, the fetcher downloads it once more at once (through the
engine, like ``scrapy shell``'s ``fetch``: the downloader middlewares run, the scheduler,
the budget and the spider's callbacks never see it), compares the two responses and keeps
what differed as that section's boilerplate, in the store's side storage (table
``boilerplate``, one record per section: both backends, every process of a crawl reads
it at start-up). A few requests per section, once per store: ``recrawl/boilerplate/*``
stats count them apart from the budget.

``RECRAWL_LEARN_BOILERPLATE = False`` turns it off (no extra request; what was learned
before is still applied unless the store is reset: ``scrapy recrawl-reset --boilerplate``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro

from .change import BoilerplateModel, ChangeDetector, Ignore, Signature
from .change.boilerplate import TABLE
from .change.detector import META_WATCH_CSS, META_WATCH_XPATHS
from .core.meta import META_PAIR
from .history import HistoryStore, HistoryStoreError, StoreLost
from .settings import get

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    url: str
    signature: Signature | None  # the first fetch's, when it was signed in full
    body: bytes  # else its body and content type, signed when the second comes back
    content_type: str | None


class PairFetcher:
    """Fetches confirmation pairs and keeps the learned sections (module docstring)."""

    def __init__(
        self,
        crawler: Any,
        store: HistoryStore,
        detector: ChangeDetector,
        inc: Callable[[str], None],
    ) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.store = store
        self.detector = detector
        self._inc = inc
        self.learn: bool = get(settings, "RECRAWL_LEARN_BOILERPLATE")
        pairs: int = get(settings, "RECRAWL_BOILERPLATE_PAIRS")
        self.model = BoilerplateModel(pairs)
        self._pending: dict[int, _Pending] = {}
        for problem in self.model.load(store.side_items(TABLE)):
            logger.warning("recrawl: %s; that section is learned again", problem)

    # -- what comparisons use ----------------------------------------------------

    def ignore_for(self, url: str) -> Ignore:
        return self.model.ignore_for(url)

    # -- the second fetch ----------------------------------------------------------

    def after_visit(
        self,
        request: Request,
        response: Response,
        old: Signature | None,
        new: Signature,
        changed: bool,
        cycle: int,
    ) -> None:
        """A good response was recorded (``new`` its signature, ``old`` the one it was
        compared with, None at a first fetch): fetch it again at once if its section wants
        a pair (change/boilerplate.py: BoilerplateModel.wants_pair): while the section has
        too few, or when a change fell on parts no pair had."""
        if not self.learn or new.kind == "bytes":
            return
        if old is None:
            want = self.model.wants_pair(response.url, cycle)
        elif changed and old.kind == "html" and new.kind == "html":
            want = self.model.wants_pair(response.url, cycle, old, new)
        else:
            return
        if not want:
            return
        engine = getattr(self.crawler, "engine", None)
        if engine is None or getattr(engine, "spider", None) is None:
            self.model.pair_failed(response.url)
            return
        again = request.replace(
            url=response.url,
            headers={
                k: v
                for k, v in request.headers.items()
                if k.lower() not in (b"if-none-match", b"if-modified-since")
            },
            meta={**_plain_meta(request.meta), META_PAIR: 0},
            dont_filter=True,
        )
        again.meta[META_PAIR] = id(again)
        # a first fetch's signature may be deferred (a hash of the kept body): the body is
        # signed when the second fetch comes back
        first = new if new.kind == "html" else None
        body = b"" if first is not None else bytes(response.body)
        self._pending[id(again)] = _Pending(response.url, first, body, _content_type(response))
        self._inc("boilerplate/pair_fetches")
        try:
            if hasattr(engine, "download_async"):  # Scrapy 2.14+
                d = deferred_from_coro(engine.download_async(again))
            else:  # pragma: no cover - Scrapy 2.13
                d = engine.download(again)
        except Exception as exc:  # the engine is closing: learn it another time
            self._failed(again, exc)
            return
        d.addErrback(lambda failure: self._failed(again, failure.value))

    def is_pair(self, request: Request) -> bool:
        return META_PAIR in request.meta

    def pair_response(self, request: Request, response: Response) -> None:
        """The second fetch came back: learn from the two (a failed one is dropped)."""
        pending = self._pending.pop(request.meta.get(META_PAIR, 0), None)
        if pending is None:
            return
        if response.status != 200 or "cached" in response.flags:
            self._inc("boilerplate/pairs_failed")
            self.model.pair_failed(pending.url)
            return
        detector = self.detector.for_request(request.meta)  # the visit's watch list (its meta)
        first = pending.signature or detector.signature(
            pending.body, pending.url, pending.content_type
        )
        second = detector.signature(response.body, pending.url, _content_type(response))
        if first.kind != "html" or second.kind != "html":
            self.model.pair_failed(pending.url)
            return
        stats = self.model.add_pair(pending.url, first, second)
        self._inc("boilerplate/pairs")
        ignore = stats.ignore()
        logger.debug(
            "recrawl: learned the boilerplate of %s from %s: %d volatile element paths, "
            "%d with volatile attributes (%d pairs)",
            stats.section,
            pending.url,
            ignore.text.size,
            ignore.attrs.size,
            stats.pairs,
        )
        self.save()

    def pair_failed(self, request: Request, exc: BaseException) -> None:
        self._failed(request, exc)

    def _failed(self, request: Request, exc: BaseException | None) -> None:
        pending = self._pending.pop(request.meta.get(META_PAIR, 0), None)
        if pending is None:
            return
        self._inc("boilerplate/pairs_failed")
        self.model.pair_failed(pending.url)
        logger.debug("recrawl: second fetch of %s failed (%s)", pending.url, exc)

    def save(self) -> None:
        records = self.model.records()
        if not records:
            return
        try:
            self.store.side_put(TABLE, records)
        except StoreLost:
            pass  # said once, as the crawl stops (history/epoch.py): not again here
        except HistoryStoreError as exc:
            logger.warning("recrawl: could not keep the learned boilerplate (%s)", exc)
            self._inc("store_errors")


def _content_type(response: Response) -> str | None:
    value = response.headers.get("Content-Type")
    return None if value is None else value.decode("latin-1")


#: what Scrapy's components set on a request for one download: not carried over
_PER_DOWNLOAD = frozenset(
    {
        "download_latency",
        "download_slot",
        "retry_times",
        "redirect_times",
        "redirect_ttl",
        "redirect_urls",
        "redirect_reasons",
        "_auth_proxy",
    }
)


#: a request's own watch list: its pair is signed under the same rules
_WATCH = (META_WATCH_XPATHS, META_WATCH_CSS)


def _plain_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The spider's own meta (proxy, cookie jar ...), without what this package or one
    download set."""
    return {
        k: v
        for k, v in meta.items()
        if (not k.startswith(("recrawl", "_recrawl")) or k in _WATCH) and k not in _PER_DOWNLOAD
    }
