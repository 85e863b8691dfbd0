"""Named scoring formulas: the GP4C papers' baselines, and their smoothed variants.

Each preset is an ordinary expression over the terminals of
:mod:`scrapy_recrawl.scoring.terminals`, compiled by the same code path as a
user's ``RECRAWL_SCORER`` string, so a preset and the same formula typed by
hand score identically. ``rand`` is the one exception: it is not a formula
but a seeded random permutation (RECRAWL_SEED).

The paper-exact presets (``cg``, ``nad``, ``sad``, ``aad``, ``gad``,
``age``, ``rand``, ``gp4c``, ``cg_raw``) are kept for fidelity and for
comparison. On sparse histories they never revisit a page whose first
observation showed no change (its rate is 0, so its score is 0 for ever);
the ``+`` variants use the prior terminals (``NADp`` …, RECRAWL_PRIOR) and
do not have that failure. See docs/scorers.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """One named formula: ``expression`` (None for ``rand``), and where it comes from."""

    name: str
    expression: str | None
    reference: str
    description: str


def nutch_expression(
    interval: float = 30.0,
    min_interval: float = 1.0,
    max_interval: float = 365.0,
    inc_rate: float = 0.4,
    dec_rate: float = 0.2,
) -> str:
    """The ``nutch`` preset written out as a formula of ``n``, ``X`` and ``t`` (what the
    ``nutch_interval`` terminal computes, scoring/policies.py): ``t / interval``.

    Nutch multiplies a page's interval by ``1 - dec_rate`` after a fetch that found it
    modified and by ``1 + inc_rate`` after one that did not (the first fetch, with
    nothing to compare, leaves it), then clamps it to ``[min_interval, max_interval]``.
    The products commute, so while no bound is hit the interval after ``n``
    observations with ``X`` changes is ``interval (1 + inc)^(n - X) (1 - dec)^X``,
    whatever their order: a function of what every store keeps. Here it is clamped once,
    at the end; Nutch clamps at every step (docs/scorers.md says where they part).
    Written with ``exp`` of the logs: no ``inf * 0`` for long histories.
    """
    up = math.log1p(inc_rate)
    down = -math.log1p(-dec_rate)
    interval_expr = f"{interval!r}*exp({up!r}*(n - X) - {down!r}*X)"
    return f"t/Min(Max({interval_expr}, {min_interval!r}), {max_interval!r})"


_TAN_MITRA = "Tan & Mitra 2010, as used in GP4C (Santos et al. 2013 sec. 5.1; 2015 sec. 5.1)"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "cg",
            "1 - exp(-CG*t)",
            "Cho & Garcia-Molina 2003, eq. (1) of Santos et al. 2013 / (4) of 2015",
            "probability of a change in t cycles under the CG rate estimate",
        ),
        Preset("nad", "1 - exp(-NAD*t)", _TAN_MITRA, "non-adaptive: every observation weighs 1/n"),
        Preset(
            "sad", "1 - exp(-SAD*t)", _TAN_MITRA, "shortsighted adaptive: only the last observation"
        ),
        Preset("aad", "1 - exp(-AAD*t)", _TAN_MITRA, "arithmetically adaptive: weight i"),
        Preset("gad", "1 - exp(-GAD*t)", _TAN_MITRA, "geometrically adaptive: weight 2^(i-1)"),
        Preset("age", "t", "Santos et al. 2013/2015 sec. 5.1 (Age)", "cycles since the last visit"),
        Preset("rand", None, "Santos et al. 2013/2015 sec. 5.1 (Rand)", "seeded random order"),
        Preset(
            "gp4c",
            "t*X",
            "Santos et al. 2013 sec. 5.3; 2015 sec. 5.3 (a simple evolved function)",
            "cycles since the last visit times changes seen",
        ),
        Preset(
            "cg_raw", "CG", "Cho & Garcia-Molina 2003 (the rate alone)", "the CG rate, ignoring t"
        ),
        Preset(
            "cg+",
            "1 - exp(-CGp*t)",
            "this package: CG with the prior",
            "1 - (1 - (X + a)/(n + b))^t: chance of a change in t cycles",
        ),
        Preset(
            "nad+",
            "1 - exp(-NADp*t)",
            "this package: NAD with the prior",
            "(X + a)/(n + b) as rate",
        ),
        Preset("sad+", "1 - exp(-SADp*t)", "this package: SAD with the prior", "SAD shrunk to a/b"),
        Preset("aad+", "1 - exp(-AADp*t)", "this package: AAD with the prior", "AAD shrunk to a/b"),
        Preset("gad+", "1 - exp(-GADp*t)", "this package: GAD with the prior", "GAD shrunk to a/b"),
        Preset(
            "aad+h",
            "1 - exp(-AADh*t)",
            "this package: AAD with its group's empirical-Bayes prior (scoring/pooled.py)",
            "AAD shrunk to the rate of the other URLs of its host (or directory)",
        ),
        Preset(
            "nad+h",
            "1 - exp(-NADh*t)",
            "this package: NAD with its group's empirical-Bayes prior (scoring/pooled.py)",
            "(X + Gb*Gm)/(n + Gb) as rate",
        ),
        # Loop-time baskets (paper 001): needs probing (RECRAWL_PROBE) and a basket model.
        Preset(
            "basket",
            "due",
            "Meegahapola et al. 2018 (loop-time baskets, random forest)",
            "time since the last visit / the page's basket interval",
        ),
        # Peers and freshness-optimal policies (issue 18): scoring/policies.py
        Preset(
            "nutch",
            "t/nutch_interval",
            "Apache Nutch AdaptiveFetchSchedule (StormCrawler's and Heritrix 1's adaptive "
            "schedules have the same shape); RECRAWL_NUTCH_* set its numbers",
            "most overdue relative to the adaptive interval: t / interval(n, X)",
        ),
        Preset(
            "burst",
            "CGp*(t + 4*burst)",
            "this package: CG with a change's aftershocks (bench/gap_study.py)",
            "expected changes since the last visit when a change raises the rate "
            "(1 + 4 exp(-s/tau))-fold s cycles after it",
        ),
        Preset(
            "chogm",
            "t*chogm_f",
            "Cho & Garcia-Molina, TODS 2003 (optimal revisit frequencies for freshness)",
            "visits missed at the freshness-optimal rate: t * f",
        ),
        Preset(
            "lambdacrawl",
            "t*lc_f",
            "Kolobov, Peres, Lu & Horvitz, NeurIPS 2019 (LambdaCrawl, polled sources); "
            "Kolobov et al. SIGIR 2019 (politeness: RECRAWL_MAX_PER_DOMAIN)",
            "crawls missed at the w-weighted harmonic-optimal rate: t * rho",
        ),
        # Content-aware prediction (paper 004): needs the Q column (scheduler, content replay).
        Preset(
            "experts",
            "(1 - exp(-AADp*t) + (1 - exp(-Q*t)))/2",
            "Radinsky & Bennett 2013, Fig. 3 (weighted majority of the page and its experts)",
            "the page's own estimate and its related pages' vote, equal weight",
        ),
    )
}

#: The paper-exact presets, in the order the papers list them.
PAPER_PRESETS: tuple[str, ...] = ("cg", "nad", "sad", "aad", "gad", "age", "rand", "gp4c", "cg_raw")
#: The variants that use the prior.
SMOOTHED_PRESETS: tuple[str, ...] = ("cg+", "nad+", "sad+", "aad+", "gad+")
#: The peers crawlers run today and the freshness-optimal policies (docs/scorers.md).
POLICY_PRESETS: tuple[str, ...] = ("burst", "nutch", "chogm", "lambdacrawl")
#: The variants whose prior is the URL's group's (scoring/pooled.py: the group column).
POOLED_PRESETS: tuple[str, ...] = ("aad+h", "nad+h")
#: Presets that need more than the store's columns (the scheduler adds basket_seconds).
BASKET_PRESETS: tuple[str, ...] = ("basket",)
#: Presets that need the related-pages column Q (scheduler / content replay, paper 004).
CONTENT_PRESETS: tuple[str, ...] = ("experts",)

#: Recommended RECRAWL_SCORER: best mean ChangeRate/oracle on the shared data (fit halves)
#: among the presets (bench/replay_presets.py; docs/scorers.md).
RECOMMENDED_SCORER = "aad+"
