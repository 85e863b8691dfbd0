"""Importance and sitemaps as evidence, as a plug-in: columns for scoring, and the URLs
whose trusted sitemap says they changed since the last visit marked due now.

Listed in ``RECRAWL_PLUGINS_BASE``; on when ``RECRAWL_EVIDENCE`` is true (a spider with
:class:`~scrapy_recrawl.evidence.SitemapEvidenceMixin` sets it), or when it is None and
``RECRAWL_IMPORTANCE`` is set or the scorer uses ``w`` or one of this plug-in's
terminals. It listens to two of Scrapy's signals and changes no request:

* ``request_scheduled``: a request for a URL the store knows (which the scheduler will
  not fetch on the spider's say-so: the scorer decides) that carries a sitemap's
  ``lastmod`` / ``changefreq`` or a weight in its meta: the announcement or the weight
  is kept for that URL (side storage);
* ``response_received`` (after the recording middleware has recorded the visit): the
  weight of the fetched page (meta, ``RECRAWL_IMPORTANCE``, the spider), and what the
  meta announced for a page fetched for the first time.

At each cycle's opening (:meth:`EvidencePlugin.columns`) the pending announcements are
checked against what the fetches since found (announce.py), the trust rule is applied,
and the columns ``importance``, ``lastmod``, ``cfreq``, ``sitemap_trust`` and
``due_now`` (:data:`~scrapy_recrawl.core.selection.DUE_NOW`: the cycle core takes those
URLs first, within the budget) are handed out. docs/evidence.md has the rules.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from scrapy import signals

from ..core.meta import META_CHANGEFREQ, META_LASTMOD, META_PAIR
from ..core.plugins import uses_terminals
from ..core.selection import DUE_NOW, hosts_of
from ..history.base import HistoryArrays, HistoryStoreError
from ..scoring.registry import Terminal, optional_column
from ..settings import get
from . import importance

# announce.py is imported where used (each cycle's columns, a sitemap entry), not here:
# reading the class's terminals (the crawl's terminal registry, plugin_terminals.py)
# does not load it; importance.py is light, and enabled() needs it

logger = logging.getLogger(__name__)

#: the terminal another part of the package defines over the ``importance`` column:
#: a scorer using it needs the weights kept, so it turns this plug-in on
WEIGHT_TERMINAL = "w"


def _lmod(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    # 1 where a trusted sitemap announced a change since the last visit (due now)
    if DUE_NOW not in state:
        return np.full(np.shape(state["n"]), np.nan)
    return np.asarray(state[DUE_NOW], dtype=np.float64)


def _nadc(
    state: Mapping[str, np.ndarray], _c: int, _now: object, a: float, b: float, get: Any
) -> np.ndarray:
    """``(X + b p_c)/(n + b)``: NAD whose prior mean is the sitemap's, where it has one.

    ``p_c = 1 - exp(-cfreq)``, the chance of a change within one cycle for a page
    changing ``cfreq`` times per cycle (Poisson); where no changefreq was announced
    (``cfreq`` NaN) the global prior's ``a/b``, so ``NADc`` is ``NADp`` there. The
    prior's strength stays RECRAWL_PRIOR's ``b``: a few observations outweigh the
    announcement, as they outweigh ``a/b``."""
    cfreq = get("cfreq")
    p = -np.expm1(-np.maximum(cfreq, 0.0))
    p = np.where(np.isnan(cfreq), a / b, p)
    p *= b
    p += get("X")
    p /= get("n") + b
    return p


class EvidenceSettings:
    """The RECRAWL_* settings of this plug-in, read and checked once."""

    def __init__(self, settings: Any) -> None:
        self.enabled: bool | None = get(settings, "RECRAWL_EVIDENCE")
        self.checks: int = get(settings, "RECRAWL_SITEMAP_CHECKS")
        self.trust: float = get(settings, "RECRAWL_SITEMAP_TRUST")
        self.cycle_seconds: float = get(settings, "RECRAWL_CYCLE_SECONDS")
        self.importance = importance.load_callable(settings)


class EvidencePlugin:
    """Per-URL importance and sitemap announcements (docs/evidence.md)."""

    terminals: ClassVar[tuple[Terminal, ...]] = (
        Terminal(
            "cfreq",
            "changes per cycle the sitemap's `<changefreq>` announces (cycle length / its "
            "period; 0: never; NaN: none announced)",
            optional_column("cfreq"),
        ),
        Terminal(
            "NADc",
            "`(X + b*p_c)/(n + b)`: NAD with the sitemap's changefreq as the prior mean "
            "(`p_c = 1 - exp(-cfreq)`, a change within a cycle); `NADp` where none announced",
            _nadc,
            uses_prior=True,
        ),
        Terminal(
            "lmod",
            "1 where a trusted sitemap `<lastmod>` is newer than the last visit (due now), else 0",
            _lmod,
        ),
        Terminal(
            "strust",
            "share of the URL's announced changes its fetches confirmed (its host's while "
            "it has few; 1 before any check; NaN: never announced)",
            optional_column("sitemap_trust"),
        ),
    )
    api_version = "1"
    capabilities: ClassVar[frozenset[str]] = frozenset({"columns"})
    selects = False

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        s = EvidenceSettings(settings)
        if s.enabled is not None:
            return s.enabled
        return (
            s.importance is not None
            or WEIGHT_TERMINAL in terminals_needed
            or uses_terminals(cls, terminals_needed)
        )

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        EvidenceSettings(settings)

    @classmethod
    def from_crawler(
        cls, crawler: Any, store: Any, terminals_needed: frozenset[str]
    ) -> EvidencePlugin:
        return cls(crawler, store)

    def __init__(self, crawler: Any, store: Any) -> None:
        self.crawler = crawler
        self.store = store
        self.settings = EvidenceSettings(crawler.settings)
        self._weights: dict[int, float] | None = None  # the stored ones, read when needed
        crawler.signals.connect(self._on_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self._on_response, signal=signals.response_received)

    # -- what the spider says ------------------------------------------------------

    def _on_scheduled(self, request: Any, spider: Any) -> None:
        meta = request.meta
        sitemap = META_LASTMOD in meta or META_CHANGEFREQ in meta
        weighs = importance.META_IMPORTANCE in meta
        if sitemap or weighs:
            # None: a new URL, kept at its first fetch (_on_response)
            self._keep(request, None, spider, sitemap=sitemap, weighs=weighs)

    def _on_response(self, response: Any, request: Any, spider: Any) -> None:
        meta = request.meta
        if META_PAIR in meta:
            return  # a boilerplate pair's second fetch: not a visit
        sitemap = META_LASTMOD in meta or META_CHANGEFREQ in meta
        weighs = (
            importance.META_IMPORTANCE in meta
            or self.settings.importance is not None
            or getattr(spider, importance.SPIDER_ATTRIBUTE, None) is not None
        )
        if sitemap or weighs:
            # recorded by the middleware just before; None: not one of the spider's pages
            self._keep(request, response, spider, sitemap=sitemap, weighs=weighs)

    def _keep(
        self, request: Any, response: Any, spider: Any, *, sitemap: bool, weighs: bool
    ) -> None:
        """Keep what ``request`` (and ``response``) say of a URL the store knows."""
        try:
            rec = self.store.get(self._fingerprint(request), signature=False)
            if rec is None:
                return
            if sitemap:
                self._announce(request, rec)
            if weighs:
                self._weigh(request, response, spider, rec.id)
        except HistoryStoreError as exc:
            logger.error("recrawl: could not keep the evidence of %s: %s", request.url, exc)

    def _announce(self, request: Any, rec: Any) -> None:
        from . import announce

        meta = request.meta
        lastmod = period = None
        if META_LASTMOD in meta:
            lastmod = announce.parse_lastmod(meta[META_LASTMOD])
            if lastmod is None:
                self._warn_bad(request, META_LASTMOD, "a W3C datetime")
        if META_CHANGEFREQ in meta:
            period = announce.parse_changefreq(meta[META_CHANGEFREQ])
            if period is None:
                self._warn_bad(request, META_CHANGEFREQ, "a sitemap changefreq word")
        if lastmod is None and period is None:
            return
        old = self.store.side_get(announce.TABLE, [rec.id])[0]
        recs, _ = announce.unpack_many([old]) if old is not None else (None, None)
        record = recs[0] if recs is not None else announce.empty_record()
        changed, pending = announce.announce(
            record,
            lastmod=lastmod,
            period=period,
            n=rec.n,
            X=rec.X,
            last_visit_time=rec.last_visit_time,
        )
        self._inc("recrawl/sitemap/entries")
        if pending:
            self._inc("recrawl/sitemap/announced")
        if changed:
            self.store.side_put(announce.TABLE, [(rec.id, announce.pack(record))])

    def _weigh(self, request: Any, response: Any, spider: Any, url_id: int) -> None:
        try:
            weight, raw, source = importance.weight_of(
                request, response, spider, self.settings.importance
            )
        except Exception as exc:  # the user's callable: one warning, the crawl goes on
            logger.warning("recrawl: the importance of %s could not be had: %r", request.url, exc)
            self._inc("recrawl/importance/invalid")
            return
        if weight is None:
            if raw is not None:
                logger.warning(
                    "recrawl: the importance of %s from %s is %r, not a number > 0: ignored",
                    request.url,
                    source,
                    raw,
                )
                self._inc("recrawl/importance/invalid")
            return
        weights = self._stored_weights()
        if weight == 1.0:
            if url_id in weights:  # back to the default: no row
                self.store.side_delete(importance.TABLE, [url_id])
                del weights[url_id]
                self._inc("recrawl/importance/set")
            return
        if weights.get(url_id) != weight:
            self.store.side_put(importance.TABLE, [(url_id, importance.pack(weight))])
            weights[url_id] = weight
            self._inc("recrawl/importance/set")

    def _stored_weights(self) -> dict[int, float]:
        if self._weights is None:
            self._weights = importance.read_weights(self.store)
        return self._weights

    def _warn_bad(self, request: Any, key: str, expect: str) -> None:
        logger.warning(
            "recrawl: meta[%r] of %s is %r, not %s: ignored",
            key,
            request.url,
            request.meta.get(key),
            expect,
        )

    # -- ColumnProvider ------------------------------------------------------------

    def columns(self, arrays: HistoryArrays, now: float) -> dict[str, np.ndarray]:
        from . import announce

        ids = arrays.ids
        self._weights = importance.read_weights(self.store)  # other processes' too
        out: dict[str, np.ndarray] = {importance.COLUMN: importance.column(ids, self._weights)}
        seconds = self._tick(arrays.cycle, now)
        items = list(self.store.side_items(announce.TABLE))
        size = len(ids)
        lastmod = np.full(size, np.nan)
        cfreq = np.full(size, np.nan)
        trusted_share = np.full(size, np.nan)
        due = np.zeros(size, dtype=bool)
        out.update(lastmod=lastmod, cfreq=cfreq, sitemap_trust=trusted_share)
        out[DUE_NOW] = due
        if not items:
            return out
        keys = np.fromiter((k for k, _ in items), dtype=np.int64, count=len(items))
        recs, corrupt = announce.unpack_many([v for _, v in items])
        if corrupt.any():
            logger.warning(
                "recrawl: %d records of side table %r are not sitemap records: reset",
                int(corrupt.sum()),
                announce.TABLE,
            )
        pos = np.minimum(np.searchsorted(ids, keys), max(size - 1, 0))
        found = (pos < size) & (ids[pos] == keys) if size else np.zeros(len(keys), dtype=bool)
        keys, recs, pos, corrupt = keys[found], recs[found], pos[found], corrupt[found]
        cols = arrays.columns
        visited = cols["last_visit_time"][pos]
        confirmed, unconfirmed = announce.resolve(recs, cols["n"][pos], cols["X"][pos], visited)
        write = confirmed | unconfirmed | corrupt
        if write.any():
            self.store.side_put(
                announce.TABLE,
                [(int(k), announce.pack(r)) for k, r in zip(keys[write], recs[write], strict=True)],
            )
        share = self._trust(keys, recs)
        pending = recs["pending"] == 1
        announced = pending & (recs["lastmod"] > visited) & ~cols["gone"][pos]
        ok = share >= self.settings.trust
        lastmod[pos] = recs["lastmod"]
        cfreq[pos] = announce.rate_per_cycle(recs["period"], seconds)
        trusted_share[pos] = share
        due[pos] = announced & ok
        self._inc("recrawl/sitemap/confirmed", int(confirmed.sum()))
        self._inc("recrawl/sitemap/unconfirmed", int(unconfirmed.sum()))
        self._inc("recrawl/sitemap/due", int((announced & ok).sum()))
        self._inc("recrawl/sitemap/untrusted", int((announced & ~ok).sum()))
        return out

    def _trust(self, keys: np.ndarray, recs: np.ndarray) -> np.ndarray:
        """:func:`announce.trust` of each record; hosts are looked up only for the rows
        that can need them (checked or pending ones: the rest stay 1.0)."""
        from . import announce

        share = np.ones(len(keys))
        need = ((recs["ok"] + recs["bad"]) > 0) | (recs["pending"] == 1)
        rows = np.flatnonzero(need)
        if len(rows) == 0:
            return share
        codes: dict[str, int] = {}
        hosts = hosts_of(self.store.urls(keys[rows]))
        host_codes = np.fromiter(
            (codes.setdefault(h, len(codes)) for h in hosts), dtype=np.int64, count=len(rows)
        )
        share[rows] = announce.trust(
            recs["ok"][rows], recs["bad"][rows], host_codes, checks=self.settings.checks
        )
        return share

    def _tick(self, cycle: int, now: float) -> float:
        """Keep this opening among the recent ones; the crawl's cycle length from them."""
        from . import announce

        raw = self.store.side_get(announce.CLOCK_TABLE, [1])[0]
        clock = np.zeros((0, 2))
        if raw is not None and len(raw) % 16 == 0:
            clock = np.frombuffer(raw, dtype="<f8").reshape(-1, 2)
        clock = clock[clock[:, 0] < cycle]  # an opening taken again (a resumed cycle)
        clock = np.vstack([clock, [[float(cycle), float(now)]]])[-announce.CLOCK_KEEP :]
        self.store.side_put(announce.CLOCK_TABLE, [(1, clock.astype("<f8").tobytes())])
        return announce.cycle_seconds(clock, self.settings.cycle_seconds)

    # -- helpers -----------------------------------------------------------------

    def _fingerprint(self, request: Any) -> bytes:
        return bytes(self.crawler.request_fingerprinter.fingerprint(request))

    def _inc(self, key: str, count: int = 1) -> None:
        if count and self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, count)
