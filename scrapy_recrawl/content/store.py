"""Where the live crawl keeps content state, and the columns the scheduler adds.

**The bag table.** ``content_bags`` in the SQLite history store's file (created
here on the store's connection, as :mod:`scrapy_recrawl.estimate.probes`
does; the history store's schema does not change), one row per URL id: the
bags of words of its last ``keep`` versions, newest first (``keep`` = 1 for
the chi-squared test alone, ``RECRAWL_WINDOW`` when a ``D*`` terminal is
used), and the distances ``D_1..D_l`` measured at its last visit.
Per URL: ``keep * (12 + 8 * RECRAWL_BOW_TERMS)`` bytes at most, plus ``8 l``
(6.2 KB at the defaults 3 x 256 terms; 2 KB for the chi-squared test alone).

The Redis store has no such table: ``RECRAWL_CHANGE_TEST = "chi2"`` and the
``D*`` terminals refuse it at start-up (:func:`refuse_store`). ``C*`` and
``Q`` need the visit log, which only the SQLite store has a reader for:
they refuse Redis as well.

**Columns.** :func:`plan_columns` gives the scheduler's ``_plan_cycle`` the
``C*``, ``D*`` and ``Q`` columns (aligned with the store's ``arrays().ids``)
from the visit log of the last ``RECRAWL_EXPERTS_HISTORY`` cycles, the bag
table and a :class:`~scrapy_recrawl.content.related.RelatedIndex` kept
between cycles and refreshed for the URLs visited since (at most
``RECRAWL_EXPERTS_REFRESH`` per cycle).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..history import HistoryStore, SqliteHistoryStore
from ..settings import RecrawlSettingError, get
from . import window as win
from .bow import DEFAULT_TERMS, Bag, cosine_distance
from .related import DEFAULT_CANDIDATES, DEFAULT_K, DEFAULT_MAX_LAG, RelatedIndex

_SCHEMA = """
CREATE TABLE IF NOT EXISTS content_bags (
    url_id INTEGER PRIMARY KEY, bags BLOB NOT NULL, dists BLOB NOT NULL
);
"""
_LEN = struct.Struct("<I")

WINDOW_TERMINALS = frozenset(win.c_names() + win.d_names())
CONTENT_TERMINALS = WINDOW_TERMINALS | {"Q"}


def refuse_store(store: Any, what: str) -> RecrawlSettingError:
    return RecrawlSettingError(
        f"{what} keeps its state beside the SQLite history store; {store.location} "
        "(RECRAWL_STORE) is not one: the Redis store does not support it yet (docs/content.md)"
    )


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
        test = get(s, "RECRAWL_CHANGE_TEST", str)
        if test not in ("simhash", "chi2"):
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_TEST={test!r}: expected 'simhash' (the default rule) or 'chi2'"
            )
        return cls(
            change_test=test,
            chi2_p=float(
                get(s, "RECRAWL_CHI2_P", (int, float), lambda v: 0 < v < 1, "a p-value in (0, 1)")
            ),
            bow_terms=get(s, "RECRAWL_BOW_TERMS", int, lambda v: 1 <= v <= 65535, "1..65535"),
            window=win.check_window(get(s, "RECRAWL_WINDOW", int)),
            experts=get(s, "RECRAWL_EXPERTS", int, lambda v: 1 <= v <= 255, "an int 1..255"),
            max_lag=get(s, "RECRAWL_EXPERTS_LAG", int, lambda v: 1 <= v <= 255, "an int 1..255"),
            candidates=get(
                s, "RECRAWL_EXPERTS_CANDIDATES", int, lambda v: v >= 2, "an int >= 2 (URLs)"
            ),
            history=get(s, "RECRAWL_EXPERTS_HISTORY", int, lambda v: v >= 4, "an int >= 4"),
            refresh=get(s, "RECRAWL_EXPERTS_REFRESH", int, lambda v: v >= 1, "an int >= 1"),
            same_host=get(s, "RECRAWL_EXPERTS_SAME_HOST", bool),
        )


def _pack(bags: Iterable[Bag]) -> bytes:
    out = []
    for b in bags:
        data = b.to_bytes()
        out += [_LEN.pack(len(data)), data]
    return b"".join(out)


def _unpack(data: bytes) -> list[Bag]:
    bags, pos = [], 0
    while pos < len(data):
        (n,) = _LEN.unpack_from(data, pos)
        bags.append(Bag.from_bytes(data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return bags


class BagStore:
    """The ``content_bags`` table beside a SQLite history store."""

    def __init__(self, history: HistoryStore, keep: int = 1, window: int = win.DEFAULT_WINDOW):
        if not isinstance(history, SqliteHistoryStore):
            raise refuse_store(history, "RECRAWL_CHANGE_TEST='chi2' / the D* terminals")
        self.history, self.keep, self.window = history, max(1, keep), window
        self.history.db.executescript("BEGIN;" + _SCHEMA + "COMMIT;")

    def bags(self, url_id: int) -> list[Bag]:
        row = self.history.db.execute(
            "SELECT bags FROM content_bags WHERE url_id = ?", (int(url_id),)
        ).fetchone()
        return [] if row is None else _unpack(row[0])

    def update(self, url_id: int, new: Bag, previous: list[Bag] | None = None) -> np.ndarray:
        """Store ``new`` as the URL's latest version; returns ``D_1..D_l`` against the older ones."""
        old = self.bags(url_id) if previous is None else previous
        d = np.full(self.window, np.nan)
        for i, b in enumerate(old[: self.window]):
            d[i] = cosine_distance(new, b)
        kept = [new, *old][: self.keep]
        self.history.db.execute(
            "INSERT OR REPLACE INTO content_bags (url_id, bags, dists) VALUES (?, ?, ?)",
            (int(url_id), _pack(kept), d.astype("<f8").tobytes()),
        )
        return d

    def d_columns(self, ids: np.ndarray) -> np.ndarray:
        """``[len(ids), window]`` of the distances measured at each URL's last visit (NaN: none)."""
        out = np.full((len(ids), self.window), np.nan)
        pos = {int(v): r for r, v in enumerate(np.asarray(ids))}
        for url_id, dists in self.history.db.execute("SELECT url_id, dists FROM content_bags"):
            r = pos.get(int(url_id))
            if r is not None:
                d = np.frombuffer(dists, dtype="<f8")[: self.window]
                out[r, : len(d)] = d
        return out


