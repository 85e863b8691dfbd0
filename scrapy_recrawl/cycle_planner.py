"""What the scheduler does at each end of a cycle: decide it, say it, keep its record.

A frontier (frontier/base.py) says *when* a cycle opens and ends; this module is the
scheduler's part then, the same for both frontiers:

* :meth:`CyclePlanner.plan_cycle`: advance the store's cycle counter and let the cycle
  core (:func:`scrapy_recrawl.core.cycle.plan_cycle`) decide the cycle from the
  store's columns, the scorer and the plug-ins; warn once when the scorer cannot tell
  URLs apart (core/score_check.py) and when the wall clock went back; keep the plan
  in the store (history/cycle_log.py);
* :meth:`CyclePlanner.log_cycle`: the cycle's opening INFO line and stats;
* :meth:`CyclePlanner.end_cycle`: the cycle's figures for this process (hubs, the
  Last-Modified tally, its summary: cycle_summary.py).
"""

from __future__ import annotations

import logging

import numpy as np
from scrapy.crawler import Crawler

from .core.budget import Budget
from .core.cycle import CLOCK_SLACK, CycleConfig, CyclePlan, plan_cycle
from .core.groups import GroupIndex
from .cycle_summary import CycleTally, tally_for_crawler
from .history import HistoryStore, HistoryStoreError, StoreLost, cycle_log
from .hubs import hubs_for_crawler
from .hubs import keep as keep_hubs
from .hubs import read as read_hubs
from .last_modified import keep as keep_last_modified
from .last_modified import tally_for_crawler as last_modified_tally
from .plugins import Plugins, scorer_for_crawler
from .settings import get as get_setting

logger = logging.getLogger("scrapy_recrawl.scheduler")


