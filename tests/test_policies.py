"""The freshness-optimal policies (scoring/policies.py) and the `nutch` preset, checked
against cases solved by hand here, step-by-step replays and the replay of core/simulate.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scrapy_recrawl.core.selection import select_recrawls, with_budget
from scrapy_recrawl.core.simulate import new_state, simulate
from scrapy_recrawl.history.base import HistoryArrays
from scrapy_recrawl.plugin_terminals import registry_for
from scrapy_recrawl.scoring import Scorer, compute_terminals, top_k_indices
from scrapy_recrawl.scoring.policies import BINS, chogm_rates, lambdacrawl_rates
from scrapy_recrawl.scoring.presets import PRESETS, nutch_expression
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import LocalSite, Page, run_crawl

# ------------------------------------------------------------ solved by hand


def freshness(lam: float, f: float) -> float:
    """Cho & Garcia-Molina's time-averaged freshness of a Poisson page visited f times per
    unit time at regular intervals: (f/lam)(1 - e^(-lam/f)); 0 visits: 0."""
    return 0.0 if f <= 0 else (f / lam) * (1.0 - math.exp(-lam / f))


def marginal(lam: float, f: float) -> float:
    """dF/df, from the formula above differentiated by hand."""
    x = lam / f
    return (1.0 - (1.0 + x) * math.exp(-x)) / lam


def test_chogm_two_pages_match_a_brute_force_search():
    lam, k = (0.2, 1.0), 0.5
    grid = np.linspace(0.0, k, 200_001)
    total = [freshness(lam[0], f) + freshness(lam[1], k - f) for f in grid]
    best = grid[int(np.argmax(total))]
    f = chogm_rates(np.array(lam), k)
    assert f.sum() == pytest.approx(k, rel=1e-9)
    assert f[0] == pytest.approx(best, abs=2e-5)
    # KKT: equal marginal freshness at the optimum
    # (the inverse of g is tabulated and interpolated: about 1e-7 off the root)
    assert marginal(lam[0], f[0]) == pytest.approx(marginal(lam[1], f[1]), rel=1e-6)


def test_chogm_reproduces_the_papers_five_page_example():
    """The example of TODS 2003: pages changing 1..5 times a day, 5 visits a day:
    1.15, 1.36, 1.35, 1.14 and 0 for the fastest. Scaled to cycles of 1/10 day (the
    cap of one visit per cycle is then not reached: F depends on lam/f alone)."""
    f = chogm_rates(np.arange(1, 6) / 10.0, 0.5) * 10.0
    np.testing.assert_allclose(f, [1.15, 1.36, 1.35, 1.14, 0.0], atol=0.006)
    assert f[4] == 0.0


def test_chogm_gives_a_page_changing_too_fast_no_visit():
    lam, k = np.array([0.1, 0.3, 50.0]), 0.3
    f = chogm_rates(lam, k)
    assert f[2] == 0.0 and f.sum() == pytest.approx(k, rel=1e-9)
    # the multiplier of the two visited pages...
    mu = marginal(lam[0], f[0])
    assert marginal(lam[1], f[1]) == pytest.approx(mu, rel=1e-6)
    # ...is above what a first visit of the fast page would gain (1/lam: dF/df at f -> 0)
    assert 1.0 / lam[2] < mu
    # and no split of the budget with some of it on the fast page does better (grid)
    best = freshness(lam[0], f[0]) + freshness(lam[1], f[1])
    for f3 in (0.001, 0.01, 0.05, 0.1):
        g = chogm_rates(lam[:2], k - f3)
        assert freshness(lam[0], g[0]) + freshness(lam[1], g[1]) + freshness(lam[2], f3) < best


def harmonic(lam: float, rho: float) -> float:
    """Expected harmonic staleness of a page changing at lam polled at rho: the changes
    missed at a random time are geometric (an Exp(rho) age, Poisson changes), and
    E[1 + 1/2 + ... + 1/N] = sum_j P(N >= j)/j = -ln(1 - lam/(lam + rho))."""
    q = lam / (lam + rho)
    return sum(q**j / j for j in range(1, 4000))


def test_lambdacrawl_two_weighted_pages_match_a_brute_force_search():
    lam, w, k = (0.2, 1.0), (1.0, 2.0), 0.6
    grid = np.linspace(1e-4, k - 1e-4, 60_001)
    cost = [w[0] * math.log1p(lam[0] / r) + w[1] * math.log1p(lam[1] / (k - r)) for r in grid]
    best = grid[int(np.argmin(cost))]
    rho = lambdacrawl_rates(np.array(lam), k, np.array(w))
    assert rho.sum() == pytest.approx(k, rel=1e-9)
    assert rho[0] == pytest.approx(best, abs=2e-5)
    # the objective is the harmonic staleness (series summed here, not the log)
    assert harmonic(lam[0], rho[0]) == pytest.approx(math.log1p(lam[0] / rho[0]), rel=1e-9)
    # the paper's closed form with one multiplier nu
    nu = w[0] * lam[0] / (rho[0] * (rho[0] + lam[0]))
    for i in range(2):
        closed = (math.sqrt(lam[i] ** 2 + 4 * w[i] * lam[i] / nu) - lam[i]) / 2
        assert rho[i] == pytest.approx(closed, rel=1e-6)


def test_lambdacrawl_gives_every_page_a_visit_and_weight_moves_the_budget():
    lam = np.array([0.1, 0.3, 50.0])
    rho = lambdacrawl_rates(lam, 0.3)
    assert (rho > 0).all()  # harmonic staleness gives up on no page (freshness does)
    heavy = lambdacrawl_rates(lam, 0.3, np.array([5.0, 1.0, 1.0]))
    assert heavy[0] > rho[0] and heavy.sum() == pytest.approx(0.3, rel=1e-9)
    assert lambdacrawl_rates(lam, 0.3, np.array([0.0, 1.0, 1.0]))[0] == 0.0


def exact_rates(lam: np.ndarray, w: np.ndarray, k: float, kind: str) -> np.ndarray:
    """The optimum by plain bisection on the multiplier over every page (O(N) a step)."""

    def rates(m: float) -> np.ndarray:
        if kind == "lc":
            return np.minimum(1.0, (np.sqrt(lam**2 + 4 * w * lam / m) - lam) / 2)
        y = m * lam / w  # g(lam/f) = y; g increasing: invert by bisection per page
        lo, hi = np.full(lam.size, 1e-12), np.full(lam.size, 1e3)
        for _ in range(200):
            mid = np.sqrt(lo * hi)
            g = 1 - (1 + mid) * np.exp(-mid)
            lo, hi = np.where(g < y, mid, lo), np.where(g < y, hi, mid)
        return np.where(y >= 1, 0.0, np.minimum(1.0, lam / np.sqrt(lo * hi)))

    a, b = 1e-12, 1e12
    for _ in range(300):
        m = math.sqrt(a * b)
        a, b = (m, b) if rates(m).sum() > k else (a, m)
    return rates(math.sqrt(a * b))


@pytest.mark.parametrize("kind", ["chogm", "lc"])
def test_the_histogram_search_agrees_with_an_exact_search_on_many_pages(kind):
    rng = np.random.default_rng(7)
    size = 4 * BINS
    lam = rng.lognormal(-3.0, 1.5, size)
    w = rng.choice([1.0, 1.0, 1.0, 3.0], size)
    k = 0.05 * size
    solve = chogm_rates if kind == "chogm" else lambdacrawl_rates
    got = solve(lam, k, w)
    want = exact_rates(lam, w, k, kind)
    assert got.sum() == pytest.approx(k, rel=1e-4)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-9)
    np.testing.assert_array_equal(got == 0, want == 0)


# ------------------------------------------------------------------- terminals


def test_lam_tc_and_w_by_hand():
    state = {
        "n": np.array([4, 0, 2, 3]),
        "X": np.array([1, 0, 2, 0]),
        "last_visit_cycle": np.array([9, 5, 8, 10]),
        "first_cycle": np.array([1, 5, 4, 4]),
        "last_change_cycle": np.array([6, -1, 8, -1]),
        "importance": np.array([2.0, np.nan, 0.5, 1.0]),
    }
    tm = compute_terminals(state, 10, prior=(0.5, 10.0), needed={"lam", "tc", "w"})
    p = [(1 + 0.5) / (4 + 10), 0.5 / 10, 2.5 / 12, 0.5 / 13]
    spacing = [8 / 4, 1.0, 4 / 2, 6 / 3]  # (last - first)/n; none observed: 1 cycle
    want = [-math.log(1 - pi) / s for pi, s in zip(p, spacing, strict=True)]
    np.testing.assert_allclose(tm["lam"], want, rtol=1e-12)
    np.testing.assert_array_equal(tm["tc"], [4, 5, 2, 6])
    np.testing.assert_array_equal(tm["w"], [2.0, 1.0, 0.5, 1.0])
    del state["importance"]
    assert compute_terminals(state, 10, needed={"w"})["w"].tolist() == [1.0] * 4


def test_burst_by_hand():
    state = {
        "n": np.array([4, 3, 2, 1]),
        "X": np.array([1, 0, 1, 1]),
        "last_visit_cycle": np.array([9, 9, 8, 10]),
        "first_cycle": np.array([1, 2, 4, 10]),
        "last_change_cycle": np.array([6, -1, 8, 10]),
    }
    got = compute_terminals(state, 10, needed={"burst"})["burst"]
    # tau = 2: integral of exp(-s/2) ds from s = tc - t to s = tc (s: since the change)
    want = [
        2 * (math.exp(-3 / 2) - math.exp(-4 / 2)),  # changed at 6, seen at 9: s in [3, 4]
        0.0,  # never seen to change: no burst
        2 * (1 - math.exp(-2 / 2)),  # changed when last seen, 2 cycles ago: s in [0, 2]
        0.0,  # visited (and changed) this very cycle: nothing unseen yet
    ]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    # the preset: CG's expected changes plus 4 times the burst's
    cgp = compute_terminals(state, 10, needed={"CGp"})["CGp"]
    t = np.array([1, 1, 2, 0])
    np.testing.assert_allclose(
        Scorer.from_spec("burst").score_state(state, 10), cgp * (t + 4 * np.array(want))
    )
    # RECRAWL_BURST_TAU sets tau: 1 cycle here
    one = registry_for((), burst=1.0).compute(state, 10, needed=("burst",))["burst"]
    np.testing.assert_allclose(one[0], math.exp(-3) - math.exp(-4), rtol=1e-12)
    s = Scorer.from_settings({"RECRAWL_SCORER": "CGp*(t + 4*burst)", "RECRAWL_BURST_TAU": "1"})
    np.testing.assert_allclose(
        s.score_state(state, 10),
        Scorer.from_spec("CGp*(t + 4*burst)", registry=registry_for((), burst=1.0)).score_state(
            state, 10
        ),
    )
    for bad in ("0", "-1", "soon"):
        with pytest.raises(RecrawlSettingError, match="^RECRAWL_BURST_TAU=") as err:
            Scorer.from_settings({"RECRAWL_SCORER": "aad+", "RECRAWL_BURST_TAU": bad})
        assert "\n" not in str(err.value)


def _bursty(pages: int, cycles: int, seed: int) -> np.ndarray:
    """Pages with a slow base rate whose every change raises the next days' odds 50-fold
    (decaying over 3 cycles): a release, then its fixes."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.001, 0.01, pages)
    out = np.zeros((pages, cycles), dtype=np.uint8)
    since = np.full(pages, 1e9)
    for c in range(cycles):
        p = base * (1 + 50 * np.exp(-since / 3))
        hit = rng.random(pages) < np.minimum(p, 1.0)
        out[:, c] = hit
        since = np.where(hit, 0.0, since + 1)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_burst_finds_more_changes_than_cg_where_changes_come_in_bursts(seed):
    changes = _bursty(1500, 90, seed)
    burst = simulate(changes, "burst", k=0.05).mean_change_rate
    cg = simulate(changes, "cg+", k=0.05).mean_change_rate
    assert burst > cg * 1.05, (burst, cg)


