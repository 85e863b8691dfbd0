"""The per-cycle table: what each cycle fetched, found and spent, and how fresh the
collection was estimated to be at its end.

Two sources, each said: the per-cycle record (history/cycle_log.py: the plan's budget,
scorer and cut-off; the fetched-by-kind summaries), written by crawls that keep it, and
the visit log, which every store has. Where a cycle has no record the figures come from
the log, and what only the record knows (the kinds, the budget, the scorer) is None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from scrapy_recrawl.core.groups import group_codes
from scrapy_recrawl.history.cycle_log import CycleRecord, cycle_records
from scrapy_recrawl.last_modified import prior_ages
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
    so, after its last good fetch), its host (the pooled prior's group)."""
    out: dict[int, FreshnessEstimate] = {}
    if not len(log):
        return out
    ids, row = np.unique(log["url_id"], return_inverse=True)
    row = row.ravel()
    urls = store.urls(ids) if hasattr(store, "urls") else None  # type: ignore[attr-defined]
    group = group_codes([str(u) for u in urls]) if urls is not None else None
    cyc, obs, good = log["cycle"], log["changed"], log.good
    gone_visit = log.gone
    size = ids.size
    for c in np.asarray(cycles).tolist():
        at = cyc <= c
        g = at & good
        n = np.bincount(row[g], weights=(obs[g] >= 0), minlength=size)
        X = np.bincount(row[g], weights=(obs[g] == 1), minlength=size)
        first = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, row[at], cyc[at])
        last = np.full(size, -1, dtype=np.int64)
        np.maximum.at(last, row[g], cyc[g])
        last_gone = np.full(size, -1, dtype=np.int64)
        gv = at & gone_visit
        np.maximum.at(last_gone, row[gv], cyc[gv])
        out[int(c)] = estimate_freshness(
            n,
            X,
            first,
            last,
            int(c),
            known=last_gone < last,
            group=group,
            prior_age=None if urls is None else _ages(store, ids, urls, int(c)),
        )
    return out


def _ages(store: object, ids: np.ndarray, urls: list, cycle: int) -> PriorAge:
    """The Last-Modified ages (last_modified.py) of the URLs the estimate fits, on the
    server clocks as of ``cycle``: what the crawl's estimate of that cycle read."""

    def ages(pos: np.ndarray) -> np.ndarray:
        return prior_ages(store, ids[pos], [str(urls[k]) for k in pos.tolist()], cycle)

    return ages


def cycle_rows(store: object, log: VisitLog, since: int = 0) -> list[CycleRow]:
    """One row per cycle from ``since`` on that the log or the record knows."""
    records = {r.cycle: r for r in cycle_records(store)}
    cycles = np.union1d(log.cycles(), np.array(sorted(records), dtype=np.int64))
    fresh = estimate_by_cycle(store, log, cycles)
    rows = []
    new = log.first_of_url
    for c in cycles.tolist():
        if c < since:
            continue
        at = log["cycle"] == c
        rows.append(_row(c, records.get(c), log, at, new, fresh.get(c)))
    return rows


def _row(
    c: int,
    rec: CycleRecord | None,
    log: VisitLog,
    at: np.ndarray,
    new: np.ndarray,
    est: FreshnessEstimate | None,
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
        fetched = int(np.count_nonzero(at))
        changed = log["changed"][at]
        figures = dict(
            recrawl=None,
            # the log knows a URL's first fetch (new), not why the others were fetched
            new=int(np.count_nonzero(new & at)),
            monitor=None,
            probe=None,
            start=None,
            changed=int(np.count_nonzero(changed == 1)),
            # as the crawl's record counts them: a full body that did not change;
            # a 304 in its own column
            unchanged=int(np.count_nonzero((changed == 0) & (log["status"][at] != 304))),
            not_modified=int(np.count_nonzero(log["status"][at] == 304)),
            errors=int(np.count_nonzero((log.errors | log.failed) & at)),
            gone=int(np.count_nonzero(log.gone & at)),
        )
        times = log["time"][at]
        seconds = float(times.max() - times.min()) if times.size else None
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
        scorer=plan.scorer if plan else None,
        cutoff=plan.cutoff if plan else None,
        seconds=seconds,
        **figures,  # type: ignore[arg-type]
    )


def _known(x: float) -> float | None:
    return None if np.isnan(x) else float(x)
