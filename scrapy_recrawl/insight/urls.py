"""Which URLs and hosts change, which ones the budget is wasted on, and one URL's story.

All from the visit log (:class:`~.log.VisitLog`): per URL, its visits, its change
observations ``n`` and changes ``X``, its last change and its mean visit interval,
hence its change rate (:func:`scrapy_recrawl.scoring.freshness.posterior_rate`: the
freshness estimate's model, its host's prior for a URL with few observations).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scrapy_recrawl.core.groups import group_codes
from scrapy_recrawl.core.selection import host_of
from scrapy_recrawl.history.cycle_log import start_url_ids
from scrapy_recrawl.history.state import gone_status
from scrapy_recrawl.last_modified import prior_ages
from scrapy_recrawl.scoring.freshness import posterior_rate

from .log import VisitLog


@dataclass
class UrlStats:
    """Per-URL figures from the log, row ``i`` = URL ``ids[i]``."""

    ids: np.ndarray
    visits: np.ndarray
    n: np.ndarray  # change observations
    X: np.ndarray  # changes among them
    last_change: np.ndarray  # cycle of the last change (-1: none seen)
    rate: np.ndarray  # expected changes per cycle (NaN: never fetched)

    @classmethod
    def from_log(cls, log: VisitLog, store: Any = None) -> UrlStats:
        """``store`` (with ``urls()``): each URL's host is the group of its rate's prior;
        without it, one prior for all."""
        ids, row, _ = log.by_url
        size = ids.size
        visits = np.bincount(row, minlength=size)
        obs = log.observed
        n = np.bincount(row[obs], minlength=size)
        changed = log["changed"] == 1
        X = np.bincount(row[changed], minlength=size)
        last_change = np.full(size, -1, dtype=np.int64)
        np.maximum.at(last_change, row[changed], log["cycle"][changed])
        good = log.good
        first = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(size, -1, dtype=np.int64)
        np.minimum.at(first, row, log["cycle"])
        np.maximum.at(last, row[good], log["cycle"][good])
        group = ages = None
        if store is not None and hasattr(store, "urls") and size:
            urls = [str(u) for u in store.urls(ids)]
            group = group_codes(urls)
            if hasattr(store, "side_get"):  # the Last-Modified ages (last_modified.py)
                ages = prior_ages(store, ids, urls, int(last.max(initial=0)))
        rate = posterior_rate(n, X, first, last, group=group, prior_age=ages)
        return cls(ids, visits, n, X, last_change, rate)


@dataclass
class UrlLine:
    url: str
    visits: int
    observations: int
    changes: int
    rate: float | None  # estimated changes per cycle
    last_change: int | None  # cycle

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HostLine:
    host: str
    urls: int
    visits: int
    observations: int
    changes: int
    change_share: float | None  # changes / observations

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _lines(stats: UrlStats, index: np.ndarray, urls: list[str]) -> list[UrlLine]:
    return [
        UrlLine(
            url=u,
            visits=int(stats.visits[i]),
            observations=int(stats.n[i]),
            changes=int(stats.X[i]),
            rate=None if np.isnan(stats.rate[i]) else round(float(stats.rate[i]), 4),
            last_change=int(stats.last_change[i]) if stats.last_change[i] >= 0 else None,
        )
        for i, u in zip(index.tolist(), urls, strict=True)
    ]


def top_changing(store: Any, stats: UrlStats, limit: int) -> list[UrlLine]:
    """The URLs with the highest change rate (then the most changes)."""
    has = np.flatnonzero(stats.X > 0)
    order = np.lexsort((-stats.X[has], -np.nan_to_num(stats.rate[has], nan=-1.0)))
    index = has[order][:limit]
    return _lines(stats, index, store.urls(stats.ids[index]))


def top_wasted(store: Any, stats: UrlStats, limit: int, min_observations: int = 2) -> list[UrlLine]:
    """URLs fetched often that never changed (the most observations first), but for the
    spider's start URLs: fetched every cycle on its say-so, not the budget's choice."""
    never = (stats.X == 0) & (stats.n >= min_observations)
    never &= ~np.isin(stats.ids, start_url_ids(store))
    never = np.flatnonzero(never)
    order = np.lexsort((stats.ids[never], -stats.visits[never]))
    index = never[order][:limit]
    return _lines(stats, index, store.urls(stats.ids[index]))


def top_hosts(store: Any, stats: UrlStats, limit: int) -> list[HostLine]:
    """Hosts by changes seen (their URLs' changes added up)."""
    hosts: dict[str, list[int]] = {}
    urls = store.urls(stats.ids)
    for i, url in enumerate(urls):
        h = hosts.setdefault(host_of(url), [0, 0, 0, 0])
        h[0] += 1
        h[1] += int(stats.visits[i])
        h[2] += int(stats.n[i])
        h[3] += int(stats.X[i])
    lines = [
        HostLine(host, u, v, n, x, round(x / n, 4) if n else None)
        for host, (u, v, n, x) in hosts.items()
    ]
    lines.sort(key=lambda h: (-h.changes, -(h.change_share or 0.0), h.host))
    return lines[:limit]


# -- one URL ------------------------------------------------------------------------


@dataclass
class VisitLine:
    cycle: int
    time: float
    status: int
    result: str  # changed / unchanged / 304 unchanged / first fetch / error / gone / failed
    distance: int
    added: int
    removed: int
    modified: int
    attributes: int
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class UrlStory:
    """One URL's visits and why it was (or was not) picked in the last planned cycle."""

    url: str
    url_id: int
    visits: list[VisitLine]
    visits_recorded: int | None  # the URL's visit count in its record (None: unknown)
    cut: bool  # the log keeps fewer visits than the record counts
    gone: bool
    terminals: dict[str, float] = field(default_factory=dict)
    score: float | None = None  # as the next cycle would score it now
    rank_now: int | None = None  # its rank among the candidates now (1 = best)
    ties: int = 0  # other candidates with the same score
    candidates: int = 0
    monitored: bool = False
    last_cycle: int | None = None  # the last cycle with a kept plan
    picked_rank: int | None = None  # in that cycle (None: not picked, or not kept)
    picked_score: float | None = None
    cutoff: float | None = None  # that cycle's cut-off score
    picks: int | None = None  # how many recrawls that cycle picked
    picks_kept: bool = False  # that cycle's picks are still in the store
    scorer: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["visits"] = [v.as_dict() for v in self.visits]
        return d


def visit_result(status: int, changed: int, first: bool) -> str:
    if status == 0:
        return "failed (no response)"
    if gone_status(status):
        return "gone"
    if status >= 400 or status < 200:
        return "error"
    if changed == 1:
        return "changed"
    if changed == 0:
        return "304 unchanged" if status == 304 else "unchanged"
    if status >= 300 and status != 304:
        return "redirect"
    return "first fetch" if first else "not an observation"


def visit_lines(log: VisitLog, url_id: int) -> list[VisitLine]:
    rows = np.flatnonzero(log["url_id"] == url_id)
    lines = []
    first = True
    for i in rows.tolist():
        status, changed = int(log["status"][i]), int(log["changed"][i])
        lines.append(
            VisitLine(
                cycle=int(log["cycle"][i]),
                time=float(log["time"][i]),
                status=status,
                result=visit_result(status, changed, first),
                distance=int(log["distance"][i]),
                added=int(log["added"][i]),
                removed=int(log["removed"][i]),
                modified=int(log["modified"][i]),
                attributes=int(log["attributes"][i]),
                bytes=int(log["bytes"][i]),
            )
        )
        if 200 <= status < 300:
            first = False
    return lines
