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

from scrapy_recrawl.history.cycle_log import CycleRecord, cycle_records
from scrapy_recrawl.scoring.freshness import expected_freshness

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
    freshness: float | None  # estimated share of pages unchanged at the cycle's end
    fresh_pages: int  # pages the estimate is over (those with a change rate)
    scorer: str | None
    cutoff: float | None
    seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def freshness_by_cycle(log: VisitLog, cycles: np.ndarray) -> dict[int, tuple[float, int]]:
    """:func:`~scrapy_recrawl.scoring.freshness.expected_freshness` at the end of each
    cycle, from what the log shows up to it: per URL, its observations ``n`` and changes
    ``X`` so far, its mean visit interval in cycles, and its age at the next cycle's
    start (the terminal ``t`` the scorer sees then)."""
    out: dict[int, tuple[float, int]] = {}
    if not len(log):
        return out
    good = log.good
    url = log["url_id"][good]
    cyc = log["cycle"][good]
    obs = log["changed"][good]
    ids, row = np.unique(url, return_inverse=True)
    size = ids.size
    n = np.zeros(size)
    X = np.zeros(size)
    first = np.full(size, -1, dtype=np.int64)
    last = np.full(size, -1, dtype=np.int64)
    order = np.argsort(cyc, kind="stable")
    row, cyc, obs = row[order], cyc[order], obs[order]
    bounds = np.searchsorted(cyc, cycles, side="right")
    start = 0
    for c, end in zip(cycles.tolist(), bounds.tolist(), strict=True):
        r, cc, o = row[start:end], cyc[start:end], obs[start:end]
        np.add.at(n, r, (o >= 0).astype(float))
        np.add.at(X, r, (o == 1).astype(float))
        unseen = first[r] < 0
        first[r[unseen]] = cc[unseen]
        np.maximum.at(last, r, cc)
        start = end
        seen = last >= 0
        interval = np.maximum((last - first) / np.maximum(n, 1.0), 1.0)
        out[int(c)] = expected_freshness(
            n[seen], X[seen], interval[seen], (c + 1 - last)[seen].astype(float)
        )
    return out


def cycle_rows(store: object, log: VisitLog, since: int = 0) -> list[CycleRow]:
    """One row per cycle from ``since`` on that the log or the record knows."""
    records = {r.cycle: r for r in cycle_records(store)}
    cycles = np.union1d(log.cycles(), np.array(sorted(records), dtype=np.int64))
    fresh = freshness_by_cycle(log, cycles)
    rows = []
    new = log.first_of_url
    for c in cycles.tolist():
        if c < since:
            continue
        at = log["cycle"] == c
        share, pages = fresh.get(c, (float("nan"), 0))
        rows.append(
            _row(c, records.get(c), log, at, new, None if np.isnan(share) else share, pages)
        )
    return rows


def _row(
    c: int,
    rec: CycleRecord | None,
    log: VisitLog,
    at: np.ndarray,
    new: np.ndarray,
    freshness: float | None,
    pages: int,
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
        freshness=freshness,
        fresh_pages=pages,
        scorer=plan.scorer if plan else None,
        cutoff=plan.cutoff if plan else None,
        seconds=seconds,
        **figures,  # type: ignore[arg-type]
    )
