"""RECRAWL_ADAPTIVE_BUDGET: a cycle stops its recrawls where the expected changes of the
rest of its ranked list fall below the threshold (core/budget.py), the same in the
crawl's plan (core/cycle.py) and in the replay (core/simulate.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scrapy_recrawl.core.budget import (
    adaptive_cut,
    adaptive_keep,
    change_chance,
    check_adaptive_budget,
)
from scrapy_recrawl.core.cycle import CycleConfig, plan_cycle
from scrapy_recrawl.core.simulate import simulate
from scrapy_recrawl.scoring import Scorer
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import history_arrays


def test_the_cut_is_where_the_rest_expects_fewer_changes_than_the_threshold():
    chance = np.array([0.5, 0.3, 0.1, 0.05, 0.05])
    # expected changes from each position on: 1.0, 0.5, 0.2, 0.1, 0.05
    assert adaptive_keep(chance, 0.15) == 3
    assert adaptive_keep(chance, 0.2) == 3  # 0.2 is not below 0.2
    assert adaptive_keep(chance, 0.25) == 2
    assert adaptive_keep(chance, 0.01) == 5  # never below: the whole list
    assert adaptive_keep(chance, 2.0) == 0  # the whole list expects less: nothing
    assert adaptive_keep(np.zeros(0), 1.0) == 0


def test_the_chance_is_the_aad_rate_smoothed_at_a_bounded_prior_strength_over_the_time_since_the_visit():
    # URL 1: n = 4, I = 0011 -> aad_sum 7; URL 2: never observed; t = 3 and 1
    arrays = history_arrays([4, 0], [2, 0], last=[7, 9], cycle=10)
    cols = arrays.columns
    cols["aad_sum"][:] = [7.0, 0.0]
    m = 3 * 4 * 5 / (2 * 9)  # AAD's effective observations at n = 4
    # RECRAWL_PRIOR (0.5, 100): its mean 0.005 at the strength of one observation
    aadp = (m * 0.7 + 0.005) / (m + 1)
    got = change_chance(cols, 10, None)
    np.testing.assert_allclose(got, [1 - math.exp(-aadp * 3), 1 - math.exp(-0.005 * 1)])
    # a prior weaker than one observation is taken as it is
    weak = change_chance(cols, 10, (0.2, 0.5))
    np.testing.assert_allclose(weak[1], 1 - math.exp(-0.4))


@pytest.mark.parametrize("prior", [None, (0.5, 100), (0.01, 1000), (1, 10)])
@pytest.mark.parametrize("n", [5, 6, 10, 50])
def test_a_page_that_changed_at_every_observation_has_an_even_chance_a_cycle(n, prior):
    """The evidence is not swamped by the prior: five changes in five observations or
    more give a chance of at least 0.5 a cycle (issue 26: six of six was 5% under
    the prior (0.5, 100)), so a threshold of 0.5 or less never cuts the page alone."""
    arrays = history_arrays([n, n], [n, 0], last=[9, 9], cycle=10)
    arrays.columns["aad_sum"][:] = [n * (n + 1) / 2, 0.0]
    chance = change_chance(arrays.columns, 10, prior)
    assert chance[0] >= 0.5, chance
    a, b = prior or (0.5, 100)
    # and as many quiet observations say the page is quieter than the prior's mean
    assert chance[1] < (1 - math.exp(-a / b)) / 2, chance
    rows = np.array([0])
    assert adaptive_cut(arrays.columns, rows, 10, prior, 0.5) == 1


def test_a_setting_is_none_or_a_positive_number():
    assert check_adaptive_budget(None) is None
    assert check_adaptive_budget(2) == 2.0
    for bad in (0, -1, True, "2", float("nan"), float("inf")):
        with pytest.raises(RecrawlSettingError, match=r"^RECRAWL_ADAPTIVE_BUDGET=.*expected None"):
            check_adaptive_budget(bad)
    config = CycleConfig.from_settings({"RECRAWL_ADAPTIVE_BUDGET": "1.5"})  # as -s reads it
    assert config.adaptive_budget == 1.5
    assert CycleConfig.from_settings({}).adaptive_budget is None
    with pytest.raises(RecrawlSettingError, match="RECRAWL_ADAPTIVE_BUDGET='lots'"):
        CycleConfig.from_settings({"RECRAWL_ADAPTIVE_BUDGET": "lots"})


def _quiet_arrays():
    """100 URLs: 5 seen changing at every one of 10 observations, 95 never in 10."""
    size = 100
    busy = np.arange(size) < 5
    arrays = history_arrays(
        np.full(size, 10), np.where(busy, 10, 0), last=np.full(size, 19), cycle=20
    )
    arrays.columns["aad_sum"][:] = np.where(busy, 55.0, 0.0)  # sum(i), i = 1..10
    return arrays


def test_the_plan_of_a_quiet_cycle_spends_only_what_is_expected_to_change():
    scorer = Scorer.from_spec("aad+")
    full = plan_cycle(
        _quiet_arrays(), CycleConfig(budget=20, warmup_cycles=0), scorer, pending_new=0
    )
    assert full.adaptive_cut == 0 and len(full.selection.ids) == 20  # no new URL waits
    config = CycleConfig(budget=20, warmup_cycles=0, adaptive_budget=0.1)
    plan = plan_cycle(_quiet_arrays(), config, scorer, pending_new=0)
    # the five busy URLs first (rate (m + 0.005)/(m + 1), m = 3*10*11/42: a chance of
    # 0.588 each); the quiet ones' 0.005/(m + 1), a chance of 0.00056 each: the
    # fifteen expect 0.0085 changes, below 0.1, so they are not fetched
    assert sorted(plan.selection.ids) == sorted(full.selection.ids[:5]) == [1, 2, 3, 4, 5]
    assert plan.adaptive_cut == 15
    # the five recrawls and the new URLs' share (4) as it was: 11 pages not spent
    assert plan.budget.total == 9 and plan.budget.new == full.budget.new == 4
    assert plan.budget.recrawl == 5


def test_the_monitoring_sample_and_the_warm_up_are_not_cut():
    config = CycleConfig(budget=20, warmup_cycles=0, adaptive_budget=0.1, monitor_share=0.3)
    plan = plan_cycle(_quiet_arrays(), config, Scorer.from_spec("aad+"), pending_new=0)
    mon = plan.selection.monitored
    assert mon > 0 and np.isinf(plan.selection.scores[:mon]).all()
    kept = len(plan.selection.ids) - mon
    assert plan.adaptive_cut > 0 and plan.budget.total == kept + 4 + mon
    warm = CycleConfig(budget=20, warmup_cycles=30, adaptive_budget=0.5)
    plan = plan_cycle(_quiet_arrays(), warm, Scorer.from_spec("aad+"), pending_new=0)
    assert plan.warmup and plan.adaptive_cut == 0 and len(plan.selection.ids) == 100


def test_the_replay_cuts_with_the_same_rule():
    arrays = _quiet_arrays()
    rows = np.arange(100)
    # the 95 quiet URLs expect 0.054 changes, below 0.5; with a busy one 0.64
    assert adaptive_cut(arrays.columns, rows, 20, None, 0.5) == 5
    # busy ones last: the last of them alone expects 0.588 changes, above 0.5, so the
    # whole list is kept (a busy page is never cut for the quiet ones ranked above it)
    assert adaptive_cut(arrays.columns, rows[::-1], 20, None, 0.5) == 100
    # above one busy page's chance, the last one is cut: the rest expects 0.588 < 0.6
    assert adaptive_cut(arrays.columns, rows[::-1], 20, None, 0.6) == 99
    assert adaptive_cut(arrays.columns, rows[:0], 20, None, 0.5) == 0


def test_a_quiet_history_costs_fewer_pages_and_loses_almost_no_changes():
    """2,000 pages over 120 days, each changing on a day with its own chance drawn from
    Beta(0.2, 100) (mean 0.002: about 4 changes a day on the whole site, most pages never):
    the budget (5%: 100 pages a day) is far more than the site needs."""
    rng = np.random.default_rng(1)
    pages, days = 2000, 120
    chance = rng.beta(0.2, 100, pages)
    changes = (rng.random((pages, days)) < chance[:, None]).astype(np.uint8)
    full = simulate(changes, "aad+", k="5%")
    cut = simulate(changes, "aad+", k="5%", adaptive_budget=0.5)
    assert full.fetched.sum() == full.k * (days - 2)
    spent = cut.fetched.sum() / full.fetched.sum()
    found = cut.changed_fetched.sum() / full.changed_fetched.sum()
    assert spent < 0.9, spent  # measured 0.882 (0.937 with the prior at full strength)
    assert found > 0.98, found  # measured 1.000 (0.991)
    assert (cut.fetched < cut.k).sum() > 0.8 * len(cut.fetched)  # most cycles cut (99 of 118)
    # the oracle is not cut: it is the bound the policies are measured against
    oracle = simulate(changes, "oracle", k="5%", adaptive_budget=0.5)
    assert oracle.fetched.sum() == full.fetched.sum()


@pytest.mark.slow
def test_a_crawl_of_a_quiet_site_spends_less_than_its_budget(tmp_path):
    """Three crawls of a local site of 12 pages (two warm-up cycles, then a budget of 6)
    scored with the pooled prior ``aad+h``: only "/" changed. Its chance is
    1 - exp(-1.005/2) = 0.395, each unchanged page's 1 - exp(-0.005/2) = 0.0025: the
    five after "/" expect 0.0125 changes, below RECRAWL_ADAPTIVE_BUDGET = 0.03, so the
    third cycle fetches "/" alone and says it cut five recrawls."""
    from .helpers import LocalSite, Page, run_crawl

    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_SCORER": "aad+h",
        "RECRAWL_BUDGET": 6,
        "RECRAWL_NEW_SHARE": 0.0,
        "RECRAWL_ADAPTIVE_BUDGET": 0.03,
    }
    with LocalSite() as site:
        paths = [f"/p{i}" for i in range(11)]
        links = "".join(f'<a href="{p}">{p}</a>' for p in paths)
        for p in paths:
            site.pages[p] = Page(f"<html><body><p>{p} stays as it is</p></body></html>".encode())
        for version in range(3):
            body = f"<html><body>{links}<h1>edition {version}</h1><p>{'news ' * version}</p>"
            site.pages["/"] = Page(f"{body}</body></html>".encode())
            site.log.clear()
            result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
        fetched = [e["path"] for e in site.log]
    stats = result["stats"]
    assert fetched == ["/"], fetched
    assert stats["recrawl/cycle"] == 3 and stats["recrawl/adaptive_budget_cut"] == 5