def test_outside_a_cycle_the_budget_terminals_say_what_they_miss():
    state = new_state(3)
    with pytest.raises(ValueError, match="'chogm_f' terminal needs the cycle's recrawl budget"):
        compute_terminals(state, 4, needed={"chogm_f"})
    with pytest.raises(ValueError, match="'lc_f' terminal needs the cycle's recrawl budget"):
        Scorer.from_spec("lambdacrawl").score_state(state, 4)
    everything = compute_terminals(state, 4)  # all the others, without the budget ones
    assert "lam" in everything and "chogm_f" not in everything
    assert "chogm_f" in compute_terminals(with_budget(state, 1), 4)


def test_presets_typed_by_hand_score_identically():
    rng = np.random.default_rng(3)
    state = new_state(500)
    state["n"][:] = rng.integers(0, 40, 500)
    state["X"][:] = rng.binomial(state["n"], 0.3)
    state["last_visit_cycle"][:] = rng.integers(30, 60, 500)
    state["last_change_cycle"][:] = np.where(state["X"] > 0, state["last_visit_cycle"] - 3, -1)
    cols = with_budget(state, 25)
    for preset, typed in (
        ("chogm", "t*chogm_f"),
        ("lambdacrawl", "t*lc_f"),
        ("nutch", "t/Min(Max(30*exp(log(1.4)*(n - X) + log(0.8)*X), 1), 365)"),
    ):
        a = Scorer.from_spec(preset).score_state(cols, 60)
        b = Scorer.from_spec(typed).score_state(cols, 60)
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert PRESETS["nutch"].expression == "t/nutch_interval"


