"""Pooled priors: a URL with few observations borrows its group's change rate
(empirical Bayes), instead of only the global constant RECRAWL_PRIOR.

A *group* is a per-URL int column ``group`` (:mod:`scrapy_recrawl.core.groups`:
the host in a crawl, the directory of a page name in a replayed history); without
it every URL is in one group. For each URL ``i`` of group ``g``:

* **the prior mean** ``Gm_i``: the mean of the *other* URLs' rates in its group,
  each URL's rate its ``NADp = (X + a)/(n + b)`` (RECRAWL_PRIOR ``(a, b)``),
  shrunk towards the mean over all URLs ``M`` as if ``10`` more URLs of rate
  ``M`` were in the group: ``(sum_g NADp - NADp_i + 10 M) / (K_g - 1 + 10)``
  (``K_g`` URLs in the group). A small group says little, a group of one says
  nothing, and a URL never counts as its own prior (leave one out). Each URL
  weighs one, not its number of observations: a crawl observes the pages it
  finds changing most often, and an observation-weighted mean (``X_g/n_g``)
  is theirs, far above the typical page's (measured: bench/replay_pooled.py,
  docs/scorers.md);
* **the prior strength** ``b_g``, by the method of moments of a beta-binomial:
  with ``p_i = X_i/n_i`` and the group's rate ``m = X_g/n_g``, the sum
  ``V = sum_i n_i (p_i - m)^2`` has expectation ``m(1-m) (K + rho (n_g - K))``
  (``K``: URLs with an observation, ``rho = 1/(alpha + beta + 1)`` the
  intra-class correlation), so ``rho = (V/(m(1-m)) - K)/(n_g - K)`` and
  ``b_g = 1/rho - 1``. A group's ``rho`` is trusted in proportion
  ``K/(K + 10)`` and blended with the one of all groups together; it is kept in
  ``[1/(1 + 1000), 1/2]`` (``1 <= b_g <= 1000``); with no group able to tell
  (every URL observed at most once, or no group's rate strictly between 0 and 1)
  ``b_g`` is RECRAWL_PRIOR's ``b``.

The terminals are the core's smoothed estimators with that prior: ``NADh =
(X + b_g Gm)/(n + b_g)``, ``AADh = (m AAD + b_g Gm)/(m + b_g)`` (``m`` the
AAD's effective observations, as ``AADp``), ``CGh = -log(1 - NADh)``. All
O(N): a few ``np.bincount`` over the URLs scored. The sums run over the URLs
the cycle scores (not gone, not backed off, not in the monitoring sample).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .terminals import Terminal, effective_observations

#: the column holding each URL's group code (its one definition: core/groups.py fills it)
GROUP = "group"
#: pseudo-URLs of the global mean in each group's mean; a group's own ``rho`` weighs
#: ``K/(K + GROUP_URLS)`` against all groups' one
GROUP_URLS = 10.0
#: the strength ``b_g`` is kept in [B_MIN, B_MAX] pseudo-observations
B_MIN, B_MAX = 1.0, 1000.0

_Getter = Callable[[str], np.ndarray]


def _codes(state: Mapping[str, np.ndarray], size: int) -> tuple[np.ndarray, int]:
    """Dense non-negative group codes and their count (one group if no column)."""
    if GROUP not in state:
        return np.zeros(size, dtype=np.intp), 1
    group = np.asarray(state[GROUP])
    if size == 0:
        return group.astype(np.intp), 1
    lo, hi = int(group.min()), int(group.max())
    if lo >= 0 and hi < 4 * size + 16:
        return group.astype(np.intp, copy=False), hi + 1
    # codes not dense (a column of one's own): compacted, O(N log N)
    uniq, inv = np.unique(group, return_inverse=True)
    return inv.astype(np.intp), int(uniq.size)


def prior_mean(
    X: np.ndarray, n: np.ndarray, group: np.ndarray, groups: int, a: float, b: float
) -> np.ndarray:
    """``Gm`` per URL: the mean of the other URLs' smoothed rates in its group, shrunk to
    the mean over all URLs (the module docstring); ``group`` holds codes ``0 .. groups - 1``."""
    rate = np.asarray(X, dtype=np.float64) + a
    rate /= np.asarray(n, dtype=np.float64) + b  # NADp: each URL's own smoothed rate
    total = np.bincount(group, weights=rate, minlength=groups)
    urls = np.bincount(group, minlength=groups).astype(np.float64)
    mean = total[group] - rate
    mean += GROUP_URLS * float(rate.mean()) if rate.size else 0.0
    mean /= urls[group] - 1.0 + GROUP_URLS
    return mean


def prior_strength(
    X: np.ndarray, n: np.ndarray, group: np.ndarray, groups: int, b: float
) -> np.ndarray:
    """``b_g`` per URL: its group's method-of-moments strength (the module docstring);
    ``b`` (RECRAWL_PRIOR's) when no group tells the spread."""
    X = np.asarray(X, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    seen = n > 0
    xg = np.bincount(group, weights=X, minlength=groups)
    ng = np.bincount(group, weights=n, minlength=groups)
    k = np.bincount(group, weights=seen, minlength=groups)
    # sum_i (X_i - n_i m)^2 / n_i = sum_i X_i^2/n_i - m X_g (with m = X_g/n_g): one
    # pass over the URLs for the squares, the rest per group
    sq = np.square(X)
    np.divide(sq, n, out=sq, where=seen)
    sq[~seen] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(ng > 0, xg / ng, 0.0)
    v = np.bincount(group, weights=sq, minlength=groups) - m * xg
    mm = m * (1.0 - m)
    e0 = mm * k
    e1 = mm * (ng - k)
    total = e1.sum()
    if total <= 0:
        return np.full(n.shape, float(b))
    rho_all = (v.sum() - e0.sum()) / total
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(e1 > 0, (v - e0) / e1, rho_all)
    w = k / (k + GROUP_URLS)
    rho = w * rho + (1.0 - w) * rho_all
    np.clip(rho, 1.0 / (1.0 + B_MAX), 1.0 / (1.0 + B_MIN), out=rho)
    strength = 1.0 / rho
    strength -= 1.0
    return strength[group]


def _gm(
    state: Mapping[str, np.ndarray], _c: int, _now: object, a: float, b: float, get: _Getter
) -> np.ndarray:
    n = get("n")
    return prior_mean(get("X"), n, *_codes(state, n.size), a, b)


def _gb(
    state: Mapping[str, np.ndarray], _c: int, _now: object, _a: float, b: float, get: _Getter
) -> np.ndarray:
    n = get("n")
    return prior_strength(get("X"), n, *_codes(state, n.size), b)


def _nadh(_s: object, _c: int, _now: object, _a: float, _b: float, get: _Getter) -> np.ndarray:
    strength = get("Gb")
    out = get("Gm") * strength
    out += get("X")
    out /= get("n") + strength
    return out


def _aadh(_s: object, _c: int, _now: object, _a: float, _b: float, get: _Getter) -> np.ndarray:
    strength = get("Gb")
    m = effective_observations("AAD", get("n"))
    out = m * get("AAD")
    out += get("Gm") * strength
    m += strength
    out /= m
    return out


def _cgh(_s: object, _c: int, _now: object, _a: float, _b: float, get: _Getter) -> np.ndarray:
    out = np.negative(get("NADh"))
    np.log1p(out, out=out)
    return np.negative(out, out=out)


#: The pooled-prior terminals (registered with the core's: scoring/registry.py).
POOLED_TERMINALS: tuple[Terminal, ...] = (
    Terminal(
        "Gm",
        "mean `NADp` of the other URLs of the URL's group (its host, or a page name's "
        "directory), shrunk to all URLs' mean",
        _gm,
        uses_prior=True,
    ),
    Terminal(
        "Gb",
        "the strength (pseudo-observations) of the group's prior, by the method of moments",
        _gb,
        uses_prior=True,
    ),
    Terminal("NADh", "`(X + Gb*Gm)/(n + Gb)`: NAD with the group's prior", _nadh, uses_prior=True),
    Terminal("AADh", "AAD with the group's prior", _aadh, uses_prior=True),
    Terminal("CGh", "`-log(1 - NADh)`: CG with the group's prior", _cgh, uses_prior=True),
)

#: the names of the terminals that read the ``group`` column (directly or not)
POOLED_NAMES: frozenset[str] = frozenset(t.name for t in POOLED_TERMINALS)
