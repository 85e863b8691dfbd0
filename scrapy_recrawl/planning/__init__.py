"""Planning mode: the WebFountain crawl-plan model (Edwards, McCurley & Tomlin 2001).

Instead of ranking every URL by a score, plan mode groups URLs into
change-rate buckets (one byte each, :mod:`.buckets`), solves the paper's
optimisation for how many pages of each bucket to recrawl in each of the
next ``T`` cycles and how many new pages to fetch (:mod:`.webfountain`),
follows those quotas (oldest-visited first inside a bucket) and re-solves
from fresh bucket statistics every few cycles. :mod:`.replay` replays the
policy over change histories with the simulator's metrics.

Solving needs scipy (``pip install 'scrapy-recrawl[planning]'``); bucketing
does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .buckets import (
        MAX_BUCKETS,
        BucketAssignment,
        BucketStats,
        assign_buckets,
        bucket_stats,
        change_rates,
        select_by_quotas,
    )
    from .model import STRATEGIES, Plan, PlanError, Weights, paper_instance, strategy_weights
    from .solver import solve_plan
    from .webfountain import PlannedSelection, WebFountainPlanner

#: where each public name lives: imported on first use (PEP 562), so that loading the
#: plug-in (planning/plugin.py) to read its terminals costs no model, solver or buckets
_HOME = {
    **dict.fromkeys(
        (
            "MAX_BUCKETS",
            "BucketAssignment",
            "BucketStats",
            "assign_buckets",
            "bucket_stats",
            "change_rates",
            "select_by_quotas",
        ),
        "buckets",
    ),
    **dict.fromkeys(
        ("STRATEGIES", "Plan", "PlanError", "Weights", "paper_instance", "strategy_weights"),
        "model",
    ),
    "solve_plan": "solver",
    "PlannedSelection": "webfountain",
    "WebFountainPlanner": "webfountain",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value  # the next look-up is a plain one
    return value


__all__ = [
    "MAX_BUCKETS",
    "STRATEGIES",
    "BucketAssignment",
    "BucketStats",
    "Plan",
    "PlanError",
    "PlannedSelection",
    "WebFountainPlanner",
    "Weights",
    "assign_buckets",
    "bucket_stats",
    "change_rates",
    "paper_instance",
    "select_by_quotas",
    "solve_plan",
    "strategy_weights",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
