"""WebFountain plan mode (paper 003) as a plug-in: per-bucket quotas replace the top-k.

Listed in ``RECRAWL_PLUGINS_BASE``; on when ``RECRAWL_PLANNER = "webfountain"``.
Offers the scheduler a selector: each cycle's recrawls and new-URL quota come
from the plan (docs/planning.md); monitoring and the per-host cap do not apply.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from ..core.budget import Budget
from ..core.selection import Selection
from ..history.base import HistoryArrays
from ..scoring.registry import Terminal
from ..scoring.terminals import prior_from_settings
from ..settings import RecrawlSettingError, get

logger = logging.getLogger(__name__)


def make_planner(settings: Any) -> Any:
    """The WebFountain planner the RECRAWL_PLAN_* settings describe (needs the `planning` extra)."""
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise RecrawlSettingError(
            "RECRAWL_PLANNER='webfountain' needs scipy: pip install 'scrapy-recrawl[planning]'"
        ) from None
    from .model import PlanError
    from .webfountain import WebFountainPlanner

    strategy = get(settings, "RECRAWL_PLAN_STRATEGY")
    try:
        return WebFountainPlanner(
            strategy,
            periods=get(settings, "RECRAWL_PLAN_PERIODS"),
            plan_every=get(settings, "RECRAWL_PLAN_EVERY"),
            n_buckets=get(settings, "RECRAWL_BUCKETS"),
            prior=prior_from_settings(settings),
        )
    except PlanError as exc:
        raise RecrawlSettingError(
            f"RECRAWL_PLAN_STRATEGY={strategy!r} / RECRAWL_PLAN_*: {exc}"
        ) from None


class WebFountainPlugin:
    """Plan mode: recrawls by per-bucket quotas from the WebFountain optimisation."""

    terminals: ClassVar[tuple[Terminal, ...]] = ()  # it adds none
    api_version = "1"
    capabilities: ClassVar[frozenset[str]] = frozenset({"selector"})
    selects = True

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        return get(settings, "RECRAWL_PLANNER") is not None

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        make_planner(settings)

    @classmethod
    def from_crawler(
        cls, crawler: Any, store: Any, terminals_needed: frozenset[str]
    ) -> WebFountainPlugin:
        return cls(make_planner(crawler.settings), crawler.stats)

    def __init__(self, planner: Any, stats: Any = None) -> None:
        self.planner = planner
        self.stats = stats

    def select(
        self, arrays: HistoryArrays, budget: Budget, candidates: np.ndarray, new_waiting: int
    ) -> tuple[Selection, int]:
        picked = self.planner.select(
            arrays.columns,
            arrays.cycle,
            int(budget.total or 0),
            candidates=candidates,
            new_waiting=new_waiting,
        )
        if self.stats is not None:
            self.stats.set_value("recrawl/plan_period", picked.period)
            self.stats.set_value("recrawl/plan_solves", self.planner.plans_solved)
            self.stats.set_value("recrawl/plan_seconds", self.planner.solve_seconds)
        if self.planner.last_error:
            logger.warning(
                "recrawl: the WebFountain plan failed (%s); oldest-first by bucket rate this cycle",
                self.planner.last_error,
            )
        selection = Selection(
            ids=arrays.ids[picked.indices],
            scores=np.asarray(picked.scores, dtype=np.float64),
            monitored=0,
            scored=int(candidates.sum()),
        )
        new_quota = min(new_waiting, max(0, int(budget.total or 0) - len(picked.indices)))
        return selection, new_quota
