"""Terminals: the per-URL numbers a scorer may use, as numpy arrays over all URLs.

The history store (and the offline simulator, which keeps the same columns)
hands over the O(1) estimator state of :mod:`scrapy_recrawl.history.state`
plus the last visit's cycle, time and change magnitudes. This module turns
that state into the terminals of GP4C (Santos et al. 2013, 2015) and a few
extras, one definition each, used by the live scheduler and the simulator
alike:

=========  ================================================================
``n``      change observations (visits after the first)
``X``      changes seen in those ``n`` observations
``t``      cycles since the last visit
``hours``  hours since the last visit (for irregular cycles)
``CG``     ``-log((n - X + 0.5)/(n + 0.5))`` (Cho & Garcia-Molina 2003)
``NAD``    ``X / n``                       (Tan & Mitra 2010, w_i = 1/n)
``SAD``    the last indicator ``I_n``       (w_n = 1)
``AAD``    ``sum(i I_i) / sum(i)``          (w_i proportional to i)
``GAD``    ``sum(2^(i-1) I_i) / sum(2^(i-1))`` (w_i proportional to 2^(i-1))
``CGp`` …  the same estimators shrunk towards a prior (see below)
``D``      simhash distance of the last visit's change (NaN: not recorded)
``A``      elements added at the last visit (NaN: not recorded)
``R``      elements removed at the last visit (NaN: not recorded)
``M``      elements modified at the last visit (NaN: not recorded)
``due``    time since the last visit / the page's loop-time basket interval
``D1`` …   ``D5``: cosine distance of the last version to the one i visits back
``C1`` …   ``C5``: change indicator of the i-th most recent observation
``Q``      related pages' (experts') recent change evidence, correlation-weighted
=========  ================================================================

``D1..D5``, ``C1..C5`` and ``Q`` (content-aware prediction, paper 004;
:mod:`scrapy_recrawl.content`) read optional columns of the same names, which
the scheduler adds when the scorer uses them (``RECRAWL_WINDOW`` = l of them
are filled, the rest NaN) and the content replay
(:mod:`scrapy_recrawl.content.replay`) keeps; without them they are NaN, which
ranks last, like ``due``.

``due`` (loop-time baskets, paper 001; :mod:`scrapy_recrawl.estimate.baskets`)
reads the optional ``basket_seconds`` column, which the scheduler adds when
probing is on; without it (the offline simulator) ``due`` is NaN, which ranks
last.

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
from collections.abc import Callable, Iterable, Mapping

import numpy as np

#: Pseudo-counts ``(a, b)`` used when RECRAWL_PRIOR is None: ``a`` changes in
#: ``b`` observations. Chosen from ``bench/replay_presets.py --grid`` on the
#: shared change histories (docs/scorers.md, docs/benchmarks.md).
DEFAULT_PRIOR: tuple[float, float] = (0.5, 100.0)

#: Every terminal name, with what it means (docs and error messages use this).
TERMINALS: dict[str, str] = {
    "n": "change observations (visits after the first)",
    "X": "changes seen in those n observations",
    "t": "cycles since the last visit",
    "hours": "hours since the last visit",
    "CG": "Cho & Garcia-Molina rate -log((n - X + 0.5)/(n + 0.5))",
    "NAD": "X/n (Tan & Mitra, non-adaptive)",
    "SAD": "last change indicator (shortsighted adaptive)",
    "AAD": "sum(i I_i)/sum(i) (arithmetically adaptive)",
    "GAD": "sum(2^(i-1) I_i)/sum(2^(i-1)) (geometrically adaptive)",
    "CGp": "-log(1 - NADp): CG with the prior",
    "NADp": "(X + a)/(n + b): NAD with the prior",
    "SADp": "SAD with the prior",
    "AADp": "AAD with the prior",
    "GADp": "GAD with the prior",
    "D": "simhash distance at the last visit (NaN if not recorded)",
    "A": "elements added at the last visit (NaN if not recorded)",
    "R": "elements removed at the last visit (NaN if not recorded)",
    "M": "elements modified at the last visit (NaN if not recorded)",
    # Added for loop-time baskets (paper 001): needs the scheduler's basket_seconds column.
    "due": "time since the last visit / the page's basket interval (loop-time baskets)",
    # Added for content-aware prediction (paper 004, scrapy_recrawl/content/): optional
    # columns the scheduler adds when the scorer uses them; NaN where missing, like `due`.
    **{
        f"D{i}": f"cosine distance of the last version to the one {i} visit(s) back"
        for i in range(1, 6)
    },
    **{
        f"C{i}": f"change indicator of the observation {i} visit(s) back (1/0)" for i in range(1, 6)
    },
    "Q": "related pages' recent change evidence weighted by their cross-correlation",
}

TERMINAL_NAMES: frozenset[str] = frozenset(TERMINALS)

#: Terminals that depend on the prior.
PRIOR_TERMINALS: frozenset[str] = frozenset({"CGp", "NADp", "SADp", "AADp", "GADp"})

_LN2_HALF = math.log(2.0) / 2.0


def check_prior(prior: object, setting: str = "RECRAWL_PRIOR") -> tuple[float, float]:
    """Validate a prior ``(a, b)``; returns it as floats or raises ValueError.

    ``0 <= a < b``: ``a`` pseudo-changes in ``b`` pseudo-observations (a
    prior mean change probability ``a/b`` below 1 keeps ``CGp`` finite).
    """
    from scrapy_recrawl.settings import RecrawlSettingError

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


def compute_terminals(
    state: Mapping[str, np.ndarray],
    cycle: int,
    now: float | None = None,
    prior: tuple[float, float] | None = None,
    needed: Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """Terminals (float64 arrays over URLs) from the store's per-URL state.

    ``state`` has ``n``, ``X``, ``sad``, ``aad_sum``, ``gad`` (history/state.py),
    ``last_visit_cycle``, ``last_visit_time`` (unix seconds) and optionally
    ``D``, ``A``, ``R``, ``M``. ``cycle`` is the current cycle, ``now`` the
    current unix time (needed for ``hours`` only). ``prior`` is ``(a, b)``
    for the ``...p`` terminals (None: :data:`DEFAULT_PRIOR`). Only the
    terminals in ``needed`` are computed (None: all of them, except ``hours``
    when ``now`` is None).
    """
    if needed is None:
        want = TERMINAL_NAMES if now is not None else TERMINAL_NAMES - {"hours", "due"}
    else:
        want = frozenset(needed)
    unknown = want - TERMINAL_NAMES
    if unknown:
        raise ValueError(f"unknown terminal(s) {sorted(unknown)}; known: {', '.join(TERMINALS)}")
    a, b = DEFAULT_PRIOR if prior is None else check_prior(prior)
    cache: dict[str, np.ndarray] = {}

    def get(name: str) -> np.ndarray:
        if name not in cache:
            cache[name] = _MAKERS[name](state, cycle, now, a, b, get)
        return cache[name]

    return {name: get(name) for name in TERMINALS if name in want}


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
    return out


def _due(state: Mapping[str, np.ndarray], cycle: int, now: float | None, *_: object) -> np.ndarray:
    # Loop-time baskets (paper 001): overdue-ness relative to the page's basket interval.
    if now is None:
        raise ValueError("the 'due' terminal needs the current time (now=...)")
    if "basket_seconds" not in state:
        return np.full(np.shape(state["n"]), np.nan)
    out = np.subtract(float(now), state["last_visit_time"], dtype=np.float64)
    out /= state["basket_seconds"]
    return out


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


def _nadp(
    state: Mapping[str, np.ndarray], _c: int, _now: object, a: float, b: float, _g: _Getter
) -> np.ndarray:
    return (_float(state["X"]) + a) / (_float(state["n"]) + b)


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


def _magnitude(name: str) -> Callable[..., np.ndarray]:
    def make(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
        if name in state:
            return _float(state[name])
        return np.full(np.shape(state["n"]), np.nan)

    return make


_MAKERS: dict[str, Callable[..., np.ndarray]] = {
    "n": lambda state, *_: _float(state["n"]),
    "X": lambda state, *_: _float(state["X"]),
    "t": _t,
    "hours": _hours,
    "CG": _cg,
    "NAD": _nad,
    "SAD": _sad,
    "AAD": _aad,
    "GAD": _gad,
    "CGp": _cgp,
    "NADp": _nadp,
    "SADp": _shrunk("SAD"),
    "AADp": _shrunk("AAD"),
    "GADp": _shrunk("GAD"),
    "D": _magnitude("D"),
    "A": _magnitude("A"),
    "R": _magnitude("R"),
    "M": _magnitude("M"),
    "due": _due,
    # content-aware prediction (paper 004): plain optional columns, NaN when absent
    **{f"{p}{i}": _magnitude(f"{p}{i}") for p in "DC" for i in range(1, 6)},
    "Q": _magnitude("Q"),
}
assert set(_MAKERS) == TERMINAL_NAMES
