"""The cycle core: what a cycle fetches, decided once, the same way everywhere.

Pure (no Scrapy, no I/O of its own): both Scrapy schedulers and the offline
replay call :func:`plan_cycle` and :func:`side_order`, so a crawl and its
replay cannot disagree on roll-over, the budget, the new/recrawl/monitor
split or the top-k. In continuous mode the clock of cycles is here too: one cycle per
``RECRAWL_CYCLE_PERIOD`` (:func:`cycle_done`, :func:`next_period_start`); both frontiers
ask it, with the time they keep (this process's clock, or the shared Redis's).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..history.base import HistoryArrays
from ..scoring import Scorer
from ..scoring.pooled import POOLED_NAMES
from ..settings import get
from .budget import Budget, Share, adaptive_cut, check_adaptive_budget, cycle_budget, parse_budget
from .groups import GROUP_COLUMN, GroupIndex
from .hubs import due_hubs
from .plugins import ColumnProvider, Selector
from .selection import DUE_NOW, Selection, candidate_mask, select_recrawls


@dataclass(frozen=True)
class CycleConfig:
    """The RECRAWL_* settings that shape a cycle (docs/settings.md has them all)."""

    budget: int | float = Share(0.05)  # pages (int) or a Share of the known URLs
    #: RECRAWL_BUDGET_MAX: the most pages a Share gives (0: no maximum)
    budget_max: int = 0
    new_share: float = 0.2
    #: RECRAWL_NEW_SHARE_MAX: the most of the budget new URLs may take while a backlog
    #: waits (core/budget.py: new_pages)
    new_share_max: float = 0.5
    warmup_cycles: int = 2
    continuous: bool = False
    #: the longest a cycle may run (continuous mode)
    cycle_seconds: float = 3600.0
    #: continuous mode: seconds from one cycle's start to the next's (RECRAWL_CYCLE_PERIOD)
    cycle_period: float = 3600.0
    max_cycles: int = 0
    monitor_share: float = 0.0
    max_per_domain: int | None = None
    seed: int = 0
    #: RECRAWL_ADAPTIVE_BUDGET: None (off) or the expected changes below which the rest
    #: of a cycle's ranked recrawls is not fetched (core/budget.py: adaptive_cut)
    adaptive_budget: float | None = None

    @classmethod
    def from_settings(cls, s: Any) -> CycleConfig:
        """Read and check each setting; a bad one raises RecrawlSettingError naming it."""
        # the one budget rule (core/budget.py); its deprecation note is logged once, at
        # start-up (startup.py), not at every read
        budget, _ = parse_budget(get(s, "RECRAWL_BUDGET"))
        return cls(
            budget=budget,
            budget_max=get(s, "RECRAWL_BUDGET_MAX"),
            new_share=get(s, "RECRAWL_NEW_SHARE"),
            new_share_max=get(s, "RECRAWL_NEW_SHARE_MAX"),
            warmup_cycles=get(s, "RECRAWL_WARMUP_CYCLES"),
            continuous=get(s, "RECRAWL_CONTINUOUS"),
            cycle_seconds=get(s, "RECRAWL_CYCLE_SECONDS"),
            cycle_period=get(s, "RECRAWL_CYCLE_PERIOD"),
            max_cycles=get(s, "RECRAWL_MAX_CYCLES"),
            monitor_share=get(s, "RECRAWL_MONITOR_SHARE"),
            max_per_domain=get(s, "RECRAWL_MAX_PER_DOMAIN"),
            seed=get(s, "RECRAWL_SEED"),
            adaptive_budget=check_adaptive_budget(get(s, "RECRAWL_ADAPTIVE_BUDGET")),
        )


@dataclass(frozen=True)
class CyclePlan:
    """What a new cycle fetches: decided once when the cycle starts."""

    cycle: int
    warmup: bool
    budget: Budget
    selection: Selection
    new_quota: int  # frontier URLs to take for this cycle's new share
    score_seconds: float
    #: scored picks not fetched under RECRAWL_ADAPTIVE_BUDGET (taken off the budget)
    adaptive_cut: int = 0
    #: new URLs waiting from earlier cycles when the cycle opened (the store's frontier)
    backlog: int = 0
    #: hubs (core/hubs.py) made due this cycle: ranked first among the recrawls
    hubs_due: int = 0
    #: the share the monitoring sample was drawn with (``monitor_mask`` with
    #: ``CycleConfig.seed``); 0 when a selector picked (plan mode has no sample)
    monitor_share: float = 0.0
    #: seconds the cycle's ``now`` is behind the newest visit in the store (0: not
    #: behind): the wall clock went back (:func:`clock_behind`; the crawl warns)
    clock_behind: float = 0.0


#: how far behind the newest visit ``now`` may read before the clock is said to have gone
#: back (seconds): more than clock drift between machines or an NTP step
CLOCK_SLACK = 60.0


def clock_behind(arrays: HistoryArrays, now: float) -> float:
    """Seconds ``now`` is behind the newest visit time in ``arrays`` (0 when not behind):
    the wall clock went back since that visit was recorded. The ``hours`` terminal counts
    such visits as made now (scoring/terminals.py); the caller warns past
    :data:`CLOCK_SLACK`."""
    times = arrays.columns.get("last_visit_time")
    if times is None or len(times) == 0:
        return 0.0
    latest = float(np.max(times))
    return max(0.0, latest - float(now)) if np.isfinite(latest) else 0.0


def plan_cycle(
    arrays: HistoryArrays,
    config: CycleConfig,
    scorer: Scorer,
    *,
    pending_new: int,
    now: float | None = None,
    exclude: np.ndarray | None = None,
    urls_of: Callable[[np.ndarray], list[str]] | None = None,
    providers: Sequence[ColumnProvider] = (),
    selector: Selector | None = None,
    groups: GroupIndex | None = None,
    hubs: tuple[np.ndarray, np.ndarray] | None = None,
    check_spread: bool = False,
) -> CyclePlan:
    """Decide cycle ``arrays.cycle``: its budget, its recrawls and its new-URL quota.

    ``pending_new`` frontier URLs wait from earlier cycles; ``exclude`` holds ids
    still in flight (not candidates); ``providers`` add columns first; a
    ``selector`` (plan mode) replaces the scored top-k once the warm-up is over.
    ``groups`` (with ``urls_of``) gives the ``group`` column of the pooled-prior
    terminals when the scorer uses one (core/groups.py: URLs of new ids only).
    ``hubs`` is ``(ids, rates)``: the pages whose refetches keep yielding new links and
    their new links per cycle (core/hubs.py); those due are taken first.
    ``check_spread``: the selection also says how the scores spread
    (core/score_check.py; the crawl asks until it is conclusive).
    """
    t0 = time.perf_counter()
    now = time.time() if now is None else now
    for provider in providers:
        arrays.columns.update(provider.columns(arrays, now))
    if groups is not None and urls_of is not None and scorer.terminals_needed & POOLED_NAMES:
        arrays.columns[GROUP_COLUMN] = groups.codes(arrays.ids, urls_of, arrays.cycle)
    cycle = arrays.cycle
    warmup = cycle <= config.warmup_cycles
    known = int((~arrays.columns["gone"]).sum())
    budget = cycle_budget(
        config.budget,
        config.new_share,
        known,
        warmup=warmup,
        backlog=pending_new,
        max_share=config.new_share_max,
        maximum=config.budget_max,
    )
    # New URLs waiting from earlier cycles get first call on the new share;
    # whatever the recrawls leave of it flows to them (and back).
    new_quota = pending_new if budget.new is None else min(pending_new, budget.total or 0)
    k = None if budget.total is None else budget.total - min(budget.new or 0, pending_new)
    hubs_due = 0
    if hubs is not None and k and selector is None and not warmup:
        hubs_due = _mark_due_hubs(arrays, hubs, k)
    monitor_share = config.monitor_share
    if selector is not None and budget.total is not None:
        monitor_share = 0.0
        # Plan mode: the selector's pick replaces the scorer and RECRAWL_NEW_SHARE
        # (monitoring and the per-host cap do not apply: docs/planning.md)
        candidates, waiting = candidate_mask(arrays, exclude)
        selection, new_quota = selector.select(arrays, budget, candidates, pending_new)
        selection.backed_off = waiting
    else:
        selection = select_recrawls(
            arrays,
            scorer,
            k,
            now=now,
            exclude=exclude,
            monitor_share=config.monitor_share,
            seed=config.seed,
            max_per_domain=config.max_per_domain,
            urls_of=urls_of,
            check_spread=check_spread,
        )
    cut = 0
    if config.adaptive_budget is not None and selector is None and budget.total is not None:
        selection, cut = _cut(arrays, selection, scorer, config.adaptive_budget)
        if cut:
            # the recrawls kept, and the new URLs' share as it was (a quiet site may still
            # grow); the rest of the budget is not spent
            kept = len(selection.ids) - selection.monitored
            budget = Budget(min(budget.total, kept + (budget.new or 0)), budget.new)
    if selection.monitored and budget.total is not None:
        # the monitoring sample is fetched on top of the budget (never in its pages)
        budget = Budget(budget.total + selection.monitored, budget.new, selection.monitored)
    return CyclePlan(
        cycle,
        warmup,
        budget,
        selection,
        new_quota,
        time.perf_counter() - t0,
        adaptive_cut=cut,
        backlog=pending_new,
        hubs_due=hubs_due,
        monitor_share=monitor_share,
        clock_behind=clock_behind(arrays, now),
    )


def _mark_due_hubs(arrays: HistoryArrays, hubs: tuple[np.ndarray, np.ndarray], k: int) -> int:
    """Mark the hubs due this cycle in the DUE_NOW column (with what a plug-in marked);
    returns how many."""
    ids, rates = (np.asarray(a) for a in hubs)
    if ids.size == 0:
        return 0
    rows = np.searchsorted(arrays.ids, ids)  # arrays.ids ascending
    inside = rows < arrays.ids.size
    inside[inside] = arrays.ids[rows[inside]] == ids[inside]
    rows, rates = rows[inside], rates[inside]
    cols = arrays.columns
    live = ~np.asarray(cols["gone"], dtype=bool)[rows]
    rows, rates = rows[live], rates[live]
    t = arrays.cycle - np.asarray(cols["last_visit_cycle"])[rows]
    due = rows[due_hubs(rates, t, k)]
    if due.size:
        mark = np.zeros(arrays.ids.size, dtype=bool)
        if DUE_NOW in cols:
            mark |= np.asarray(cols[DUE_NOW], dtype=bool)
        mark[due] = True
        cols[DUE_NOW] = mark
    return int(due.size)


def _cut(
    arrays: HistoryArrays, selection: Selection, scorer: Scorer, threshold: float
) -> tuple[Selection, int]:
    """The selection without the scored picks RECRAWL_ADAPTIVE_BUDGET leaves out (the
    monitoring sample is kept: it is outside the budget), and how many those are."""
    mon = selection.monitored
    picks = selection.ids[mon:]
    rows = np.searchsorted(arrays.ids, picks)  # arrays.ids ascending
    keep = adaptive_cut(arrays.columns, rows, arrays.cycle, scorer.prior, threshold)
    cut = len(picks) - keep
    if cut:
        selection = dataclasses.replace(
            selection,
            ids=selection.ids[: mon + keep],
            scores=selection.scores[: mon + keep],
        )
    return selection, cut


def cycle_done(
    config: CycleConfig,
    *,
    work_left: Callable[[], bool],
    elapsed: float,
    period_elapsed: float,
) -> bool:
    """Continuous mode: the open cycle is over -- it has run ``RECRAWL_CYCLE_SECONDS``
    (``elapsed``), or its period is over (``period_elapsed`` seconds since the start of
    the period it opened in: the next cycle starts then), or it has nothing left to do
    (``work_left()`` False, asked only when its time is not up: its budget handed out or
    its queues empty, and nothing in flight)."""
    if elapsed >= config.cycle_seconds or period_elapsed >= config.cycle_period:
        return True
    return not work_left()


def next_period_start(config: CycleConfig, period_start: float, now: float) -> float:
    """When the cycle after one opened in the period starting at ``period_start`` opens
    (continuous mode): the next period's start, ``RECRAWL_CYCLE_PERIOD`` seconds later.

    At or before ``now``: open it now, in the period that starts then. Starts missed by a
    whole period or more (a cycle cannot run into the next period, so only a crawl that
    was held up misses one) are skipped: the result is then the last start of the same
    grid before ``now``, so the cycles stay one per period and on the grid."""
    period = config.cycle_period
    due = period_start + period
    if now < due:
        return due
    return due + period * math.floor((now - due) / period)


def cycles_remain(config: CycleConfig, cycles_run: int) -> bool:
    """Continuous mode: another cycle may open (``RECRAWL_MAX_CYCLES``, 0: no limit)."""
    return not (config.max_cycles and cycles_run >= config.max_cycles)


def side_order(
    budget: Budget, taken_new: int, taken_recrawl: int, *, quiet: Callable[[], bool]
) -> list[tuple[str, int | None]]:
    """Which queue a budgeted request comes from: ``[(side, quota), ...]`` to try in order.

    Both sides within quota: interleaved in proportion to the two quotas, so
    neither waits for the other. One side's quota spent and nothing in flight
    can discover more new URLs (``quiet()``, asked only then): the other side's unused share flows
    to what is left (quota None). Empty: wait, responses in flight may still
    bring new URLs.
    """
    rec_quota = budget.recrawl is None or taken_recrawl < budget.recrawl
    new_quota = budget.new is None or taken_new < budget.new
    order: list[tuple[str, int | None]]
    if rec_quota and new_quota:
        take_new = taken_new / max(1, budget.new or 1) < taken_recrawl / max(1, budget.recrawl or 1)
        order = [("new", budget.new), ("recrawl", budget.recrawl)]
        if not take_new:
            order.reverse()
    elif new_quota:
        order = [("new", budget.new)]
    elif rec_quota:
        order = [("recrawl", budget.recrawl)]
    else:
        order = []
    if len(order) < 2 and quiet():
        order += [(side, None) for side in ("new", "recrawl") if side not in dict(order)]
    return order