# ------------------------------------------------------------------------ nutch


def nutch_step(interval: float, changed: bool, lo: float = 1.0, hi: float = 365.0) -> float:
    """One fetch of Nutch's AdaptiveFetchSchedule, as Nutch does it: scale, then clamp."""
    interval *= (1 - 0.2) if changed else (1 + 0.4)
    return min(hi, max(lo, interval))


def nutch_select(record: list[float], lo: float, hi: float):
    """A replay policy keeping Nutch's interval per page step by step (from each new
    observation), fetching the most overdue relative to it; it records, every cycle,
    how far the nutch preset's closed form is from its intervals."""
    # the preset itself, with a registry of these bounds (as RECRAWL_NUTCH_* give one)
    registry = registry_for([], {"min_interval": lo, "max_interval": hi})
    scorer = Scorer.from_spec("nutch", registry=registry)
    memory: dict[str, np.ndarray] = {}

    def select(state, cycle, k):
        n = state["n"]
        if not memory:
            memory["n"] = np.zeros_like(n)
            memory["interval"] = np.full(n.size, 30.0)
        for i in np.flatnonzero(n > memory["n"]):  # one new observation each
            memory["interval"][i] = nutch_step(memory["interval"][i], bool(state["sad"][i]), lo, hi)
        memory["n"] = n.copy()
        t = cycle - state["last_visit_cycle"]
        closed = t / scorer.score_state(state, cycle)
        record.append(float(np.max(np.abs(closed / memory["interval"] - 1))))
        return top_k_indices(t / memory["interval"], k)

    return select


