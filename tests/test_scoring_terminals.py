"""Terminals: hand-worked values, GAD's recursion, the prior, ``needed``."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from scrapy_recrawl.history.state import observe
from scrapy_recrawl.scoring import check_prior, compute_terminals, core_registry
from scrapy_recrawl.scoring.terminals import effective_observations
from scrapy_recrawl.settings import RecrawlSettingError


def state_from_histories(
    histories: list[list[int]], last_visit: list[int]
) -> dict[str, np.ndarray]:
    """Fold indicator histories through the store's one update rule."""
    cols: dict[str, list[float]] = {k: [] for k in ("n", "X", "sad", "aad_sum", "gad")}
    for hist in histories:
        s = (0, 0, 0.0, 0.0, 0.0)
        for ind in hist:
            s = observe(*s, ind)
        for k, v in zip(cols, s, strict=True):
            cols[k].append(v)
    st = {
        "n": np.array(cols["n"], dtype=np.int64),
        "X": np.array(cols["X"], dtype=np.int64),
        "sad": np.array(cols["sad"]),
        "aad_sum": np.array(cols["aad_sum"]),
        "gad": np.array(cols["gad"]),
        "last_visit_cycle": np.array(last_visit, dtype=np.int64),
        "last_visit_time": np.array(last_visit, dtype=np.float64) * 3600.0,
    }
    return st


# p0: I = 1 0 1 (n=3, X=2), p1: never observed, p2: I = 0 0 0 1
HIST = [[1, 0, 1], [], [0, 0, 0, 1]]
LAST = [8, 9, 5]  # current cycle 10 -> t = 2, 1, 5


def test_hand_worked_estimators():
    st = state_from_histories(HIST, LAST)
    st["D"] = np.array([3.0, np.nan, 0.0])
    tm = compute_terminals(st, cycle=10, now=10 * 3600.0 + 1800.0, prior=(0.5, 1.0))
    reg = core_registry()  # compute_terminals' own
    # every terminal, the registry's order; those of a whole cycle's budget need one
    assert list(tm) == [name for name in reg if not reg.get(name).needs_budget]
    np.testing.assert_allclose(tm["n"], [3, 0, 4])
    np.testing.assert_allclose(tm["X"], [2, 0, 1])
    np.testing.assert_allclose(tm["t"], [2, 1, 5])
    np.testing.assert_allclose(tm["hours"], [2.5, 1.5, 5.5])
    np.testing.assert_allclose(tm["CG"], [math.log(3.5 / 1.5), 0.0, math.log(4.5 / 3.5)])
    np.testing.assert_allclose(tm["NAD"], [2 / 3, 0, 1 / 4])
    np.testing.assert_allclose(tm["SAD"], [1, 0, 1])
    np.testing.assert_allclose(tm["AAD"], [(1 + 3) / 6, 0, 4 / 10])
    np.testing.assert_allclose(tm["GAD"], [(1 + 4) / 7, 0, 8 / 15])
    # prior (a, b) = (0.5, 1)
    np.testing.assert_allclose(tm["NADp"], [2.5 / 4, 0.5, 1.5 / 5])
    np.testing.assert_allclose(tm["CGp"], [math.log(8 / 3), math.log(2), -math.log(1 - 0.3)])
    np.testing.assert_allclose(tm["SADp"], [1.5 / 2, 0.5, 1.5 / 2])
    np.testing.assert_allclose(tm["AADp"][:2], [31 / 50, 0.5])  # m = 18/7 for n = 3
    np.testing.assert_allclose(tm["GADp"][:2], [13 / 20, 0.5])  # m = 7/3 for n = 3
    np.testing.assert_allclose(tm["D"], [3.0, np.nan, 0.0])
    assert np.isnan(tm["A"]).all()  # not recorded: NaN
    for v in tm.values():
        assert v.dtype == np.float64


def test_rates_are_zero_without_observations():
    st = state_from_histories([[], []], [0, 0])
    tm = compute_terminals(st, cycle=3, needed={"CG", "NAD", "SAD", "AAD", "GAD"})
    for name in ("CG", "NAD", "SAD", "AAD", "GAD"):
        np.testing.assert_array_equal(tm[name], [0.0, 0.0])


def test_needed_limits_the_work():
    st = state_from_histories(HIST, LAST)
    tm = compute_terminals(st, cycle=10, needed={"t", "CGp"})
    assert set(tm) == {"t", "CGp"}
    with pytest.raises(ValueError, match="unknown terminal"):
        compute_terminals(st, cycle=10, needed={"bogus"})
    with pytest.raises(ValueError, match="now"):
        compute_terminals(st, cycle=10, needed={"hours"})


def _gad_direct(bits: list[int]) -> Fraction:
    num = sum(Fraction(2) ** (i - 1) * b for i, b in enumerate(bits, start=1))
    return num / (Fraction(2) ** len(bits) - 1)


def test_gad_recursion_equals_direct_formula_up_to_60():
    rng = random.Random(7)
    for n in range(1, 61):
        for _ in range(5):
            bits = [rng.randint(0, 1) for _ in range(n)]
            st = state_from_histories([bits], [0])
            got = compute_terminals(st, cycle=1, needed={"GAD"})["GAD"][0]
            assert got == pytest.approx(float(_gad_direct(bits)), rel=1e-12, abs=1e-15)


def test_gad_stays_finite_for_10000_observations():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2, 10_000)
    bits[-1] = 1
    st = state_from_histories([list(bits), [1] * 10_000, [0] * 10_000], [0, 0, 0])
    tm = compute_terminals(st, cycle=1, prior=(0.5, 1.0))
    for name in ("GAD", "GADp", "AAD", "AADp", "CG", "CGp", "NAD"):
        assert np.isfinite(tm[name]).all(), name
    assert 0.5 <= tm["GAD"][0] <= 1.0  # the last observation alone weighs ~1/2
    assert tm["GAD"][1] == pytest.approx(1.0)
    assert tm["GAD"][2] == 0.0


def test_effective_sample_sizes_match_kish_formula():
    for n in range(1, 61):
        for est, w in (
            ("NAD", [Fraction(1)] * n),
            ("AAD", [Fraction(i) for i in range(1, n + 1)]),
            ("GAD", [Fraction(2) ** (i - 1) for i in range(1, n + 1)]),
            ("SAD", [Fraction(0)] * (n - 1) + [Fraction(1)]),
        ):
            kish = sum(w) ** 2 / sum(x * x for x in w)
            got = effective_observations(est, np.array([n]))[0]
            assert got == pytest.approx(float(kish), rel=1e-12), (est, n)
    assert np.isfinite(effective_observations("GAD", np.array([10_000]))).all()


@pytest.mark.parametrize(
    "bad", [(1, 1), (2, 1), (-0.1, 1), (0.5,), "0.5,1", (float("nan"), 1), (True, 2)]
)
def test_bad_prior_is_refused(bad):
    with pytest.raises(RecrawlSettingError, match="RECRAWL_PRIOR"):
        check_prior(bad)


def test_prior_zero_a_is_allowed():
    assert check_prior([0, 2]) == (0.0, 2.0)