class ContentColumns:
    """The scheduler's side of content-aware prediction: columns for ``_plan_cycle``."""

    def __init__(self, store: HistoryStore, cfg: ContentSettings, needed: Iterable[str]):
        self.needed = frozenset(needed) & CONTENT_TERMINALS
        if not isinstance(store, SqliteHistoryStore):
            raise refuse_store(store, "the C*, D* and Q terminals")
        self.store, self.cfg = store, cfg
        self.index: RelatedIndex | None = None
        self._index_ids: np.ndarray | None = None

    def observations(self, ids: np.ndarray, cycle: int) -> np.ndarray:
        """``[len(ids), history]``: 1/0 observed change per cycle (the last column is cycle-1)."""
        h = self.cfg.history
        out = np.full((len(ids), h), np.nan, dtype=np.float32)
        rows = self.store.db.execute(
            "SELECT url_id, cycle, changed FROM visits WHERE changed IS NOT NULL AND cycle >= ?"
            " AND cycle < ?",
            (cycle - h, cycle),
        ).fetchall()
        if rows:
            a = np.array(rows, dtype=np.int64)
            pos = np.searchsorted(ids, a[:, 0])
            ok = (pos < len(ids)) & (ids[np.minimum(pos, len(ids) - 1)] == a[:, 0])
            col = a[:, 1] - (cycle - h)
            out[pos[ok], col[ok]] = np.maximum(out[pos[ok], col[ok]], a[ok, 2])
        return out

    def columns(self, arrays: Any) -> dict[str, np.ndarray]:
        ids = np.asarray(arrays.ids)
        order = np.argsort(ids)
        sids = ids[order]
        out: dict[str, np.ndarray] = {}
        if self.needed & WINDOW_TERMINALS:
            log = self.store.visit_log()
            cwin = win.window_from_log(sids, log["url_id"], log["changed"], self.cfg.window)
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
            if self.index is None or self._index_ids is None or len(self._index_ids) != len(sids):
                groups = _hosts(self.store.urls(sids)) if self.cfg.same_host else None
                self.index = RelatedIndex.build(
                    series,
                    k=self.cfg.experts,
                    max_lag=min(self.cfg.max_lag, self.cfg.history - 1),
                    groups=groups,
                    max_candidates=self.cfg.candidates,
                )
                self._index_ids = sids
            else:  # incremental: the URLs observed last cycle, at most RECRAWL_EXPERTS_REFRESH
                fresh = np.flatnonzero(seen[:, -1])[: self.cfg.refresh]
                self.index.refresh(series, fresh)
            out["Q"] = _unsort(self.index.q(obs), order)
        return out


def _unsort(col: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(col, dtype=np.float64)
    out[order] = col
    return out


def _hosts(urls: list[str]) -> np.ndarray:
    from urllib.parse import urlsplit

    return np.array([urlsplit(u).hostname or "" for u in urls])
