"""Where the live crawl keeps content state, and the columns the scheduler adds.

**The bags.** Two side-storage tables of the history store (the store contract
of :mod:`scrapy_recrawl.history.base`, so any backend keeps them):
``content_bags``, per URL id the bags of words of its last ``keep`` versions,
newest first (``keep`` = 1 for the chi-squared test alone, ``RECRAWL_WINDOW``
when a ``D*`` terminal is used), pushed atomically per URL
(:meth:`~scrapy_recrawl.history.base.HistoryStore.side_push`); and
``content_dists``, the distances ``D_1..D_l`` measured at its last visit
(float64 each). Per URL: ``keep * (12 + 8 * RECRAWL_BOW_TERMS)`` bytes at most,
plus ``8 l`` (6.2 KB at the defaults 3 x 256 terms; 2 KB for the chi-squared
test alone).

**Columns.** :class:`ContentColumns` gives the scheduler the ``C*``, ``D*`` and
``Q`` columns (aligned with the store's ``arrays().ids``): the change window
from the store (:meth:`~scrapy_recrawl.history.base.HistoryStore.change_window`:
the Redis store keeps it in each URL's row, SQLite reads its log), the
distances, and ``Q`` from the visit log of the last ``RECRAWL_EXPERTS_HISTORY``
cycles and a :class:`~scrapy_recrawl.content.related.RelatedIndex` kept between
cycles: extended with the URLs discovered since
(:meth:`~scrapy_recrawl.content.related.RelatedIndex.extend`, no rebuild) and
refreshed for the URLs visited since (at most ``RECRAWL_EXPERTS_REFRESH`` per
cycle). For the same visits, every backend gives the same columns
(``tests/test_redis_content.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..change.bow import DEFAULT_TERMS, Bag, cosine_distance
from ..history import HistoryStore, HistoryStoreError
from ..history.records import unpack_list
from ..settings import RecrawlSettingError, get
from . import window as win
from .related import DEFAULT_CANDIDATES, DEFAULT_K, DEFAULT_MAX_LAG, RelatedIndex

_BAGS, _DISTS = "content_bags", "content_dists"
_FOR_BAGS = " (the bags of words: RECRAWL_CHANGE_TEST='chi2', the D* terminals)"
_FOR_LOG = " (the visit log of the Q terminal, RECRAWL_EXPERTS_HISTORY)"

WINDOW_TERMINALS = frozenset(win.c_names() + win.d_names())
CONTENT_TERMINALS = WINDOW_TERMINALS | {"Q"}


@dataclass(frozen=True)
class ContentSettings:
    """The RECRAWL_* settings of content-aware prediction (docs/settings.md)."""

    change_test: str = "simhash"
    chi2_p: float = 0.05
    bow_terms: int = DEFAULT_TERMS
    window: int = win.DEFAULT_WINDOW
    experts: int = DEFAULT_K
    max_lag: int = DEFAULT_MAX_LAG
    candidates: int = DEFAULT_CANDIDATES
    history: int = 60
    refresh: int = 10_000
    same_host: bool = True

    @classmethod
    def from_settings(cls, s: Any) -> ContentSettings:
        test = get(s, "RECRAWL_CHANGE_TEST")
        if test not in ("simhash", "chi2"):
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_TEST={test!r}: expected 'simhash' (the default rule) or 'chi2'"
            )
        return cls(
            change_test=test,
            chi2_p=float(get(s, "RECRAWL_CHI2_P")),
            bow_terms=get(s, "RECRAWL_BOW_TERMS"),
            window=win.check_window(get(s, "RECRAWL_WINDOW")),
            experts=get(s, "RECRAWL_EXPERTS"),
            max_lag=get(s, "RECRAWL_EXPERTS_LAG"),
            candidates=get(s, "RECRAWL_EXPERTS_CANDIDATES"),
            history=get(s, "RECRAWL_EXPERTS_HISTORY"),
            refresh=get(s, "RECRAWL_EXPERTS_REFRESH"),
            same_host=get(s, "RECRAWL_EXPERTS_SAME_HOST"),
        )


class BagStore:
    """The bags of words of each URL's last versions, in the store's side storage."""

    def __init__(self, history: HistoryStore, keep: int = 1, window: int = win.DEFAULT_WINDOW):
        self.history, self.keep, self.window = history, max(1, keep), window

    def bags(self, url_id: int) -> list[Bag]:
        try:
            blob = self.history.side_get(_BAGS, [int(url_id)])[0]
        except HistoryStoreError as exc:
            raise HistoryStoreError(f"{exc}{_FOR_BAGS}") from exc
        return [Bag.from_bytes(b) for b in unpack_list(blob)]

    def update(self, url_id: int, new: Bag, previous: list[Bag] | None = None) -> np.ndarray:
        """Keep ``new`` as the URL's latest version; returns ``D_1..D_l`` against the older ones.

        The older bags are the ones the push replaced (another process may have
        written one since ``previous`` was read): the push is one atomic step.
        """
        try:
            before = self.history.side_push(_BAGS, int(url_id), new.to_bytes(), self.keep)
            old = [Bag.from_bytes(b) for b in before]
            d = np.full(self.window, np.nan)
            for i, b in enumerate(old[: self.window]):
                d[i] = cosine_distance(new, b)
            self.history.side_put(_DISTS, [(int(url_id), d.astype("<f8").tobytes())])
        except HistoryStoreError as exc:
            raise HistoryStoreError(f"{exc}{_FOR_BAGS}") from exc
        return d

    def d_columns(self, ids: np.ndarray) -> np.ndarray:
        """``[len(ids), window]`` of the distances measured at each URL's last visit (NaN: none)."""
        out = np.full((len(ids), self.window), np.nan)
        for r, dists in enumerate(self.history.side_get(_DISTS, [int(i) for i in ids])):
            if dists is not None:
                d = np.frombuffer(dists, dtype="<f8")[: self.window]
                out[r, : len(d)] = d
        return out


