"""The estimated freshness of a collection, from the store's own change rates.

One estimator, defined here once, for every figure that says "how fresh is the
copy": ``scrapy recrawl-report`` (per cycle) and the crawl's quality stats.

Each page changes as a Poisson process (Cho & Garcia-Molina 2003). Its rate per
unit of time comes from its own history: over ``n`` change observations it saw
``X`` changes, each observation covering one visit interval. The chance of no
change within an interval is estimated as ``(n - X + 0.5)/(n + 0.5)``, so the
expected number of changes per interval is ``CG = -log`` of it (the terminal
``CG`` of scoring/terminals.py, computed by it here) and ``rate = CG / interval``. The probability that a page visited ``age`` ago is
still unchanged is ``exp(-rate * age)``; the collection's freshness is the mean of
it over the pages that have a rate (at least one observation). Time units are the
caller's (cycles in the report); ``interval`` and ``age`` must share them.
"""

from __future__ import annotations

import numpy as np

from .registry import TerminalRegistry
from .terminals import CORE_TERMINALS

#: the core terminals only: CG needs no plug-in (none is loaded for it)
_CORE = TerminalRegistry(CORE_TERMINALS)


def change_rate(n: np.ndarray, X: np.ndarray, interval: np.ndarray) -> np.ndarray:
    """Changes per unit of time of each page (NaN where ``n`` is 0: no observation).

    ``interval``: the page's mean time between visits (floored at a tiny positive
    value, so two visits at once do not make an infinite rate)."""
    cg = _CORE.compute({"n": np.asarray(n), "X": np.asarray(X)}, 0, needed=("CG",))["CG"]
    rate = cg / np.maximum(np.asarray(interval, dtype=np.float64), 1e-9)
    return np.where(np.asarray(n) > 0, rate, np.nan)


def unchanged_probability(rate: np.ndarray, age: np.ndarray) -> np.ndarray:
    """``exp(-rate * age)``: the chance a page of this rate, visited ``age`` ago, has
    not changed since (NaN where the rate is unknown)."""
    return np.exp(-np.asarray(rate, dtype=np.float64) * np.maximum(np.asarray(age), 0.0))


def expected_freshness(
    n: np.ndarray, X: np.ndarray, interval: np.ndarray, age: np.ndarray
) -> tuple[float, int]:
    """``(share, pages)``: the expected share of pages unchanged since their last visit,
    over the ``pages`` that have a rate (NaN and 0 when none has)."""
    p = unchanged_probability(change_rate(n, X, interval), age)
    known = ~np.isnan(p)
    count = int(np.count_nonzero(known))
    return (float(p[known].mean()) if count else float("nan")), count
