"""Terminals: the per-URL numbers a scorer may use, as numpy arrays over all URLs.

The history store (and the offline simulator, which keeps the same columns)
hands over the O(1) estimator state of :mod:`scrapy_recrawl.history.state`
plus the last visit's cycle, time and change magnitudes. This module turns
that state into the terminals of GP4C (Santos et al. 2013, 2015) and a few
extras, :data:`CORE_TERMINALS`: one :class:`Terminal` each (name, doc line,
formula), used by the live scheduler and the simulator alike through the
terminal registry (:mod:`scrapy_recrawl.scoring.registry`, whose
``compute_terminals`` computes them). The list with what each means is the
docs' table (docs/scorers.md, ``python -m scrapy_recrawl.plugin_terminals``).

Plug-ins add terminals of their own (:mod:`scrapy_recrawl.plugin_terminals` registers
them):
``due`` (loop-time baskets, paper 001: :mod:`scrapy_recrawl.estimate.plugin`),
``D1..D5``, ``C1..C5`` and ``Q`` (content-aware prediction, paper 004:
:mod:`scrapy_recrawl.content.plugin`). They read columns the plug-in adds
before a cycle is scored; without them they are NaN, which ranks last.

Every rate is 0 when ``n = 0`` (nothing observed yet).

**The prior.** The paper-exact rates are 0 for a page that has not been seen
changing, so ``1 - exp(-rate * t)`` stays 0 for ever and the page is never
revisited. The ``...p`` terminals add pseudo-counts ``prior = (a, b)``: a
prior of ``a`` changes in ``b`` observations (Beta(a, b - a) on the per-visit
change probability). For NAD this is ``NADp = (X + a) / (n + b)``. The
weighted estimators (SAD, AAD, GAD) are weighted means of the indicators; their
Bayesian counterpart weighs the estimate by its *effective* number of
observations ``m = (sum w_i)^2 / sum w_i^2`` (Kish), so that
``EST_p = (m * EST + a) / (m + b)``:

* NAD ``m = n`` (gives back ``(X + a)/(n + b)``),
* SAD ``m = min(n, 1)``,
* AAD ``m = 3 n (n + 1) / (2 (2n + 1))`` (about ``3n/4``),
* GAD ``m = 3 (2^n - 1)/(2^n + 1) = 3 tanh(n ln2 / 2)`` (tends to 3).

``CGp = -log(1 - NADp)``: CG is ``-log(1 - p)`` of a per-visit change
probability ``p = X/(n + 0.5)``; with the prior ``p = NADp`` (finite because
``a < b``). All these are O(1) per URL.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from scrapy_recrawl.settings import RecrawlSettingError, get


@dataclass(frozen=True)
class Terminal:
    """One terminal: the symbol a scorer uses, and how its value is computed.

    ``compute(state, cycle, now, a, b, get)`` returns a float64 array over URLs
    from the per-URL ``state`` columns (``get(name)`` gives another terminal,
    computed once per call; ``(a, b)`` is the prior). A plug-in's terminal reads
    the columns its :class:`~scrapy_recrawl.core.plugins.ColumnProvider` adds and
    should give NaN (ranks last) where they are absent, as in the offline replay.
    The terminal registry (:mod:`scrapy_recrawl.scoring.registry`) holds them.
    """

    name: str
    #: one line for the docs' table (markdown)
    doc: str
    compute: Callable[..., np.ndarray]
    #: needs the wall clock (``hours``, ``due``): computed only when ``now`` is given,
    #: never replayed by the GP
    needs_now: bool = False
    #: depends on RECRAWL_PRIOR (the ``...p`` terminals)
    uses_prior: bool = False
    #: needs the cycle's recrawl budget (the state's :data:`BUDGET` entry, which the
    #: cycle core gives): computed only when it is there (scoring/policies.py)
    needs_budget: bool = False
    #: the plug-in (as listed in the settings) that adds the columns it reads; None:
    #: the history store. Set when the plug-in's terminals are registered
    #: (:meth:`~scrapy_recrawl.scoring.registry.TerminalRegistry.register_plugin`).
    provider: str | None = None


#: The state entry (a 0-d array: pages per cycle) by which the cycle core hands a
#: cycle's recrawl budget to the terminals that need it (core/selection.py: with_budget).
BUDGET = "recrawl_budget"


def optional_column(name: str) -> Callable[..., np.ndarray]:
    """A terminal that is the column ``name`` as it is, NaN (ranks last) where absent."""

    def compute(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
        if name in state:
            return np.asarray(state[name], dtype=np.float64)
        return np.full(np.shape(state["n"]), np.nan)

    return compute


#: Pseudo-counts ``(a, b)`` used when RECRAWL_PRIOR is None: ``a`` changes in
#: ``b`` observations. Chosen from ``bench/replay_presets.py --grid`` on the
#: shared change histories (docs/scorers.md, docs/benchmarks.md).
DEFAULT_PRIOR: tuple[float, float] = (0.5, 100.0)

_LN2_HALF = math.log(2.0) / 2.0


def check_prior(prior: object, setting: str = "RECRAWL_PRIOR") -> tuple[float, float]:
    """Validate a prior ``(a, b)``; returns it as floats or raises ValueError.

    ``0 <= a < b``: ``a`` pseudo-changes in ``b`` pseudo-observations (a
    prior mean change probability ``a/b`` below 1 keeps ``CGp`` finite).
    """
    ok = isinstance(prior, (tuple, list)) and len(prior) == 2
    if ok:
        try:
            a, b = float(prior[0]), float(prior[1])  # type: ignore[index]
        except (TypeError, ValueError):
            ok = False
        else:
            ok = (
                not isinstance(prior[0], bool)  # type: ignore[index]
                and not isinstance(prior[1], bool)  # type: ignore[index]
                and math.isfinite(a)
                and math.isfinite(b)
                and 0.0 <= a < b
            )
    if not ok:
        raise RecrawlSettingError(
            f"{setting}={prior!r}: expected a pair (a, b) of numbers with 0 <= a < b "
            "(a pseudo-changes in b pseudo-observations), or None for the default "
            f"{DEFAULT_PRIOR}"
        )
    return a, b


def prior_from_settings(settings: object) -> tuple[float, float] | None:
    """RECRAWL_PRIOR, checked; None: the default prior."""
    prior = get(settings, "RECRAWL_PRIOR")  # -s RECRAWL_PRIOR=0.5,1 is a list here
    return None if prior is None else check_prior(prior)


def _float(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num/den, 0 where den == 0 (no observation yet)."""
    zero = np.asarray(den) == 0
    # a plain divide, then zeros: ~20% faster than divide(where=), same numbers
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.divide(num, den, dtype=np.float64)
    if zero.any():
        np.copyto(out, 0.0, where=zero)
    return out