def test_nutch_interval_is_the_step_by_step_replay_while_no_bound_is_hit():
    rng = np.random.default_rng(11)
    changes = (rng.random((300, 90)) < rng.uniform(0.01, 0.6, (300, 1))).astype(np.uint8)
    record: list[float] = []
    # bounds out of this history's reach (the first assertion below checks it)
    lo, hi = 1e-12, 1e12
    replay = simulate(changes, nutch_select(record, lo, hi), k=0.1)
    assert len(record) == 88 and max(record) < 1e-12  # every page, every cycle
    formula = nutch_expression(min_interval=lo, max_interval=hi)  # written out
    preset = simulate(changes, formula, k=0.1)
    assert preset.mean_freshness == pytest.approx(replay.mean_freshness, abs=0.01)
    # with Nutch's own bounds (1, 365) this history hits them: the closed form parts
    record.clear()
    simulate(changes, nutch_select(record, 1.0, 365.0), k=0.1)
    assert max(record) > 0.01


def test_nutch_past_a_bound_remembers_what_the_step_by_step_interval_forgets():
    """Documented difference (docs/scorers.md): at a bound Nutch stops scaling, the
    closed form keeps counting. 12 unchanged fetches from 30 pass 365 (30 * 1.4^8 =
    443); a change then gives Nutch 365 * 0.8 = 292 and the closed form 365 still."""
    interval = 30.0
    for _ in range(12):
        interval = nutch_step(interval, False)
    assert interval == 365.0
    assert nutch_step(interval, True) == pytest.approx(292.0)
    state = new_state(1)
    state["n"][:], state["X"][:], state["last_visit_cycle"][:] = 13, 1, 0
    assert 1.0 / Scorer.from_spec("nutch").score_state(state, 1)[0] == pytest.approx(365.0)


def test_nutch_settings_set_its_numbers_and_a_bad_one_is_one_line():
    s = Scorer.from_settings({"RECRAWL_SCORER": "nutch", "RECRAWL_NUTCH_INTERVAL": "7"})
    state = new_state(2)
    state["n"][:], state["X"][:], state["last_visit_cycle"][:] = [0, 2], [0, 1], 0
    # 7 cycles, then 7 * 1.4 * 0.8; Nutch's defaults elsewhere: 30, 30 * 1.4 * 0.8
    np.testing.assert_allclose(s.score_state(state, 14), [2.0, 14 / (7 * 1.4 * 0.8)])
    default = Scorer.from_spec("nutch").score_state(state, 14)
    np.testing.assert_allclose(default, [14 / 30, 14 / (30 * 1.4 * 0.8)])
    for name, value in (
        ("RECRAWL_NUTCH_DEC_RATE", "1"),
        ("RECRAWL_NUTCH_INTERVAL", "0"),
        ("RECRAWL_NUTCH_INC_RATE", "fast"),
    ):
        with pytest.raises(RecrawlSettingError, match=f"^{name}=") as err:
            Scorer.from_settings({"RECRAWL_SCORER": "aad+", name: value})
        assert "\n" not in str(err.value)
    with pytest.raises(RecrawlSettingError, match="RECRAWL_NUTCH_MIN_INTERVAL=400"):
        Scorer.from_settings({"RECRAWL_NUTCH_MIN_INTERVAL": 400})


