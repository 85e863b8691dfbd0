"""The per-cycle table: what each cycle fetched, found and spent, and how fresh the
collection was estimated to be at its end.

Two sources, each said: the per-cycle record (history/cycle_log.py: the plan's budget,
scorer and cut-off; the fetched-by-kind summaries; the crawl's own freshness estimate of
the cycle's end), written by crawls that keep it, and the visit log, which every store
has. Where a cycle has no record the figures come from the log, and what only the record
knows (the kinds, the budget, the scorer) is None.

The freshness estimate is the costly part (an EM fit and its profile per cycle): a
cycle whose record keeps the crawl's estimate (schema version 8 on) shows that figure,
and only the others are fitted from the log (a store's cycles before its upgrade, the
last cycle of a run, whose estimate the next cycle's opening computes): the same
estimator over the same observations (tests/test_recorded_freshness.py).
``freshness_source`` says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from scrapy_recrawl.core.groups import group_codes
from scrapy_recrawl.history.cycle_log import (
    CycleFreshness,
    CycleRecord,
    cycle_records,
    recorded_freshness,
)
from scrapy_recrawl.last_modified import PriorAges
from scrapy_recrawl.scoring.freshness import FreshnessEstimate, PriorAge, estimate_freshness

from .log import VisitLog


@dataclass
class CycleRow:
    cycle: int
    source: str  # "record": the per-cycle record; "log": the visit log only
    fetched: int
    recrawl: int | None
    new: int | None
    monitor: int | None
    probe: int | None
    start: int | None  # the spider's start (and dont_filter) requests: outside the budget
    changed: int
    unchanged: int
    not_modified: int
    errors: int
    gone: int
    budget: int | None  # RECRAWL_BUDGET's pages (the monitoring sample apart)
    budget_used: float | None  # (recrawl + new + probe) / budget
    backlog: int | None  # new URLs left waiting for a later cycle at the cycle's end
    freshness: float | None  # estimated share of the known pages current at the cycle's end
    freshness_low: float | None  # its 90% interval (scoring/freshness.py)
    freshness_high: float | None
    known_pages: int  # pages the estimate is over (fetched at least once, not gone)
    #: where the estimate comes from: "record" (the crawl's, kept in the cycle's record),
    #: "log" (fitted here from the visit log), None (no estimate)
    freshness_source: str | None
    scorer: str | None
    cutoff: float | None
    seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_by_cycle(
    store: object, log: VisitLog, cycles: np.ndarray
) -> dict[int, FreshnessEstimate]:
    """The freshness estimate (:func:`~scrapy_recrawl.scoring.freshness.estimate_freshness`,
    the crawl's one definition) at the end of each cycle, from what the log shows up to
    it: per URL, its change observations ``n`` and changes ``X`` so far, the cycle it was
    first recorded in, its last good fetch, whether it is gone (its latest visit said
    so, after its last good fetch), its host (the pooled prior's group). The
    Last-Modified ages are read from the side storage once for all the cycles
    (last_modified.py :class:`~scrapy_recrawl.last_modified.PriorAges`)."""
    out: dict[int, FreshnessEstimate] = {}
    if not len(log):
        return out
    ids, row, _ = log.by_url
    urls = store.urls(ids) if hasattr(store, "urls") else None  # type: ignore[attr-defined]
    group = group_codes([str(u) for u in urls]) if urls is not None else None
    cyc, obs, good = log["cycle"], log["changed"], log.good
    gone_visit = log.gone
    size = ids.size
    read_ages = PriorAges(store)
    # one pass over the log in cycle order: each cycle's rows are added to what the
    # cycles before it gathered (a mask over the whole log per cycle was C x the log)
    order = np.argsort(cyc, kind="stable")
    todo = np.unique(np.asarray(cycles, dtype=np.int64))  # ascending: each adds to the last
    ends = np.searchsorted(cyc[order], todo, side="right")
    n = np.zeros(size)
    X = np.zeros(size)
    first = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(size, -1, dtype=np.int64)
    last_gone = np.full(size, -1, dtype=np.int64)
    done = 0
    for c, end in zip(todo.tolist(), ends.tolist(), strict=True):
        if end > done:
            new = order[done:end]
            r, cy = row[new], cyc[new]
            g = good[new]
            n += np.bincount(r[g], weights=(obs[new][g] >= 0), minlength=size)
            X += np.bincount(r[g], weights=(obs[new][g] == 1), minlength=size)
            np.minimum.at(first, r, cy)
            np.maximum.at(last, r[g], cy[g])
            gv = gone_visit[new]
            np.maximum.at(last_gone, r[gv], cy[gv])
            done = end
        out[int(c)] = estimate_freshness(
            n.copy(),
            X.copy(),
            first.copy(),
            last.copy(),
            int(c),
            known=last_gone < last,
            group=group,
            prior_age=None if urls is None else _ages(read_ages, ids, urls, int(c)),
        )
    return {int(c): out[int(c)] for c in np.asarray(cycles).tolist()}  # in the order asked


def _ages(read: Callable[..., np.ndarray], ids: np.ndarray, urls: list, cycle: int) -> PriorAge:
    """The Last-Modified ages (last_modified.py) of the URLs the estimate fits, on the
    server clocks as of ``cycle``: what the crawl's estimate of that cycle read.
    ``read``: :func:`~scrapy_recrawl.last_modified.prior_ages` with its store bound, or
    a :class:`~scrapy_recrawl.last_modified.PriorAges` (read once for every cycle)."""

    def ages(pos: np.ndarray) -> np.ndarray:
        return read(ids[pos], [str(urls[k]) for k in pos.tolist()], cycle)

    return ages


def cycle_rows(store: object, log: VisitLog, since: int = 0) -> list[CycleRow]:
    """One row per cycle from ``since`` on that the log or the record knows."""
    records = {r.cycle: r for r in cycle_records(store)}
    cycles = np.union1d(log.cycles(), np.array(sorted(records), dtype=np.int64))
    shown = cycles[cycles >= since]
    # the crawl's own estimates where its records keep them; fitted only for the others
    kept = recorded_freshness(store, since)
    todo = shown[~np.isin(shown, np.fromiter(kept, dtype=np.int64, count=len(kept)))]
    fresh: dict[int, FreshnessEstimate | CycleFreshness] = dict(kept)
    if todo.size:
        fresh.update(estimate_by_cycle(store, log, todo))
    figures = _log_figures(log, cycles)
    rows = []
    for k, c in enumerate(cycles.tolist()):
        if c < since:
            continue
        rows.append(_row(c, records.get(c), figures, k, fresh.get(c)))
    return rows


def _log_figures(log: VisitLog, cycles: np.ndarray) -> dict[str, np.ndarray]:
    """What the log says of each of ``cycles`` (sorted), position ``k`` = ``cycles[k]``:
    one pass over the log, grouped by cycle (what a cycle without its record shows)."""
    size = cycles.size
    at = np.searchsorted(cycles, log["cycle"])  # every log cycle is among them

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(at[mask], minlength=size)

    changed, status = log["changed"], log["status"]
    times = log["time"]
    low = np.full(size, np.inf)
    high = np.full(size, -np.inf)
    np.minimum.at(low, at, times)
    np.maximum.at(high, at, times)
    return {
        "fetched": np.bincount(at, minlength=size),
        # the log knows a URL's first fetch (new), not why the others were fetched
        "new": count(log.first_of_url),
        "changed": count(changed == 1),
        # as the crawl's record counts them: a full body that did not change;
        # a 304 in its own column
        "unchanged": count((changed == 0) & (status != 304)),
        "not_modified": count(status == 304),
        "errors": count(log.errors | log.failed),
        "gone": count(log.gone),
        "seconds": high - low,  # -inf: no visit in the log
    }


def _row(
    c: int,
    rec: CycleRecord | None,
    log: dict[str, np.ndarray],
    k: int,
    est: FreshnessEstimate | CycleFreshness | None,
) -> CycleRow:
    plan = rec.plan if rec else None
    s = rec.summary if rec else None
    budget = plan.budget if plan else None
    used: float | None = None
    backlog: int | None = None
    if s is not None:
        fetched = s.fetched
        used = s.budgeted / budget if budget else None
        backlog = s.backlog
        figures: dict[str, int | None] = dict(
            recrawl=s.recrawl,
            new=s.new,
            monitor=s.monitor,
            probe=s.probe,
            start=s.start,
            changed=s.changed,
            unchanged=s.unchanged,
            not_modified=s.not_modified,
            errors=s.errors + s.failed,
            gone=s.gone,
        )
        seconds: float | None = max(0.0, s.ended - s.started)
    else:
        fetched = int(log["fetched"][k])
        figures = dict(recrawl=None, monitor=None, probe=None, start=None)
        for name in ("new", "changed", "unchanged", "not_modified", "errors", "gone"):
            figures[name] = int(log[name][k])
        spread = float(log["seconds"][k])
        seconds = spread if fetched else None
    return CycleRow(
        cycle=c,
        source="record" if s is not None else "log",
        fetched=fetched,
        budget=budget,
        # what the budget paid for: the monitoring sample and start requests are apart
        # (a cycle without its record: unknown, the log does not say why a URL was fetched)
        budget_used=used,
        backlog=backlog,
        freshness=_known(est.share) if est else None,
        freshness_low=_known(est.low) if est else None,
        freshness_high=_known(est.high) if est else None,
        known_pages=est.pages if est else 0,
        freshness_source=_source(est),
        scorer=plan.scorer if plan else None,
        cutoff=plan.cutoff if plan else None,
        seconds=seconds,
        **figures,  # type: ignore[arg-type]
    )


def _source(est: FreshnessEstimate | CycleFreshness | None) -> str | None:
    if isinstance(est, CycleFreshness):
        return "record"
    if est is None or not est.pages:
        return None
    return "log"


def _known(x: float) -> float | None:
    return None if np.isnan(x) else float(x)
