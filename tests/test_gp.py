"""GP4C trees and operators: depth limits, printing, protected evaluation."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sympy

from scrapy_recrawl.core.simulate import new_state
from scrapy_recrawl.learn import gp
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import Scorer, compute_terminals

ALL = gp.TERMINAL_SETS["all"]


def _population(seed: int, count: int = 200, max_depth: int = 6) -> list:
    return gp.ramped_half_and_half(random.Random(seed), count, ALL, max_depth=max_depth)


def _terms(pages: int = 300, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    state = new_state(pages)
    state["n"][:] = rng.integers(0, 30, pages)
    state["X"][:] = np.minimum(state["n"], rng.integers(0, 10, pages))
    state["sad"][:] = (state["X"] > 0) & (rng.random(pages) < 0.5)
    state["aad_sum"][:] = rng.random(pages) * state["X"] * 3
    state["gad"][:] = rng.random(pages) * (state["X"] > 0)
    state["last_visit_cycle"][:] = rng.integers(0, 40, pages)
    return compute_terminals(state, 45, needed=[n for n in ALL])


def test_ramped_half_and_half_ramps_depths_half_full():
    trees = gp.ramped_half_and_half(random.Random(0), 100, ALL, min_depth=2, max_depth=6)
    depths = [gp.depth(t) for t in trees]
    assert min(depths) >= 1 and max(depths) <= 6
    assert {d for d in depths} >= {2, 6}  # full trees reach their ramp depth
    assert len(gp.unique(trees)) >= 95  # duplicates are re-drawn


@pytest.mark.parametrize("max_depth,xdepth", [(10, 9), (4, 3), (2, 2)])
def test_operators_keep_depth_limits(max_depth, xdepth):
    rng = random.Random(max_depth)
    pop = _population(max_depth, 120, max_depth=min(6, max_depth))
    for _ in range(600):
        a, b = rng.choice(pop), rng.choice(pop)
        child = gp.crossover(rng, a, b, max_depth=max_depth, max_crossover_depth=xdepth)
        if gp.depth(a) > xdepth or gp.depth(b) > xdepth:
            assert child is None
        if child is not None:
            assert gp.depth(child) <= max_depth
            pop.append(child)
        m = gp.replacement_mutation(rng, a, ALL, max_depth=max_depth)
        assert gp.depth(m) <= max_depth
        s = gp.swap_mutation(rng, b, max_depth=max_depth)
        assert gp.depth(s) <= max_depth
        assert gp.size(s) == gp.size(b)  # a swap moves nodes, never adds or drops them
    assert max(gp.depth(t) for t in pop) <= max_depth


def test_crossover_refuses_parents_deeper_than_the_crossover_depth():
    deep = ("+", ("+", ("+", "t", "X"), "n"), "X")  # depth 3
    assert gp.crossover(random.Random(0), deep, "t", max_depth=10, max_crossover_depth=2) is None
    child = gp.crossover(random.Random(0), deep, "t", max_depth=10, max_crossover_depth=3)
    assert child is not None


def test_depth_and_size_conventions():
    assert gp.depth("t") == 0 and gp.size("t") == 1
    tree = ("*", "t", ("log", "X"))
    assert gp.depth(tree) == 2 and gp.size(tree) == 4
    assert gp.to_expression(tree) == "t * log(X)"
    assert gp.to_expression(("pow", 0.5, 1000.0)) == "pow(0.5, 1000)"
    assert gp.to_expression(("-", 0.001, ("exp", "CGp"))) == "0.001 - exp(CGp)"


def test_printed_expression_scores_as_the_tree_in_the_scorer():
    terms = _terms()
    for tree in _population(3, 80):
        if not gp.terminals_used(tree):
            continue
        text = gp.to_expression(tree)
        sympy.sympify(text, locals={n: sympy.Symbol(n) for n in ALL})  # sympy parses it
        scorer = Scorer.from_spec(text)
        ours = gp.evaluate(tree, terms)
        theirs = scorer.score(terms)
        same = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
        close = np.isclose(ours, theirs, rtol=1e-9, atol=1e-300)
        assert (same | close).all(), text


def test_protected_functions_never_raise_and_give_ranks_last_values():
    terms = _terms(50)
    for tree in [
        ("pow", 1000.0, 1000.0),
        ("pow", ("-", 0.001, "t"), 0.5),
        ("exp", ("*", 1000.0, "t")),
        ("/", "X", ("-", "t", "t")),
        ("log", ("-", 0.001, "t")),
    ]:
        out = gp.evaluate(tree, terms)
        assert out.shape == (50,)
    assert (gp.evaluate(("/", "X", ("-", "t", "t")), terms) == 0).all()  # protected /
    assert (gp.evaluate(("log", ("-", 0.001, "t")), terms)[terms["t"] > 1] == 0).all()


def test_terminal_sets():
    assert gp.terminal_set("basic") == ("n", "X", "t")
    full = gp.terminal_set("all")
    assert {"CG", "NAD", "SAD", "AAD", "GAD", "CGp", "NADp", "SADp", "AADp", "GADp"} <= set(full)
    assert "D" not in full and "D" in gp.terminal_set("all", content=True)
    assert gp.terminal_set("t, X") == ("t", "X")
    with pytest.raises(ValueError, match="unknown: bogus"):
        gp.terminal_set("t,bogus")
    with pytest.raises(ValueError, match="change magnitudes"):
        gp.terminal_set("t,D")
    # paper 004's window and Q are replayed (PopulationReplay(window=..., related=...))
    assert gp.terminal_set("window") == full + gp.WINDOW_TERMINALS + ("Q",)
    assert gp.terminal_set("t,C1,D2") == ("t", "C1", "D2")
    assert gp.terminal_set("t,Q") == ("t", "Q") and gp.uses_related(("t", "Q"))
    with pytest.raises(ValueError, match="unknown: hours"):
        gp.terminal_set("t,hours")


def test_preset_trees_score_as_the_presets():
    """Seeding (--seed-presets): each tree ranks the URLs exactly as its preset."""
    terms = _terms()
    terms["Q"] = np.linspace(0.0, 1.0, terms["t"].shape[0])
    for name, tree in gp.PRESET_TREES.items():
        reg = default_registry()  # experts' Q: the content plug-in's
        preset = Scorer.from_spec(name, registry=reg)
        expected = preset.score(terms)
        printed = Scorer.from_spec(gp.to_expression(tree), registry=reg).score(terms)
        if name == "experts":  # sympy reorders the sum: equal up to rounding
            assert np.allclose(gp.evaluate(tree, terms), expected, rtol=1e-12), name
            assert np.allclose(printed, expected, rtol=1e-12), name
            continue
        assert np.array_equal(gp.evaluate(tree, terms), expected, equal_nan=True), name
        assert np.array_equal(printed, expected, equal_nan=True), name
    assert set(gp.preset_trees(ALL)) == {t for n, t in gp.PRESET_TREES.items() if n != "experts"}
    assert gp.preset_trees(("t", "X")) == ["t", ("*", "t", "X")]


def test_a_lone_estimator_terminal_is_not_read_back_as_a_preset():
    for name in ("CG", "NAD", "AADp", "t"):
        scorer = Scorer.from_spec(gp.to_expression(name))
        assert scorer.expression.strip("()") == name and str(scorer.sympy_expr) == name


def test_interner_shares_equal_subtrees():
    interner = gp.Interner()
    a = interner.intern(("+", ("*", "t", "X"), "n"))
    b = interner.intern(("-", ("*", "t", "X"), "n"))
    assert a != b
    assert interner.intern(("*", "t", "X")) < a  # the shared subtree was interned once
    assert len(interner.nodes) == 6  # t X * n + - (hash-consed)
