"""Where the live crawl keeps content state, and the columns the scheduler adds.

**The bag table.** ``content_bags`` in the SQLite history store's file (created
here on the store's connection, as :mod:`scrapy_recrawl.estimate.probes`
does; the history store's schema does not change), one row per URL id: the
bags of words of its last ``keep`` versions, newest first (``keep`` = 1 for
the chi-squared test alone, ``RECRAWL_WINDOW`` when a ``D*`` terminal is
used), and the distances ``D_1..D_l`` measured at its last visit.
Per URL: ``keep * (12 + 8 * RECRAWL_BOW_TERMS)`` bytes at most, plus ``8 l``
(6.2 KB at the defaults 3 x 256 terms; 2 KB for the chi-squared test alone).

**On Redis** (:class:`~scrapy_recrawl.history.redis.RedisHistoryStore`) the
same bags and distances are two hashes, ``{p}:bags`` and ``{p}:dists`` (id ->
the same bytes as the SQLite columns), written by one Lua script per visit;
the ``C*`` window is kept in each URL's row (its ``cwin`` byte, updated by the
visit's own script), and ``Q`` reads only the last ``RECRAWL_EXPERTS_HISTORY``
cycles of the visit log (``{p}:logstart``). For the same visits both stores
give the same columns (``tests/test_redis_content.py``). Any other store is
refused at start-up (:func:`refuse_store`).

**Columns.** :func:`plan_columns` gives the scheduler's ``_plan_cycle`` the
``C*``, ``D*`` and ``Q`` columns (aligned with the store's ``arrays().ids``)
from the visit log of the last ``RECRAWL_EXPERTS_HISTORY`` cycles, the bag
table and a :class:`~scrapy_recrawl.content.related.RelatedIndex` kept
between cycles: extended with the URLs discovered since
(:meth:`~scrapy_recrawl.content.related.RelatedIndex.extend`, no rebuild) and
refreshed for the URLs visited since (at most ``RECRAWL_EXPERTS_REFRESH`` per
cycle).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..change.bow import DEFAULT_TERMS, Bag, cosine_distance
from ..history import HistoryStore, SqliteHistoryStore
from ..settings import RecrawlSettingError, get
from . import window as win
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
        f"{what} keeps its state beside the SQLite or Redis history store; "
        f"{getattr(store, 'location', store)!r} (RECRAWL_STORE) is neither (docs/content.md)"
    )


def _redis_store(store: Any) -> Any:
    """``store`` if it is the Redis history store (imported lazily: redis is optional)."""
    if isinstance(store, SqliteHistoryStore):
        return None
    try:
        from ..history.redis import RedisHistoryStore
    except ImportError:  # pragma: no cover -- redis not installed
        return None
    return store if isinstance(store, RedisHistoryStore) else None


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
    """The bags of words beside a history store: the ``content_bags`` table of a SQLite
    store, the ``{p}:bags`` / ``{p}:dists`` hashes of a Redis one (module docstring)."""

    def __init__(self, history: HistoryStore, keep: int = 1, window: int = win.DEFAULT_WINDOW):
        self.redis = _redis_store(history)
        if self.redis is None and not isinstance(history, SqliteHistoryStore):
            raise refuse_store(history, "RECRAWL_CHANGE_TEST='chi2' / the D* terminals")
        self.history, self.keep, self.window = history, max(1, keep), window
        if self.redis is None:
            self.history.db.executescript("BEGIN;" + _SCHEMA + "COMMIT;")

    def bags(self, url_id: int) -> list[Bag]:
        if self.redis is not None:
            blob = self.redis.content_bags(url_id)
            return [] if blob is None else _unpack(blob)
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
        dists = d.astype("<f8").tobytes()
        if self.redis is not None:
            # the older bags are taken from Redis by the script itself (another process
            # may have written one since `previous` was read): one atomic step
            self.redis.push_content_bag(url_id, _pack([new]), self.keep, dists)
            return d
        kept = [new, *old][: self.keep]
        self.history.db.execute(
            "INSERT OR REPLACE INTO content_bags (url_id, bags, dists) VALUES (?, ?, ?)",
            (int(url_id), _pack(kept), dists),
        )
        return d

    def d_columns(self, ids: np.ndarray) -> np.ndarray:
        """``[len(ids), window]`` of the distances measured at each URL's last visit (NaN: none)."""
        out = np.full((len(ids), self.window), np.nan)
        if self.redis is not None:
            for r, dists in enumerate(self.redis.content_dists(ids)):
                if dists is not None:
                    d = np.frombuffer(dists, dtype="<f8")[: self.window]
                    out[r, : len(d)] = d
            return out
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
        self.redis = _redis_store(store)
        if self.redis is None and not isinstance(store, SqliteHistoryStore):
            raise refuse_store(store, "the C*, D* and Q terminals")
        self.store, self.cfg = store, cfg
        self.index: RelatedIndex | None = None
        self._index_ids: np.ndarray | None = None

    def observations(self, ids: np.ndarray, cycle: int) -> np.ndarray:
        """``[len(ids), history]``: 1/0 observed change per cycle (the last column is cycle-1)."""
        h = self.cfg.history
        out = np.full((len(ids), h), np.nan, dtype=np.float32)
        if self.redis is not None:
            log = self.redis.recent_log(cycle - h)
            keep = (log["changed"] >= 0) & (log["cycle"] >= cycle - h) & (log["cycle"] < cycle)
            a = np.stack([log["url_id"][keep], log["cycle"][keep], log["changed"][keep]], axis=1)
        else:
            rows = self.store.db.execute(
                "SELECT url_id, cycle, changed FROM visits WHERE changed IS NOT NULL"
                " AND cycle >= ? AND cycle < ?",
                (cycle - h, cycle),
            ).fetchall()
            a = np.array(rows, dtype=np.int64).reshape(-1, 3)
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
            if self.redis is not None:  # kept in each URL's row by the visit's own script
                cwin = self.redis.change_window(sids, self.cfg.window)
            else:
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