# ---------------------------------------------------- in the cycle core, replayed


def test_the_live_selection_solves_over_its_candidates_with_its_budget():
    rng = np.random.default_rng(5)
    size = 400
    state = new_state(size)
    state["n"][:] = rng.integers(1, 30, size)
    state["X"][:] = rng.binomial(state["n"], rng.uniform(0, 1, size))
    state["last_visit_cycle"][:] = rng.integers(20, 30, size)
    gone = rng.random(size) < 0.2
    arrays = HistoryArrays(np.arange(1, size + 1), {**state, "gone": gone}, 30)
    sel = select_recrawls(arrays, Scorer.from_spec("chogm"), 20, now=0.0)
    live = np.flatnonzero(~gone)
    lam = compute_terminals({c: v[live] for c, v in state.items()}, 30, needed={"lam"})["lam"]
    score = (30 - state["last_visit_cycle"][live]) * chogm_rates(lam, 20)
    np.testing.assert_array_equal(sel.ids, arrays.ids[live[top_k_indices(score, 20)]])


def mixed_site(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """60 pages over 200 cycles: 30 change in 9 cycles of 10, 30 rarely; and their rates."""
    rng = np.random.default_rng(seed)
    p = np.r_[np.full(30, 0.9), rng.uniform(0.01, 0.08, 30)]
    changes = (rng.random((60, 200)) < p[:, None]).astype(np.uint8)
    return changes, -np.log1p(-p)


@pytest.mark.parametrize("seed", [0, 1])
def test_chogm_is_fresher_than_age_where_fast_pages_cannot_be_kept(seed):
    """With 3 visits a cycle, age visits every page every 20 cycles and spends half its
    visits on pages stale again the next cycle; the freshness-optimal rates give those
    none and visit the slow half every 10 cycles (the paper's point). By the closed
    form: age ~ (30 (1 - e^-1) + 1.5)/60 = 0.34, chogm ~ 30 * 0.79/60 = 0.39."""
    changes, lam = mixed_site(seed)

    def known_rates(state, cycle, k):  # the policy with the true rates
        t = cycle - state["last_visit_cycle"]
        return top_k_indices(t * chogm_rates(lam, k), k)

    age = simulate(changes, "age", k=3).mean_freshness
    assert simulate(changes, known_rates, k=3).mean_freshness > age + 0.03
    # the preset, from rates it estimates: with a weak prior (docs/scorers.md: the
    # default prior, 100 pseudo-observations, shrinks every rate to the same small one)
    assert simulate(changes, "chogm", k=3, prior=(0.5, 2)).mean_freshness > age
    fast_visits = simulate(changes, known_rates, k=3).state["n"][:30].sum()
    assert fast_visits == 30  # the warm-up's observation, none after it


# ------------------------------------------------------------------ a real crawl


def _page(i: int, version: int) -> Page:
    text = f"Page {i} about topic {i}, version {version}, with words enough to shingle."
    return Page(f"<html><body><p>{text}</p></body></html>".encode(), etag=f'"{i}-{version}"')


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["chogm", "lambdacrawl"])
def test_a_crawl_scores_with_the_budget_of_its_cycle(preset, tmp_path):
    """The scheduler hands the cycle's budget to the terminals (core/selection.py)."""
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(12))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for i in range(12):
            site.pages[f"/p{i}"] = _page(i, 0)
        settings = {
            "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
            "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
            "RECRAWL_SCORER": preset,
            "RECRAWL_BUDGET": 4,
            "RECRAWL_NEW_SHARE": 0,
            "RECRAWL_WARMUP_CYCLES": 1,
        }
        for cycle in range(3):
            for i in range(3):  # p0..p2 change every cycle
                site.pages[f"/p{i}"] = _page(i, cycle)
            site.log.clear()
            result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
        recrawled = [i for i in result["items"] if i["rank"] is not None]
        assert len(recrawled) == 4, result["items"]