def effective_observations(estimator: str, n: np.ndarray) -> np.ndarray:
    """Kish effective sample size ``(sum w)^2 / sum w^2`` of an estimator's weights."""
    nf = _float(n)
    if estimator == "NAD":
        return nf.copy()
    if estimator == "SAD":
        return np.minimum(nf, 1.0)
    if estimator == "AAD":
        return 3.0 * nf * (nf + 1.0) / (2.0 * (2.0 * nf + 1.0))
    if estimator == "GAD":
        # 3 (2^n - 1)/(2^n + 1) without forming 2^n
        return 3.0 * np.tanh(nf * _LN2_HALF)
    raise ValueError(f"no effective sample size for {estimator!r}")


_Getter = Callable[[str], np.ndarray]


def _t(state: Mapping[str, np.ndarray], cycle: int, *_: object) -> np.ndarray:
    return np.subtract(float(cycle), state["last_visit_cycle"], dtype=np.float64)


def _hours(
    state: Mapping[str, np.ndarray], cycle: int, now: float | None, *_: object
) -> np.ndarray:
    if now is None:
        raise ValueError("the 'hours' terminal needs the current time (now=...)")
    out = np.subtract(float(now), state["last_visit_time"], dtype=np.float64)
    out /= 3600.0
    # a wall clock that went back puts visits "in the future": no negative age (log(1 +
    # hours) would be NaN for every URL); the cycle says so (core/cycle.py: clock_behind)
    return np.maximum(out, 0.0, out=out)


