"""The block kernel scores bit for bit as the reference (lambdify) function."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.core.selection import with_budget
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import PRESETS, Scorer, compute_terminals
from scrapy_recrawl.scoring.kernel import BLOCK

NAMES = ("n", "X", "t", "hours", "CG", "NAD", "SAD", "AAD", "GAD", "NADp", "D")
CONSTANTS = ("0", "0.001", "0.01", "0.1", "0.5", "1", "2", "3", "10", "100", "1000", "-1")


def random_expression(rng: np.random.Generator, depth: int) -> str:
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.7:
            return str(rng.choice(NAMES))
        return str(rng.choice(CONSTANTS)).replace("-1", "(0 - 1)")
    a = random_expression(rng, depth - 1)
    b = random_expression(rng, depth - 1)
    kind = int(rng.integers(0, 14))
    if kind < 4:
        return f"({a} {'+-*/'[kind]} {b})"
    return [
        f"log({a})",
        f"exp({a})",
        f"sqrt({a})",
        f"Abs({a})",
        f"pow({a}, {b})",
        f"({a})^{rng.choice(['2', '0.5', '3', '1', '0', '(0 - 1)', '(0 - 2)'])}",
        f"Min({a}, {b})",
        f"Max({a}, {b}, {random_expression(rng, depth - 1)})",
        f"(0 - {a})",
        f"({a} / ({b} - {b}))",
    ][kind - 4]


def tricky_terminals(size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Zeros, negatives, NaN, inf, tiny and huge values: every protected branch."""
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-310, 1e300, 0.5])
    out = {}
    for name in NAMES:
        v = rng.integers(0, 5, size).astype(np.float64) * rng.choice([1.0, 0.5, -1.0, 3.7], size)
        pick = rng.random(size) < 0.05
        v[pick] = rng.choice(special, int(pick.sum()))
        out[name] = v
    # a block with no zero divisor and no log outside the domain: the fast branches
    for name in NAMES:
        out[name][:BLOCK] = 1.0 + rng.random(BLOCK)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_expressions_score_bit_for_bit_as_the_reference(seed):
    rng = np.random.default_rng(seed)
    terms = tricky_terminals(2 * BLOCK + 77, seed)
    small = {k: v[BLOCK - 3 : BLOCK + 4].copy() for k, v in terms.items()}
    compiled = 0
    for _ in range(25):
        expr = random_expression(rng, int(rng.integers(1, 6)))
        s = Scorer.from_spec(expr)
        compiled += s.kernel is not None
        for tm in (terms, small):
            np.testing.assert_array_equal(s.score(tm), s.score_reference(tm), err_msg=expr)
    assert compiled >= 15  # most random expressions take the fast path


@pytest.mark.parametrize("name", [p for p in PRESETS if p != "rand"])
def test_presets_score_bit_for_bit_as_the_reference(name):
    rng = np.random.default_rng(1)
    size = 3 * BLOCK + 5
    n = rng.integers(0, 50, size)
    x = rng.binomial(n, 0.2)
    state = {
        "n": n,
        "X": x,
        "sad": (rng.random(size) < 0.2) * (n > 0) * 1.0,
        "aad_sum": x * (n + 1) / 2.0,
        "gad": rng.random(size) * (n > 0),
        "last_visit_cycle": rng.integers(0, 60, size),
        "last_visit_time": 1.7e9 + rng.random(size) * 86400 * 60,
        "first_cycle": np.zeros(size, dtype=np.int64),
        "last_change_cycle": np.full(size, -1),
    }
    state = with_budget(state, 100)  # chogm and lambdacrawl solve for a cycle's budget
    s = Scorer.from_spec(name, registry=default_registry())  # basket, experts: plug-ins'
    tm = compute_terminals(
        state, 60, 1.7e9 + 61 * 86400, needed=s.terminals_needed, registry=s.registry
    )
    np.testing.assert_array_equal(s.score(tm), s.score_reference(tm))
    assert s.kernel is not None or s.protected_expr.is_Symbol


@pytest.mark.parametrize(
    "expr",
    [
        "log(1 + t) * (X + 0.5)/(n + 1) + exp(-GAD*t) * AAD - sqrt(hours)/(CG + 10) + SAD",
        "X/0 + t",
        "t/(1 - 1) + X",
        "pow(t, X) + pow(2, t) + 2^t",
        "t^0 + X^1 + n^(0 - 1) + hours^2 + CG^0.5 + NAD^3",
        "log(0) + t",
        "10**10**10 * t",
        "Min(t, X, n, 1) - Max(0.5, t)",
        "pow(t, -2) + t**-1",
        "exp(t) * 0 + log(X)",
    ],
)
def test_edge_expressions_score_as_the_reference(expr):
    terms = tricky_terminals(BLOCK + 100, 5)
    s = Scorer.from_spec(expr)
    assert s.kernel is not None, expr
    np.testing.assert_array_equal(s.score(terms), s.score_reference(terms))


def test_non_float64_terminals_take_the_reference_path():
    s = Scorer.from_spec("t*X - 1")
    tm = {"t": np.arange(10), "X": np.arange(10) % 3}  # int64: integer arithmetic
    np.testing.assert_array_equal(s.score(tm), s.score_reference(tm))
    assert s.score(tm).dtype == np.float64


def test_constant_and_bare_terminal_scores():
    tm = {"t": np.arange(5.0)}
    assert Scorer.from_spec("2^3 + exp(0)").score(tm).tolist() == [9.0] * 5
    s = Scorer.from_spec("t")
    out = s.score(tm)
    assert out.tolist() == tm["t"].tolist() and out is not tm["t"]


def test_tiny_constant_power_neither_hangs_nor_fails():
    # 10^-1000000000 used to be the Python integer power 10**1000000000 at scoring
    s = Scorer.from_spec("t + 10^-1000000000 + X^-2")
    tm = {"t": np.array([1.0, 2.0]), "X": np.array([0.0, 2.0])}
    np.testing.assert_array_equal(s.score(tm), [1.0, 2.25])
    np.testing.assert_array_equal(s.score_reference(tm), [1.0, 2.25])


def test_bare_terminal_top_k_selects_on_the_column_without_changing_it():
    rng = np.random.default_rng(4)
    t = np.where(rng.random(300_000) < 0.01, np.nan, rng.integers(0, 50, 300_000).astype(float))
    t[5] = np.inf
    before = t.copy()
    s = Scorer.from_spec("t")
    idx = s.top_k({"t": t}, 1000)
    np.testing.assert_array_equal(t, before)
    ranked = np.where(np.isfinite(t), t, -np.inf)
    np.testing.assert_array_equal(ranked[idx], np.sort(ranked)[::-1][:1000])
    np.testing.assert_array_equal(idx, Scorer.from_spec("t + 0").top_k({"t": t}, 1000))
