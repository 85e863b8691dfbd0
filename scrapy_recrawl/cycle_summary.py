"""This process's figures for each cycle: counted as visits are recorded, summed up when
the cycle ends for this process, in one INFO line, in ``crawler.stats`` and in the
store's per-cycle record (:mod:`scrapy_recrawl.history.cycle_log`).

The scheduler knows why a request was sent (it tags it with ``META_KIND``: recrawl,
new, monitor, probe); the middleware knows what came back. Both share one
:class:`CycleTally` per crawler (:func:`tally_for_crawler`): the middleware calls
:meth:`CycleTally.count` once per visit it records, the frontier calls
:meth:`CycleTally.end` when a cycle ends for this process (a continuous roll-over,
another process's roll-over adopted, the spider closing).

A visit counts in the cycle it is recorded under in the visit log (the request's
``META_CYCLE``, else the store's current cycle), so the record and the log agree.
A response still downloading when its cycle ended (a continuous roll-over) is pushed
with the next summary, as a second, late summary of its cycle.

The tally also carries the crawl's wall clock (:meth:`CycleTally.wall`): this machine's
plus ``clock_offset``, which a shared frontier sets to the shared store's clock less this
machine's (the Redis's ``TIME``), so every time kept where other processes read it (a
visit's, a cycle summary's, a cycle's planning time) is in one clock for all.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import fields
from typing import Any

import numpy as np
from scrapy import Request

from .core.budget import Budget
from .core.groups import GroupIndex
from .core.meta import KIND_MONITOR, KIND_NEW, KIND_PROBE, KIND_RECRAWL, KIND_START, META_KIND
from .history.base import HistoryStoreError
from .history.cycle_log import COUNTS, CycleSummary, push_summary, save_freshness
from .history.epoch import StoreLost
from .last_modified import prior_ages
from .runtime import CrawlerRuntime
from .scoring.freshness import FreshnessEstimate, PriorAge, estimate_freshness

logger = logging.getLogger("scrapy_recrawl.scheduler")

#: the outcomes the middleware reports (a CycleSummary counter each)
OUTCOMES = ("changed", "unchanged", "not_modified", "errors", "failed", "gone")
KINDS = (KIND_RECRAWL, KIND_NEW, KIND_MONITOR, KIND_PROBE, KIND_START)
#: where the figures of the last cycle this process ended go in crawler.stats
STATS_PREFIX = "recrawl/last_cycle/"
#: new URLs waiting for a later cycle when the last cycle ended
BACKLOG_STAT = "recrawl/backlog"
#: the estimated freshness of the known pages at the end of a cycle (scoring/freshness.py),
#: its 90% interval, the pages it is over, and which cycle that is
FRESHNESS_STAT = "recrawl/freshness_estimate"
FRESHNESS_LOW_STAT = "recrawl/freshness_estimate_low"
FRESHNESS_HIGH_STAT = "recrawl/freshness_estimate_high"
FRESHNESS_PAGES_STAT = "recrawl/freshness_estimate_pages"
FRESHNESS_CYCLE_STAT = "recrawl/freshness_estimate_cycle"


def freshness_estimate(
    columns: Any,
    cycle: int,
    group: np.ndarray | None = None,
    prior_age: PriorAge | None = None,
) -> FreshnessEstimate | None:
    """The freshness of the known pages at the end of ``cycle`` (the cycle before the one
    opening), from the store's columns as a cycle's opening reads them: the one estimator
    of scoring/freshness.py over the URLs fetched at least once and not gone, each with
    its ``n``, ``X``, first recorded cycle and last good fetch; ``group``: each URL's
    host code (the pooled prior's group); ``prior_age``: the URLs' Last-Modified ages at
    their first fetch (last_modified.py). recrawl-report's figure for that cycle
    (insight/cycles.py) is the same from the visit log. None when the store hands out no
    ``first_cycle`` (no interval is known then)."""
    first = columns.get("first_cycle")
    if first is None:
        return None
    live = ~np.asarray(columns["gone"], dtype=bool) if "gone" in columns else None
    return estimate_freshness(
        columns["n"],
        columns["X"],
        first,
        columns["last_visit_cycle"],
        cycle,
        known=live,
        group=group,
        prior_age=prior_age,
    )


def kind_of(request: Request, first: bool = False) -> str:
    """The request's kind as the scheduler tagged it. Untagged: a request the spider sent
    outside the budget (a start request, its own ``dont_filter`` request), counted as
    ``start``, apart from the budget's pages, whether it was the URL's first visit or not
    (``first`` is kept for callers that pass it)."""
    kind = request.meta.get(META_KIND)
    if kind in KINDS:
        return str(kind)
    return KIND_START


class CycleTally:
    """Per-cycle counters of one process (module docstring)."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats
        self._cycles: dict[int, CycleSummary] = {}
        self._ended: set[int] = set()  # cycles this process has summed up already
        # visits with no outcome (a first fetch, nothing to compare), per cycle: the line's
        # "first fetch" (not derivable from the summary: "gone" may come on top of "failed")
        self._unobserved: Counter[int] = Counter()
        #: this machine's wall clock (a test may set its own)
        self.clock: Any = time.time
        #: seconds to add to it for the shared store's (0: one process)
        self.clock_offset = 0.0

    def wall(self) -> float:
        """The crawl's wall clock: seconds since the epoch, in the shared store's time."""
        return float(self.clock()) + self.clock_offset

    def count(
        self, request: Request, cycle: int, first: bool, outcome: str | None, *, gone: bool = False
    ) -> None:
        """One visit recorded in the visit log under ``cycle``, of the request's kind
        (:func:`kind_of`), with ``outcome`` (one of :data:`OUTCOMES`; None: a first
        fetch, nothing to compare); ``gone``: a failed download that made the URL gone
        (counted "gone" on top of "failed")."""
        c = int(cycle)
        kind = kind_of(request, first)
        summary = self._cycles.get(c)
        if summary is None:
            now = self.wall()
            summary = self._cycles[c] = CycleSummary(c, now, now)
        setattr(summary, kind, getattr(summary, kind) + 1)
        if outcome is None:
            self._unobserved[c] += 1
        else:
            setattr(summary, outcome, getattr(summary, outcome) + 1)
        if gone:
            summary.gone += 1
        summary.ended = self.wall()

    def end(
        self,
        store: Any,
        cycle: int,
        budget: Budget,
        seconds: float,
        *,
        shared: bool = False,
        backlog: int = 0,
    ) -> CycleSummary:
        """``cycle`` has ended for this process: say its figures once (INFO line, stats),
        push them to the store, and push any late visits of cycles ended before.
        ``backlog``: new URLs left waiting for a later cycle."""
        now = self.wall()
        summary = self._cycles.pop(cycle, None) or CycleSummary(cycle, now - seconds, now)
        summary.started = min(summary.started, now - seconds)
        summary.ended = now
        summary.backlog = backlog
        late = [self._cycles.pop(c) for c in sorted(self._cycles) if c < cycle]
        first = self._unobserved.pop(cycle, 0)
        for c in [c for c in self._unobserved if c < cycle]:
            del self._unobserved[c]
        if cycle not in self._ended:
            self._ended.add(cycle)
            self._say(summary, budget, seconds, first, shared)
        for part in [summary, *late]:
            if _anything(part) or part is summary and part.backlog:
                push_summary(store, part)
        return summary

    def open_cycle(self, store: Any, arrays: Any, groups: GroupIndex) -> FreshnessEstimate | None:
        """A cycle opens with the store's ``arrays``: the estimated freshness of the known
        pages as the cycle before it ended, in the stats and one INFO line
        (:meth:`note_state`), and kept in the store's record of that cycle
        (history/cycle_log.py :func:`~scrapy_recrawl.history.cycle_log.save_freshness`),
        which ``recrawl-report`` reads instead of refitting it. Each URL's host is its
        group (``groups``: the scheduler's cache, :class:`~scrapy_recrawl.core.groups.GroupIndex`);
        the Last-Modified ages are read for the URLs the estimate fits only. The
        scheduler calls it as it plans a cycle (once: on Redis, the process opening it),
        and bench/report_scale.py as it builds a store as a crawl would."""
        hosts = groups.codes(arrays.ids, store.urls, arrays.cycle)
        ids, ended = arrays.ids, arrays.cycle - 1

        def ages(pos: np.ndarray) -> np.ndarray:  # only the URLs the estimate fits
            return prior_ages(store, ids[pos], store.urls(ids[pos]), ended)

        est = self.note_state(arrays.columns, arrays.cycle, hosts, prior_age=ages)
        if est is not None:
            try:
                save_freshness(store, est.cycle, est.share, est.low, est.high, est.pages)
            except StoreLost:
                raise  # the crawl stops, said once (history/epoch.py)
            except HistoryStoreError as exc:  # the report fits it from the log instead
                logger.error(
                    "recrawl: could not keep the freshness estimate of cycle %d: %s",
                    est.cycle,
                    exc,
                )
        return est

    def note_state(
        self,
        columns: Any,
        cycle: int,
        group: np.ndarray | None = None,
        prior_age: PriorAge | None = None,
    ) -> FreshnessEstimate | None:
        """A cycle opens with the store's ``columns``: the estimated freshness of the
        known pages as the cycle before it ended goes in the stats
        (:data:`FRESHNESS_STAT`, its interval, pages and :data:`FRESHNESS_CYCLE_STAT`)
        and is returned (None: no cycle before, no interval known, or nothing fetched).
        Here, not at the cycle's end, because the opening reads the columns anyway: the
        estimate costs no read. ``group``: each URL's host code."""
        if cycle < 2:
            return None
        est = freshness_estimate(columns, cycle - 1, group, prior_age)
        if est is None or est.pages == 0:  # no interval known, or nothing fetched yet
            return None
        if self.stats is not None:
            self.stats.set_value(FRESHNESS_STAT, round(est.share, 4))
            self.stats.set_value(FRESHNESS_LOW_STAT, round(est.low, 4))
            self.stats.set_value(FRESHNESS_HIGH_STAT, round(est.high, 4))
            self.stats.set_value(FRESHNESS_PAGES_STAT, est.pages)
            self.stats.set_value(FRESHNESS_CYCLE_STAT, cycle - 1)
        logger.info(
            "recrawl cycle %d: estimated freshness of the %d known pages %.1f%% "
            "(90%% interval %.1f-%.1f%%)",
            cycle - 1,
            est.pages,
            100 * est.share,
            100 * est.low,
            100 * est.high,
        )
        return est

    def _say(
        self, s: CycleSummary, budget: Budget, seconds: float, first: int, shared: bool
    ) -> None:
        if self.stats is not None:
            self.stats.set_value(f"{STATS_PREFIX}cycle", s.cycle)
            self.stats.set_value(f"{STATS_PREFIX}seconds", round(seconds, 3))
            self.stats.set_value(f"{STATS_PREFIX}fetched", s.fetched)
            # RECRAWL_BUDGET's pages (the monitoring sample apart); 0: no budget (a
            # warm-up), as the store's plan has it
            self.stats.set_value(f"{STATS_PREFIX}budget", budget.pages or 0)
            for name in COUNTS:
                self.stats.set_value(f"{STATS_PREFIX}{name}", getattr(s, name))
            self.stats.set_value(f"{STATS_PREFIX}backlog", s.backlog)
            self.stats.set_value(BACKLOG_STAT, s.backlog)
            self.stats.inc_value("recrawl/cycles_summarized")
        logger.info("%s", summary_line(s, budget.pages, seconds, first, shared=shared))


def summary_line(
    s: CycleSummary, budget: int | None, seconds: float, first: int = 0, *, shared: bool = False
) -> str:
    """The one INFO line of a cycle's end, in the manner of Scrapy's LogStats; ``budget``:
    RECRAWL_BUDGET's pages (None: a warm-up), against which the recrawls, new URLs and
    probes count, the monitoring sample and the spider's start requests apart;
    ``first``: the visits with nothing to compare (a first fetch), which have no outcome
    of their own."""
    who = "this process fetched" if shared else "fetched"
    kinds = f"recrawl {s.recrawl}, new {s.new}, probe {s.probe}"
    outside = f"monitor {s.monitor}, start {s.start}"
    spent = (
        f"{who} {s.fetched} (warm-up, no budget: {kinds}; {outside})"
        if budget is None
        else f"{who} {s.fetched} ({s.budgeted} of a budget of {budget}: {kinds}; "
        f"outside the budget: {outside})"
    )
    fresh = f"first fetch {first}, " if first else ""
    return (
        f"recrawl cycle {s.cycle} done in {seconds:.0f} s: {spent}, backlog {s.backlog}, "
        f"{fresh}changed {s.changed}, unchanged {s.unchanged}, 304 {s.not_modified}, "
        f"errors {s.errors}, failed {s.failed}, gone {s.gone}"
    )


def _anything(s: CycleSummary) -> bool:
    return any(getattr(s, f.name) for f in fields(s) if f.name in COUNTS)


def tally_for_crawler(crawler: Any) -> CycleTally:
    """The one tally shared by this crawler's scheduler (frontier) and middleware (kept
    by its runtime: runtime.py)."""
    return CrawlerRuntime.of(crawler).part(
        CycleTally, lambda: CycleTally(getattr(crawler, "stats", None))
    )