def _cg(_s: object, _c: int, _now: object, _a: float, _b: float, get: _Getter) -> np.ndarray:
    # -log((n - X + 0.5)/(n + 0.5)) = -log1p(-X/(n + 0.5)); 0 when n = 0
    out = get("n") + 0.5
    np.divide(get("X"), out, out=out)
    np.negative(out, out=out)
    np.log1p(out, out=out)
    return np.negative(out, out=out)


def _nad(_s: object, _c: int, _now: object, _a: float, _b: float, get: _Getter) -> np.ndarray:
    return _ratio(get("X"), get("n"))


def _sad(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    return _float(state["sad"])


def _aad(
    state: Mapping[str, np.ndarray], _c: int, _now: object, _a: float, _b: float, get: _Getter
) -> np.ndarray:
    n = get("n")
    den = n + 1.0
    den *= n
    den *= 0.5  # sum(i) = n(n + 1)/2
    return _ratio(state["aad_sum"], den)


def _gad(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    return _float(state["gad"])


def _nadp(_s: object, _c: int, _now: object, a: float, b: float, get: _Getter) -> np.ndarray:
    return (get("X") + a) / (get("n") + b)


def _cgp(_s: object, _c: int, _now: object, _a: float, _b: float, get: _Getter) -> np.ndarray:
    out = np.negative(get("NADp"))
    np.log1p(out, out=out)
    return np.negative(out, out=out)


def _shrunk(estimator: str) -> Callable[..., np.ndarray]:
    def make(
        state: Mapping[str, np.ndarray], _c: int, _now: object, a: float, b: float, get: _Getter
    ) -> np.ndarray:
        m = effective_observations(estimator, get("n"))
        out = m * get(estimator)
        out += a
        m += b
        out /= m
        return out

    return make


#: The terminals every store gives, in the order docs and messages list them.
CORE_TERMINALS: tuple[Terminal, ...] = (
    Terminal("n", "change observations: visits after the first", lambda st, *_: _float(st["n"])),
    Terminal("X", "changes seen in those `n` observations", lambda st, *_: _float(st["X"])),
    Terminal("t", "cycles since the last visit", _t),
    Terminal(
        "hours",
        "hours since the last visit (for irregular cycles; never negative)",
        _hours,
        needs_now=True,
    ),
    Terminal("CG", "`-log((n - X + 0.5)/(n + 0.5))` (Cho & Garcia-Molina 2003)", _cg),
    Terminal("NAD", "`X/n`: every observation weighs `1/n` (Tan & Mitra 2010)", _nad),
    Terminal("SAD", "the last change indicator `I_n`", _sad),
    Terminal("AAD", "`sum(i*I_i)/sum(i)`: weights grow with `i`", _aad),
    Terminal(
        "GAD",
        "`sum(2^(i-1)*I_i)/sum(2^(i-1))`: weights double (kept by a stable recursion, never `2^n`)",
        _gad,
    ),
    Terminal("CGp", "`-log(1 - NADp)`: CG with the prior", _cgp, uses_prior=True),
    Terminal("NADp", "`(X + a)/(n + b)`: NAD with the prior", _nadp, uses_prior=True),
    Terminal("SADp", "SAD with the prior", _shrunk("SAD"), uses_prior=True),
    Terminal("AADp", "AAD with the prior", _shrunk("AAD"), uses_prior=True),
    Terminal("GADp", "GAD with the prior", _shrunk("GAD"), uses_prior=True),
    Terminal(
        "D",
        "simhash distance of the last visit's change (NaN if not recorded)",
        optional_column("D"),
    ),
    Terminal("A", "elements added at the last visit (NaN if not recorded)", optional_column("A")),
    Terminal("R", "elements removed at the last visit (NaN if not recorded)", optional_column("R")),
    Terminal(
        "M", "elements modified at the last visit (NaN if not recorded)", optional_column("M")
    ),
)