class ContentColumns:
    """The scheduler's side of content-aware prediction: columns for ``_plan_cycle``."""

    def __init__(self, store: HistoryStore, cfg: ContentSettings, needed: Iterable[str]):
        self.needed = frozenset(needed) & CONTENT_TERMINALS
        self.store, self.cfg = store, cfg
        self.index: RelatedIndex | None = None
        self._index_ids: np.ndarray | None = None

    def observations(self, ids: np.ndarray, cycle: int) -> np.ndarray:
        """``[len(ids), history]``: 1/0 observed change per cycle (the last column is cycle-1)."""
        h = self.cfg.history
        out = np.full((len(ids), h), np.nan, dtype=np.float32)
        try:
            log = self.store.visit_log(since_cycle=cycle - h)
        except HistoryStoreError as exc:
            raise HistoryStoreError(f"{exc}{_FOR_LOG}") from exc
        keep = (log["changed"] >= 0) & (log["cycle"] >= cycle - h) & (log["cycle"] < cycle)
        a = np.stack([log["url_id"][keep], log["cycle"][keep], log["changed"][keep]], axis=1)
        if len(a):
            pos = np.searchsorted(ids, a[:, 0])
            ok = (pos < len(ids)) & (ids[np.minimum(pos, len(ids) - 1)] == a[:, 0])
            col = a[:, 1] - (cycle - h)
            # fmax: NaN (not seen) gives way; a URL seen twice in a cycle counts its change
            np.fmax.at(out, (pos[ok], col[ok]), a[ok, 2].astype(np.float32))
        return out

    def columns(self, arrays: Any) -> dict[str, np.ndarray]:
        ids = np.asarray(arrays.ids)
        order = np.argsort(ids)
        sids = ids[order]
        out: dict[str, np.ndarray] = {}
        if self.needed & WINDOW_TERMINALS:
            cwin = self.store.change_window(sids, self.cfg.window)
            dwin = None
            if self.needed & set(win.d_names()):
                dwin = BagStore(self.store, window=self.cfg.window).d_columns(sids)
                # no bag recorded (non-HTML, before the table existed): the degenerate D
                dwin = np.where(np.isnan(dwin), win.degenerate_d(cwin), dwin)
            for name, col in win.columns(cwin, dwin).items():
                out[name] = _unsort(col, order)
        if "Q" in self.needed:
            obs = self.observations(sids, int(arrays.cycle))
            seen = ~np.isnan(obs)
            mean = np.nansum(obs, axis=1, keepdims=True) / np.maximum(seen.sum(1, keepdims=True), 1)
            series = np.where(seen, obs, mean)
            known = self._index_ids
            grown = (
                self.index is not None
                and known is not None
                and len(known) <= len(sids)
                and np.array_equal(sids[: len(known)], known)
            )
            if not grown:  # first cycle, or URLs left the store: build
                groups = _hosts(self.store.urls(sids)) if self.cfg.same_host else None
                self.index = RelatedIndex.build(
                    series,
                    k=self.cfg.experts,
                    max_lag=min(self.cfg.max_lag, self.cfg.history - 1),
                    groups=groups,
                    max_candidates=self.cfg.candidates,
                )
            else:
                assert self.index is not None and known is not None
                if len(sids) > len(known):  # new URLs (ids only grow): add them, no rebuild
                    new = sids[len(known) :]
                    groups = _hosts(self.store.urls(new)) if self.cfg.same_host else None
                    self.index.extend(series, groups)
                # the URLs observed last cycle, at most RECRAWL_EXPERTS_REFRESH
                fresh = np.flatnonzero(seen[:, -1])[: self.cfg.refresh]
                self.index.refresh(series, fresh)
            self._index_ids = sids
            out["Q"] = _unsort(self.index.q(obs), order)
        return out


def _unsort(col: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(col, dtype=np.float64)
    out[order] = col
    return out


def _hosts(urls: list[str]) -> np.ndarray:
    from urllib.parse import urlsplit

    return np.array([urlsplit(u).hostname or "" for u in urls])
