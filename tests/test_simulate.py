"""The replay simulator against hand-worked histories; the oracle as upper bound."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np
import pytest

from scrapy_recrawl.core.simulate import resolve_k, simulate
from scrapy_recrawl.scoring import PAPER_PRESETS, SMOOTHED_PRESETS, Scorer

# page x cycle; cycle 0 is the first fetch (its change is not an observation)
TINY = np.array(
    [
        [0, 1, 0, 0, 1, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 1, 1, 0, 0, 1],
        [1, 0, 0, 0, 1, 1],
    ],
    dtype=np.uint8,
)


class TXLowIndexFirst(Scorer):
    """t*X, ties broken towards the lower page index (so the hand-working is unique)."""

    name = "tx"
    expression = "t*X - 0.001*index"
    terminals_needed = frozenset({"t", "X"})
    prior = None
    metadata: dict = {}

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        return terminals["t"] * terminals["X"] - 0.001 * np.arange(terminals["t"].size)


L3 = 1.0 / math.log2(3.0)


def test_tiny_history_by_hand():
    """W=2, k=2; worked cycle by cycle in the comments."""
    r = simulate(TINY, TXLowIndexFirst(), warmup=2, k=2)
    # after warm-up: n=1, X=[1,0,1,0], t=1
    # c2: stale [0,1,1,0]; fetch p0,p2 -> hit [0,1]; CR .5; NDCG L3/(1+L3); fresh 3/4
    # c3: stale [0,1,0,0]; X=[1,0,2,0], t=[1,2,1,2] -> p2,p0 -> hit [0,0]; CR 0; NDCG 0; fresh 3/4
    # c4: stale [1,1,0,1]; scores [1,-,2,-] -> p2,p0 -> hit [0,1]; CR .5; NDCG L3/(1+L3); fresh 1/2
    # c5: stale [0,1,1,1]; X=[2,0,2,0] -> p0,p2 -> hit [0,1]; CR .5; NDCG L3/(1+L3); fresh 1/2
    nd = L3 / (1.0 + L3)
    np.testing.assert_allclose(r.change_rate, [0.5, 0.0, 0.5, 0.5])
    np.testing.assert_allclose(r.ndcg, [nd, 0.0, nd, nd])
    np.testing.assert_allclose(r.freshness, [0.75, 0.75, 0.5, 0.5])
    np.testing.assert_array_equal(r.changed_fetched, [1, 0, 1, 1])
    assert r.mean_change_rate == pytest.approx(0.375)
    assert r.mean_ndcg == pytest.approx(3 * nd / 4)
    assert r.mean_freshness == pytest.approx(0.625)
    assert (r.k, r.pages, r.warmup) == (2, 4, 2)
    # final state: p0 observed I = 1,0,0,1,0 (c1..c5), p2 I = 1,1,0,0,1, p1/p3 only c1
    st = r.state
    np.testing.assert_array_equal(st["n"], [5, 1, 5, 1])
    np.testing.assert_array_equal(st["X"], [2, 0, 3, 0])
    np.testing.assert_array_equal(st["last_visit_cycle"], [5, 1, 5, 1])
    np.testing.assert_array_equal(st["sad"], [0, 0, 1, 0])
    np.testing.assert_array_equal(st["aad_sum"], [1 + 4, 0, 1 + 2 + 5, 0])
    np.testing.assert_allclose(st["gad"], [(1 + 8) / 31, 0, (1 + 2 + 16) / 31, 0])


def test_tiny_history_oracle_by_hand():
    r = simulate(TINY, "oracle", warmup=2, k=2)
    # c2 stale {1,2}: both; c3 stale {1}: one of two; c4 stale {0,3}; c5 stale {2,3}
    np.testing.assert_allclose(r.change_rate, [1.0, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(r.ndcg, [1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(r.freshness, [1.0, 1.0, 1.0, 1.0])


def test_string_expression_and_preset_replay_identically():
    rng = np.random.default_rng(5)
    c = (rng.random((300, 40)) < 0.1).astype(np.uint8)
    a = simulate(c, "t*X")
    b = simulate(c, "gp4c")
    np.testing.assert_array_equal(a.change_rate, b.change_rate)
    np.testing.assert_array_equal(a.ndcg, b.ndcg)
    np.testing.assert_array_equal(a.freshness, b.freshness)


def test_rand_is_deterministic_given_the_seed():
    rng = np.random.default_rng(6)
    c = (rng.random((500, 30)) < 0.2).astype(np.uint8)
    a, b = simulate(c, "rand", seed=1), simulate(c, "rand", seed=1)
    np.testing.assert_array_equal(a.change_rate, b.change_rate)
    assert not np.array_equal(a.change_rate, simulate(c, "rand", seed=2).change_rate)


def _best_total_by_brute_force(c: np.ndarray, warmup: int, k: int) -> int:
    """Max changed pages fetched over every possible sequence of k-subsets."""
    pages, cycles = c.shape
    stale0 = np.zeros(pages, dtype=bool)  # everything fetched during warm-up
    subsets = [np.array(s) for s in itertools.combinations(range(pages), k)]

    def go(cyc: int, stale: np.ndarray) -> int:
        if cyc == cycles:
            return 0
        stale = stale | (c[:, cyc] != 0)
        best = 0
        for s in subsets:
            found = int(stale[s].sum())
            nxt = stale.copy()
            nxt[s] = False
            best = max(best, found + go(cyc + 1, nxt))
        return best

    return go(warmup, stale0)


@pytest.mark.parametrize("seed", range(12))
def test_oracle_is_an_upper_bound_by_brute_force(seed):
    rng = np.random.default_rng(seed)
    pages, cycles, k = 5, 7, 2
    c = (rng.random((pages, cycles)) < rng.uniform(0.2, 0.7)).astype(np.uint8)
    oracle = simulate(c, "oracle", warmup=2, k=k)
    assert int(oracle.changed_fetched.sum()) == _best_total_by_brute_force(c, 2, k)


@pytest.mark.parametrize("density", [0.01, 0.1, 0.5])
def test_oracle_bounds_every_preset(density):
    rng = np.random.default_rng(11)
    rates = rng.random(400) * density * 2
    c = (rng.random((400, 60)) < rates[:, None]).astype(np.uint8)
    oracle = simulate(c, "oracle")
    assert oracle.mean_ndcg == 1.0
    for p in (*PAPER_PRESETS, *SMOOTHED_PRESETS):
        r = simulate(c, p)
        assert r.mean_change_rate <= oracle.mean_change_rate + 1e-12, p
        assert r.mean_freshness <= oracle.mean_freshness + 1e-12, p
        assert np.all(r.ndcg <= 1.0 + 1e-12), p
        assert np.all((0 <= r.change_rate) & (r.change_rate <= 1)), p


def test_no_stale_page_means_ndcg_one_and_changerate_zero():
    c = np.zeros((10, 5), dtype=np.uint8)
    r = simulate(c, "age", k=3)
    np.testing.assert_array_equal(r.ndcg, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(r.change_rate, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(r.freshness, [1.0, 1.0, 1.0])


def test_warmup_fetches_everything_and_age_round_robins():
    c = np.ones((20, 12), dtype=np.uint8)
    r = simulate(c, "age", warmup=2, k=0.25)  # 5 pages a cycle, every page always changes
    assert r.k == 5
    np.testing.assert_array_equal(r.change_rate, np.ones(10))
    assert (
        r.state["n"].sum() == 20 * 1 + 10 * 5
    )  # one observation each in warm-up, then k per cycle


def test_resolve_k_and_bad_arguments():
    # the crawl's rule: a share rounds up (560.15 -> 561)
    assert resolve_k(0.05, 11203) == 561
    assert resolve_k(0.05, 10) == 1
    assert resolve_k(7, 5) == 5
    # the setting's spellings (core/budget.py parse_budget): "5%" a share, "5" pages
    assert resolve_k("5%", 11203) == 561 and resolve_k("5", 100) == 5
    assert resolve_k("100%", 40) == 40
    for bad in (0, -1, 1.0, 1.5, 2.0, "lots", "0%", "150%", True):
        with pytest.raises(ValueError):
            resolve_k(bad, 100)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        simulate(np.zeros(5), "age")
    with pytest.raises(ValueError):
        simulate(np.zeros((5, 3)), "age", warmup=4)


def test_the_replay_and_the_crawl_spend_the_same_budget():
    from scrapy_recrawl.core.budget import cycle_budget

    for share, pages in [(0.05, 50), (0.05, 60), (0.1, 7), (0.05, 11203), (0.5, 3)]:
        crawl = cycle_budget(share, 0.0, pages, warmup=False).total
        assert resolve_k(share, pages) == crawl, (share, pages)
    assert resolve_k(0.05, 50) == 3  # 2.5 pages: rounded up, in both places


def test_a_handover_keeps_the_metrics_of_the_cycles_after_it():
    """With ``before`` the policy itself, a hand-over at cycle h changes nothing but
    which cycles are measured: the same replay, its metrics from h on."""
    rng = np.random.default_rng(3)
    changes = (rng.random((60, 30)) < 0.2).astype(np.uint8)
    whole = simulate(changes, "aad+", k=6)
    late = simulate(changes, "aad+", k=6, handover=12)
    assert late.warmup == 12 and late.change_rate.size == 30 - 12
    np.testing.assert_array_equal(late.change_rate, whole.change_rate[10:])
    np.testing.assert_array_equal(late.freshness, whole.freshness[10:])
    np.testing.assert_array_equal(late.ndcg, whole.ndcg[10:])


def test_before_the_handover_another_policy_crawls():
    """The cycles before the hand-over are picked by ``before`` alone, the rest by the
    policy alone, and the policy takes over the store ``before`` filled."""
    changes = (np.random.default_rng(4).random((40, 20)) < 0.3).astype(np.uint8)
    calls: dict[str, list[int]] = {"before": [], "after": []}

    def by(label: str):
        def select(state: Mapping[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
            calls[label].append(cycle)
            if label == "after" and cycle == 8:  # the store holds what `before` saw
                assert state["n"].sum() == 40 + 4 * (8 - 2)
            return np.argsort(state["last_visit_cycle"], kind="stable")[:k]

        return select

    r = simulate(changes, by("after"), k=4, handover=8, before=by("before"))
    assert calls["before"] == list(range(2, 8))
    assert calls["after"] == list(range(8, 20))
    assert r.change_rate.size == 12
    # the oracle takes over too, and it is as good as the policy it replaced
    handed = simulate(changes, "oracle", k=4, handover=8, before="age")
    assert handed.mean_change_rate >= simulate(changes, "age", k=4, handover=8).mean_change_rate


def test_a_handover_outside_the_replay_is_refused():
    with pytest.raises(ValueError, match="handover"):
        simulate(TINY, "age", handover=1)
    with pytest.raises(ValueError, match="handover"):
        simulate(TINY, "age", handover=7)


def test_a_policy_string_names_the_terminals_of_the_registry_given():
    # the core's by default (core/ loads no plug-in); a plug-in's terminal with the
    # registry that lists it (its column unfilled here: NaN, so it ranks last), as the
    # same scorer built with that registry replays
    from scrapy_recrawl.plugin_terminals import default_registry
    from scrapy_recrawl.settings import RecrawlSettingError

    changes = (np.random.default_rng(5).random((60, 12)) < 0.3).astype(np.uint8)
    text = "1 - exp(-NADc*t)"
    with pytest.raises(RecrawlSettingError, match="unknown name 'NADc'"):
        simulate(changes, text)
    reg = default_registry()
    got = simulate(changes, text, registry=reg, k=6)
    again = simulate(changes, Scorer.from_spec(text, registry=reg), k=6)
    assert got.change_rate.tolist() == again.change_rate.tolist()
    born = np.zeros(60, dtype=np.int64)
    born[30:] = 4  # the growing site's replay takes it too
    assert simulate(changes, "basket", registry=reg, k=6, born=born).change_rate.size
