"""core/score_check.py: a scorer that gives most URLs one score, or none, though their
terminals tell them apart, is found from the cycle's scores (and only then)."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.core.score_check import SAMPLE, score_spread
from scrapy_recrawl.scoring import Scorer


def spread_of(expression, **columns):
    """The spread of ``expression`` scored on ``columns`` (terminal arrays)."""
    cols = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    scorer = Scorer.from_spec(expression)
    scores = scorer.score(cols)
    asked = []

    def terminals_of(positions):
        asked.append(len(positions))
        return {name: cols[name][positions] for name in scorer.terminals_needed}

    return score_spread(scores, 5, terminals_of), asked


def warning(spread, expression="e"):
    return spread.warning("RECRAWL_SCORER", expression, "t, X")


def test_a_protected_division_by_zero_is_found_when_the_history_differs():
    x = [0, 1, 2, 0, 3, 0, 1, 0]
    spread, _ = spread_of("X/0", X=x)
    assert spread.conclusive and spread.top == 1.0 and spread.terminals == 0.5
    message = warning(spread, "X/0")
    assert message.startswith("RECRAWL_SCORER='X/0': one score (0) covers 100% of the 8 URLs")
    assert "cycle 5" in message and "\n" not in message


def test_a_young_history_is_inconclusive_not_a_warning():
    # every page seen once: t = 1, X = 0; no formula of them can rank the pages
    spread, _ = spread_of("X/0", X=[0.0] * 10)
    assert spread.top == 1.0 and spread.terminals == 1.0
    assert not spread.conclusive and warning(spread) is None
    # log(t-1) while every t is 1 (a warm-up just ended): asked again later ...
    spread, _ = spread_of("log(t-1)", t=[1.0] * 10)
    assert not spread.conclusive
    # ... when ages differ and it still gives 0 to both 1 and 2
    spread, _ = spread_of("log(t-1)", t=[1.0] * 3 + [2.0] * 7)
    assert spread.conclusive and spread.top == 1.0 and warning(spread) is not None


def test_scores_that_spread_are_conclusive_and_never_need_the_terminals():
    rng = np.random.default_rng(3)
    spread, asked = spread_of("t*X + n", t=rng.integers(1, 9, 500), X=rng.integers(0, 5, 500),
                              n=rng.integers(1, 20, 500))  # fmt: skip
    assert spread.conclusive and spread.top <= 0.5 and warning(spread) is None
    assert asked == []  # the terminals are read only when one value covers most


def test_a_scorer_that_follows_its_terminals_exactly_is_not_blamed():
    # the preset cg, 1 - exp(-CG*t), is 0 for every page never seen to change: so is
    # its terminal CG, and all have one age; nothing to blame on the formula
    cg = [0.0] * 7 + [0.5, 1.2, 0.5]
    spread, _ = spread_of("cg", CG=cg, t=[2.0] * 10)
    assert spread.top == spread.terminals == 0.7
    assert not spread.conclusive and warning(spread) is None
    # with ages that differ, the unchanged pages' ages are what it ignores: said
    spread, _ = spread_of("cg", CG=cg, t=[1.0, 2.0] * 5)
    assert spread.conclusive and warning(spread) is not None
    message = spread.warning("RECRAWL_SCORER", "cg", "CG, t", expression="1 - exp(-CG*t)")
    assert message.startswith("RECRAWL_SCORER='cg' (1 - exp(-CG*t)): one score (0) covers 70%")


def test_mostly_non_finite_scores_are_a_warning():
    t = [1.0, 2.0, 3.0, 800.0, 900.0, 1000.0, 1100.0]
    spread, _ = spread_of("exp(t)", t=t)
    assert spread.nonfinite == pytest.approx(4 / 7)
    message = warning(spread, "exp(t)")
    assert "57% of the 7 URLs scored at cycle 5 get a score that is not a finite number" in message


def test_a_store_of_millions_is_looked_at_through_a_bounded_sample():
    size = 3_000_000
    scores = np.zeros(size)
    scores[: size // 4] = np.arange(size // 4)  # one value (0) on three quarters
    seen = []

    def terminals_of(positions):
        seen.append(positions)
        return {"t": np.arange(len(positions), dtype=np.float64)}  # all different

    spread = score_spread(scores, 9, terminals_of)
    assert spread.sample == SAMPLE and spread.scored == size
    assert len(seen) == 1 and len(seen[0]) == SAMPLE
    assert spread.top == pytest.approx(0.75, abs=0.01) and spread.conclusive


def test_fewer_than_two_scores_say_nothing():
    assert score_spread(np.zeros(1), 1, lambda p: {}) is None
    assert score_spread(np.zeros(0), 1, lambda p: {}) is None
