"""Every preset against hand-computed values on a small worked history."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scrapy_recrawl.history.state import observe
from scrapy_recrawl.scoring import (
    DEFAULT_PRIOR,
    PAPER_PRESETS,
    PRESETS,
    RECOMMENDED_SCORER,
    SMOOTHED_PRESETS,
    Scorer,
    compute_terminals,
)
from scrapy_recrawl.scoring.presets import (
    BASKET_PRESETS,
    CONTENT_PRESETS,
    POLICY_PRESETS,
    POOLED_PRESETS,
)
from scrapy_recrawl.settings import DEFAULTS

# p0: I = 1 0 1, last visit 2 cycles ago; p1: never observed, 1 cycle ago;
# p2: I = 0 0 0 1, 5 cycles ago.
HIST = [[1, 0, 1], [], [0, 0, 0, 1]]
T = [2.0, 1.0, 5.0]
PRIOR = (0.5, 1.0)

e = math.exp
EXPECTED: dict[str, list[float]] = {
    # paper-exact: CG = [log(7/3), 0, log(9/7)], NAD = [2/3, 0, 1/4], SAD = [1, 0, 1],
    # AAD = [4/6, 0, 4/10], GAD = [5/7, 0, 8/15]
    "cg": [1 - (3 / 7) ** 2, 0.0, 1 - (7 / 9) ** 5],
    "nad": [1 - e(-2 / 3 * 2), 0.0, 1 - e(-1 / 4 * 5)],
    "sad": [1 - e(-2), 0.0, 1 - e(-5)],
    "aad": [1 - e(-4 / 6 * 2), 0.0, 1 - e(-4 / 10 * 5)],
    "gad": [1 - e(-5 / 7 * 2), 0.0, 1 - e(-8 / 15 * 5)],
    "age": [2.0, 1.0, 5.0],
    "gp4c": [4.0, 0.0, 5.0],
    "cg_raw": [math.log(7 / 3), 0.0, math.log(9 / 7)],
    # prior (0.5, 1): NADp = [2.5/4, .5, 1.5/5]; CGp = -log(1 - NADp)
    "cg+": [1 - 0.375**2, 1 - 0.5, 1 - 0.7**5],
    "nad+": [1 - e(-0.625 * 2), 1 - e(-0.5), 1 - e(-0.3 * 5)],
    # SADp = (1*SAD + .5)/(1 + 1) for n >= 1, .5 for n = 0
    "sad+": [1 - e(-0.75 * 2), 1 - e(-0.5), 1 - e(-0.75 * 5)],
    # AADp: m(3) = 18/7 -> 31/50; m(4) = 10/3 -> 11/26
    "aad+": [1 - e(-31 / 50 * 2), 1 - e(-0.5), 1 - e(-11 / 26 * 5)],
    # GADp: m(3) = 7/3 -> 13/20; m(4) = 45/17 -> 65/124
    "gad+": [1 - e(-13 / 20 * 2), 1 - e(-0.5), 1 - e(-65 / 124 * 5)],
}


def worked_state() -> dict[str, np.ndarray]:
    cols: list[tuple] = []
    for hist in HIST:
        s = (0, 0, 0.0, 0.0, 0.0)
        for ind in hist:
            s = observe(*s, ind)
        cols.append(s)
    n, x, sad, aad, gad = (np.array(c) for c in zip(*cols, strict=True))
    return {
        "n": n.astype(np.int64),
        "X": x.astype(np.int64),
        "sad": sad.astype(float),
        "aad_sum": aad.astype(float),
        "gad": gad.astype(float),
        "last_visit_cycle": (10 - np.array(T)).astype(np.int64),
        "last_visit_time": np.zeros(3),
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_against_hand_computed_values(name):
    scorer = Scorer.from_spec(name, prior=PRIOR)
    tm = compute_terminals(worked_state(), 10, prior=scorer.prior, needed=scorer.terminals_needed)
    np.testing.assert_allclose(scorer.score(tm), EXPECTED[name], rtol=1e-12, atol=1e-15)
    assert str(scorer) == PRESETS[name].expression


def test_every_preset_is_covered():
    # the basket preset needs a trained model: tests/test_baskets.py checks it by hand;
    # the experts preset needs the Q column: tests/test_content.py checks it
    # the policies' presets: tests/test_policies.py; the pooled presets (a group
    # column): tests/test_pooled.py
    extra = set(BASKET_PRESETS) | set(CONTENT_PRESETS) | set(POLICY_PRESETS) | set(POOLED_PRESETS)
    everything = set(PAPER_PRESETS) | set(SMOOTHED_PRESETS) | extra
    assert set(EXPECTED) | {"rand"} | extra == set(PRESETS) == everything


def test_rand_is_seeded():
    tm = compute_terminals(worked_state(), 10, needed={"n"})
    a = Scorer.from_spec("rand", seed=3)
    np.testing.assert_array_equal(a.score(tm), np.random.default_rng(3).random(3))
    assert str(a) == "rand(seed=3)"
    b, c = Scorer.from_spec("rand", seed=3), Scorer.from_spec("rand", seed=4)
    first = b.score(tm)
    assert not np.array_equal(first, c.score(tm))
    assert not np.array_equal(first, b.score(tm))  # a new draw each cycle


def test_paper_exact_presets_never_revisit_unchanged_pages():
    """The failure the prior fixes: X = 0 scores 0 for ever under the paper's rates."""
    st = worked_state()
    for name in ("cg", "nad", "sad", "aad", "gad", "gp4c"):
        s = Scorer.from_spec(name)
        for cycle in (10, 1000):
            assert s.score(compute_terminals(st, cycle, needed=s.terminals_needed))[1] == 0.0
    s = Scorer.from_spec("nad+")
    assert s.score(compute_terminals(st, 1000, needed=s.terminals_needed))[1] > 0.9


def test_preset_names_are_case_insensitive_and_default_prior_applies():
    s = Scorer.from_spec(" NAD+ ")
    assert s.name == "nad+" and s.prior is None
    tm = s.terminals(worked_state(), 10)
    a, b = DEFAULT_PRIOR
    np.testing.assert_allclose(tm["NADp"], (np.array([2, 0, 1]) + a) / (np.array([3, 0, 4]) + b))


def test_recommended_scorer_is_a_preset_and_default_setting_parses():
    assert RECOMMENDED_SCORER in PRESETS
    Scorer.from_spec(DEFAULTS["RECRAWL_SCORER"])
