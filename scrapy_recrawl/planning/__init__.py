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