class CyclePlanner:
    """The scheduler's part of a cycle's decision and record (module docstring), for one
    crawl: built with the scheduler (the scorer parsed then), opened with its store."""

    def __init__(self, crawler: Crawler, config: CycleConfig) -> None:
        self.crawler = crawler
        self.config = config
        # Parsed now: a bad RECRAWL_SCORER stops the crawl before it starts.
        self.scorer = scorer_for_crawler(crawler)
        # as configured (a preset name or the expression), its default when unset:
        # the name each cycle's plan keeps (_save_plan)
        self.scorer_name = str(get_setting(crawler.settings, "RECRAWL_SCORER"))
        # each URL id's group (the pooled priors' column), read once per process
        self.group_index = GroupIndex()
        self._store: HistoryStore | None = None
        self.plugins = Plugins()
        self._spread_known = False  # the scorer's spread checked (core/score_check.py)

    def open(self, store: HistoryStore, plugins: Plugins) -> None:
        """The crawl's store is open, its plug-ins built: cycles can be planned."""
        self._store, self.plugins = store, plugins

    @property
    def store(self) -> HistoryStore:
        assert self._store is not None, "the scheduler is not open"
        return self._store

    def follow_clock(self, now: float) -> None:
        """The crawl's wall clock (visits, summaries, plans) reads ``now`` at this
        instant: a shared cycle's clock (the Redis's), whatever this machine's says."""
        tally = self.tally
        tally.clock_offset = now - float(tally.clock())

    def plan_cycle(self, exclude: np.ndarray | None = None) -> CyclePlan:
        """Advance the store's cycle counter and let the cycle core decide the new cycle
        (both frontiers call it to open a cycle)."""
        store = self.store
        store.advance_cycle()
        arrays = store.arrays()
        # the previous cycle's estimated freshness, from the columns read here anyway,
        # each URL's host its group (the URLs of new ids read once: core/groups.py),
        # in the stats and kept in that cycle's record (cycle_summary.py)
        self.tally.open_cycle(store, arrays, self.group_index)
        plan = plan_cycle(
            arrays,
            self.config,
            self.scorer,
            pending_new=store.frontier_size(),
            # the crawl's wall clock (on Redis, the Redis's: cycle_summary.py)
            now=self.tally.wall(),
            exclude=exclude,
            urls_of=store.urls,
            providers=self.plugins.column_providers,
            selector=self.plugins.selector,
            groups=self.group_index,
            hubs=read_hubs(store),
            check_spread=not self._spread_known,
        )
        self._check_spread(plan)
        self._check_clock(plan)
        self._save_plan(plan)
        return plan

    def _check_clock(self, plan: CyclePlan) -> None:
        """A wall clock that went back (a day, say) puts the store's newest visits in
        the future: said at the cycle, with the stat; ``hours`` counts them from 0."""
        if plan.clock_behind <= CLOCK_SLACK:
            return
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value("recrawl/clock_went_back")
            stats.set_value("recrawl/clock_behind_seconds", round(plan.clock_behind))
        logger.warning(
            "recrawl: cycle %d: the wall clock reads %.0f s before the newest visit in the "
            "history store at %s: it went back (set it right, e.g. with NTP); until it "
            "catches up, pages visited 'later' count 0 hours since their visit",
            plan.cycle,
            plan.clock_behind,
            self.store.location,
        )

    def _check_spread(self, plan: CyclePlan) -> None:
        """Warn once if the scorer gives most URLs one score, or none, though their
        history tells them apart (core/score_check.py); asked at each cycle until one
        is conclusive, then never again in this crawl."""
        spread = plan.selection.spread
        if spread is None or not spread.conclusive:
            return
        self._spread_known = True
        scorer = self.scorer
        message = spread.warning(
            "RECRAWL_SCORER",
            self.scorer_name,
            ", ".join(sorted(scorer.terminals_needed)),
            expression=scorer.expression,
        )
        if message is not None:
            logger.warning("recrawl: %s", message)

    def _save_plan(self, plan: CyclePlan) -> None:
        """Keep what the cycle was planned to do (history/cycle_log.py): here, where both
        frontiers plan a cycle, once (on Redis by the process opening it, under the lock).

        The picks kept are the scored recrawls, best first (the monitoring sample, scored
        +inf, is no pick of the scorer's); the cut-off is the lowest of their scores, None
        when the scorer picked nothing: a warm-up (everything is fetched) or plan mode
        (a selector picked)."""
        sel = plan.selection
        ids, scores = sel.ids[sel.monitored :], sel.scores[sel.monitored :]
        scored = not plan.warmup and self.plugins.selector is None and len(scores) > 0
        # the cut-off is the scorer's: not lowered by the picks a plug-in made due now
        own = scores[sel.due :]
        cutoff = float(np.min(own)) if scored and len(own) and np.isfinite(own).all() else None
        record = cycle_log.CyclePlan(
            cycle=plan.cycle,
            planned_at=self.tally.wall(),
            # RECRAWL_BUDGET's pages, the monitoring sample apart; 0: no budget (a warm-up)
            budget=plan.budget.pages or 0,
            scorer=self.scorer_name,
            candidates=sel.scored,
            cutoff=cutoff,
            picks=len(ids),
            backlog=plan.backlog,
            new_share=plan.budget.new or 0,
            monitor=sel.monitored,
            # the sample's membership (monitor_mask of every id): what recrawl-evolve
            # and recrawl-report --export read back, with no setting repeated
            monitor_share=float(plan.monitor_share),
            monitor_seed=self.config.seed,
        )
        cycle_log.save_plan(self.store, record, ids if scored else None, scores if scored else None)

    @property
    def tally(self) -> CycleTally:
        return tally_for_crawler(self.crawler)

    def end_cycle(
        self, cycle: int, budget: Budget, seconds: float, *, shared: bool, backlog: int = 0
    ) -> None:
        """``cycle`` ended for this process: its figures in one INFO line, in the stats and
        in the store (cycle_summary.py)."""
        try:
            keep_hubs(self.store, hubs_for_crawler(self.crawler))
            keep_last_modified(self.store, last_modified_tally(self.crawler))
            self.tally.end(self.store, cycle, budget, seconds, shared=shared, backlog=backlog)
        except HistoryStoreError as exc:  # the figures are lost, the crawl goes on
            if isinstance(exc, StoreLost):
                return  # said once, as the crawl stops (history/epoch.py)
            logger.error("recrawl: could not keep the summary of cycle %d: %s", cycle, exc)

    def log_cycle(self, plan: CyclePlan, scheduled: int) -> None:
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value("recrawl/cycle", plan.cycle)
            stats.inc_value("recrawl/scheduled", scheduled)
            stats.set_value("recrawl/scored_urls", plan.selection.scored)
            stats.inc_value("recrawl/score_seconds", plan.score_seconds)  # type: ignore[arg-type]
            stats.inc_value("recrawl/monitored", plan.selection.monitored)
            # stored requests that were not data (skipped, each said in a warning)
            unreadable = self.store.unreadable_values
            if unreadable:
                stats.set_value("recrawl/unreadable_stored_requests", unreadable)
            if plan.selection.backed_off:
                stats.inc_value("recrawl/backed_off", plan.selection.backed_off)
            if plan.adaptive_cut:  # RECRAWL_ADAPTIVE_BUDGET: pages not spent
                stats.inc_value("recrawl/adaptive_budget_cut", plan.adaptive_cut)
            if plan.hubs_due:  # pages that keep yielding new links, taken first
                stats.inc_value("recrawl/hubs_due", plan.hubs_due)
        logger.info(
            "recrawl cycle %d: %s; scored %d known URLs with %s in %.2fs, %d recrawls queued "
            "(%d monitored, on top of the budget; %d hubs due), %d new URLs from the frontier "
            "(backlog %d), %d failing URLs backed off",
            plan.cycle,
            "warm-up, no budget"
            if plan.warmup
            else f"budget {plan.budget.pages} pages (new URLs' share {plan.budget.new})",
            plan.selection.scored,
            self.scorer,
            plan.score_seconds,
            scheduled,
            plan.selection.monitored,
            plan.hubs_due,
            plan.new_quota,
            plan.backlog,
            plan.selection.backed_off,
        )
