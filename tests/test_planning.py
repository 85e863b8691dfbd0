"""The WebFountain model: solved plans keep constraints (1)-(6), bad inputs fail clearly,
and the three strategies of the paper's section 5.1 have the paper's shapes."""

from __future__ import annotations

import numpy as np
import pytest

from .extras import require_extra

require_extra("planning")

from scrapy_recrawl.planning import (  # noqa: E402
    STRATEGIES,
    PlanError,
    Weights,
    paper_instance,
    solve_plan,
    strategy_weights,
)

SMALL = dict(
    bucket_sizes=[120.0, 80.0, 50.0, 30.0],
    change_rates=[0.02, 0.1, 0.3, 0.7],
    periods=5,
    budget=60.0,
    new_pages=20.0,
    new_arrivals=4.0,
    old_new_prob=0.05,
    new_new_prob=0.3,
)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_solved_plan_satisfies_every_constraint(strategy):
    plan = solve_plan(**SMALL, weights=strategy)
    assert plan.success, plan.status
    assert plan.x.shape == plan.y.shape == plan.b.shape == (5, 4)
    assert plan.n.shape == plan.z.shape == (5,)
    tol = 1e-4 * max(SMALL["bucket_sizes"])
    for name, worst in plan.violations().items():
        assert worst <= tol, (name, worst)
    # the budget is (nearly) used: crawling never makes a copy staler
    used = plan.x.sum(axis=1) + plan.z
    assert (used <= SMALL["budget"] * (1 + 1e-6)).all()
    assert used.sum() >= 0.8 * SMALL["budget"] * 5
    # quotas: whole pages, within the bucket, adding up to the rounded plan
    for t in range(5):
        q = plan.quotas(t)
        assert q.dtype == np.int64 and (q >= 0).all()
        cap = np.floor((plan.b0 if t == 0 else plan.b[t - 1]) + 1e-9)
        assert (q <= cap).all()
        assert abs(q.sum() - np.minimum(plan.x[t], cap).sum()) < 1.0
        assert plan.new_quota(t) == round(plan.z[t])
    assert plan.objective == pytest.approx(
        float((plan.weights.old * plan.y).sum() + (plan.weights.new * plan.n).sum())
    )


def test_plan_beats_its_uniform_warm_start():
    inst = dict(SMALL, new_pages=0.0, new_arrivals=0.0, old_new_prob=0.0, new_new_prob=0.0)
    plan = solve_plan(**inst, weights="strategy1")
    b0 = np.asarray(inst["bucket_sizes"])
    a = np.asarray(inst["change_rates"])
    y = b0 * (1 - ((1 - a)[None, :] ** np.arange(1, 6)[:, None]).mean(axis=0))
    uniform = 0.0
    x = inst["budget"] * b0 / b0.sum()
    for _ in range(5):
        y = (1 - x / b0) * ((1 - a) * y + a * b0)
        uniform += y.sum()
    assert plan.objective < 0.97 * uniform


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(budget=0.0), "budget is 0"),
        (dict(budget=[60, 60, 0, 60, 60]), "period 3"),
        (dict(bucket_sizes=[120.0, 0.0, 50.0, 30.0]), r"bucket\(s\) \[1\] are empty"),
        (dict(bucket_sizes=[]), "no buckets"),
        (dict(change_rates=[0.1, 0.2, 1.5, 0.1]), "change_rates"),
        (dict(change_rates=[0.1, 0.2]), "change_rates"),
        (dict(periods=0), "periods"),
        (dict(bucket_sizes=np.ones(257), change_rates=np.full(257, 0.1)), "at most 256"),
        (dict(new_pages=-1.0), "new_pages"),
        (dict(obsolete=[500.0, 0, 0, 0]), "obsolete"),
        (dict(weights="strategy9"), "unknown strategy"),
        (dict(weights=Weights(old=np.zeros(5), new=np.zeros(5))), "all 0"),
        (dict(weights=Weights(old=np.ones(3), new=np.ones(5))), "broadcast"),
    ],
)
def test_inputs_that_make_no_plan_fail_clearly(change, match):
    with pytest.raises(PlanError, match=match):
        solve_plan(**dict(SMALL, **change))


def test_strategy_weights_and_custom_weights():
    w1, w2, w3 = (strategy_weights(s, 4, 3) for s in STRATEGIES)
    np.testing.assert_array_equal(w1.old, np.ones((4, 3)))
    np.testing.assert_array_equal(w2.new, [0, 0, 0, 1])
    assert (np.diff(w3.old[:, 0]) > 0).all() and w3.old[-1, 0] == 1.0
    custom = solve_plan(**SMALL, weights={"old": [0, 0, 0, 0, 1], "new": 0.0})
    s2 = solve_plan(**dict(SMALL), weights=Weights(old=[0, 0, 0, 0, 1], new=[0, 0, 0, 0, 0]))
    assert custom.strategy == "custom"
    assert custom.objective == pytest.approx(s2.objective, rel=1e-3)


@pytest.fixture(scope="module")
def paper_plans():
    """The paper's set-up with 20 buckets instead of 255 (fast); bench/planner.py has 255."""
    inst = paper_instance(buckets=20)
    return {s: solve_plan(**inst, weights=s) for s in STRATEGIES}


def test_paper_shapes_strategy2_crawls_every_page_about_once(paper_plans):
    cpp = paper_plans["strategy2"].crawls_per_page()
    assert (cpp > 0.8).all() and (cpp < 2.2).all()
    assert np.median(cpp) == pytest.approx(1.0, abs=0.15)


def test_paper_shapes_strategy1_skips_the_slowest_buckets(paper_plans):
    p1 = paper_plans["strategy1"]
    cpp = p1.crawls_per_page()  # bucket 0 is the slowest
    skipped = cpp < 0.05
    assert 0.25 <= skipped.mean() <= 0.6
    first_crawled = int(np.argmin(skipped))
    assert skipped[:first_crawled].all() and not skipped[first_crawled:].any()
    assert cpp[-1] > 3  # the fastest are crawled more often than they change per cycle... often
    # fewest obsolete pages in every period but the last
    p2, p3 = paper_plans["strategy2"], paper_plans["strategy3"]
    assert (p1.obsolete[:-1] < p2.obsolete[:-1]).all()
    assert p1.obsolete[: p1.periods // 2].sum() < p3.obsolete[: p1.periods // 2].sum()
    assert p1.obsolete[-1] > p2.obsolete[-1] and p1.obsolete[-1] > p3.obsolete[-1]


def test_paper_shapes_strategy3_crawls_all_and_the_fastest_more_than_once(paper_plans):
    cpp = paper_plans["strategy3"].crawls_per_page()
    assert (cpp > 0.3).all()  # every bucket is crawled ...
    assert (cpp >= 0.9).mean() >= 0.9  # ... nearly all of them at least once
    fastest = cpp[-4:]  # the fastest 20%
    assert (fastest > 1.5).all()
    assert paper_plans["strategy3"].obsolete[-1] < paper_plans["strategy1"].obsolete[-1]


@pytest.mark.slow
def test_paper_size_solves_in_time():
    """T = 14, B = 255: the paper's size (about 7,200 variables here after eliminating y)."""
    plan = solve_plan(**paper_instance(), weights="strategy1")
    assert plan.success, plan.status
    assert plan.seconds < 120
    assert max(plan.violations().values()) < 1e-3 * plan.b0.max()
