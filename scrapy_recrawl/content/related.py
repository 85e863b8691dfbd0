"""Related pages as experts: temporal cross-correlation of change series (paper 004, sec. 6.3).

**Cross-correlation.** For two change series ``a`` and ``b`` of length ``N``
and a delay ``d >= 1`` (``b`` leads ``a`` by ``d`` cycles)::

    xcorr_d(a, b) = sum_i (a[i] - E a) (b[i - d] - E b) / (N sd(a) sd(b))

as in the paper (means and standard deviations over the whole series, the
sum over the ``N - d`` overlapping points). The delay with the best
correlation is kept (``1 <= d <= max_lag``; ``d = 0`` is left out on purpose:
to predict the next cycle only changes already seen can vote). A constant
series has no correlation with anything (0).

**The index.** :class:`RelatedIndex` keeps, per URL, its ``k`` best experts
(``RECRAWL_EXPERTS``, default 20): ids, weights (their best correlation, only
positive ones are kept) and lags; ties go to the smaller id, so the choice is
deterministic. Comparing every pair is ``O(P^2)``: each URL is compared only
with the URLs of its *candidate block*, at most ``max_candidates``
(``RECRAWL_EXPERTS_CANDIDATES``, default 512) URLs: URLs are ordered by group
(the host, or the site folder of the shared histories; ``None``: one group),
then by change rate, then id, and each group is cut into consecutive blocks
of at most ``max_candidates`` (so candidates have a similar change rate).
Build cost: ``P * max_candidates * max_lag * N`` multiply-adds; memory:
``k * 9`` bytes per URL (int32 id, float32 weight, uint8 lag), 180 bytes at
``k = 20`` (bench/content.py measures it at 100,000 URLs).

**Incremental upkeep.** :meth:`RelatedIndex.refresh` recomputes the experts of
some URLs only (those with new observations, a bounded number per cycle)
against their block, leaving the others as they are; refreshing everyone
gives back :meth:`RelatedIndex.build`.

**Q.** :meth:`RelatedIndex.q` is the experts' recent change evidence weighted
by correlation: ``Q_i = sum_j w_ij e_j(c - d_ij) / sum_j w_ij`` where
``e_j(c')`` is 1 if expert ``j`` was seen changed in cycle ``c'``, 0 if seen
unchanged, and its mean change rate when not observed then. ``Q = 0`` for a
URL without experts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["RelatedIndex", "cross_correlation", "best_lag_correlation", "standardize"]

DEFAULT_K = 20
DEFAULT_MAX_LAG = 3
DEFAULT_CANDIDATES = 512


def standardize(series: np.ndarray) -> np.ndarray:
    """Rows centred and divided by ``sqrt(N) * sd`` (constant rows: 0), float32.

    Then ``sum_i z_a[i] z_b[i - d]`` is the paper's ``xcorr_d``.
    """
    s = np.asarray(series, dtype=np.float64)
    if s.ndim == 1:
        s = s[None, :]
    n = s.shape[1]
    z = s - s.mean(axis=1, keepdims=True)
    scale = np.sqrt(n) * s.std(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(scale > 0, z / scale, 0.0)
    return z.astype(np.float32)


def cross_correlation(a: Sequence[float], b: Sequence[float], d: int) -> float:
    """The paper's ``xcorr_d(a, b)``: ``b`` leading ``a`` by ``d`` (``0 <= d < N``)."""
    za, zb = standardize(np.asarray(a, float))[0], standardize(np.asarray(b, float))[0]
    n = za.shape[0]
    if not 0 <= d < n:
        raise ValueError(f"lag {d} out of range for series of length {n}")
    return float(np.dot(za[d:].astype(np.float64), zb[: n - d].astype(np.float64)))


def best_lag_correlation(a: Sequence[float], b: Sequence[float], max_lag: int) -> tuple[float, int]:
    """``(best xcorr_d, d)`` over ``d = 1 .. max_lag`` (the smallest d on ties)."""
    vals = [cross_correlation(a, b, d) for d in range(1, max_lag + 1)]
    d = int(np.argmax(vals))
    return vals[d], d + 1


@dataclass
class RelatedIndex:
    """Per URL row: its ``k`` experts (``ids`` -1 where none), ``weights`` and ``lags``."""

    ids: np.ndarray  # int32 [P, k], -1 = empty slot
    weights: np.ndarray  # float32 [P, k]
    lags: np.ndarray  # uint8 [P, k]
    block: np.ndarray  # int32 [P]: candidate block of each row
    max_lag: int

    @property
    def nbytes(self) -> int:
        """Bytes the expert lists take (the per-URL state; ``block`` is 4 bytes more)."""
        return int(self.ids.nbytes + self.weights.nbytes + self.lags.nbytes + self.block.nbytes)

    # -- building -------------------------------------------------------------------

    @staticmethod
    def blocks(
        series: np.ndarray,
        groups: Sequence[object] | np.ndarray | None = None,
        max_candidates: int = DEFAULT_CANDIDATES,
    ) -> np.ndarray:
        """Candidate block of every row: by group, then change rate, then id, cut every
        ``max_candidates`` rows."""
        p = series.shape[0]
        if max_candidates < 2:
            raise ValueError("max_candidates must be >= 2")
        rate = np.asarray(series, dtype=np.float64).mean(axis=1)
        if groups is None:
            gkey = np.zeros(p, dtype=np.int64)
        else:
            _, gkey = np.unique(np.asarray(groups).astype(str), return_inverse=True)
            gkey = gkey.reshape(-1)
        order = np.lexsort((np.arange(p), rate, gkey))
        block = np.empty(p, dtype=np.int32)
        start, b = 0, 0
        sorted_g = gkey[order]
        while start < p:
            g = sorted_g[start]
            end = int(np.searchsorted(sorted_g, g, side="right"))
            for s in range(start, end, max_candidates):
                block[order[s : min(end, s + max_candidates)]] = b
                b += 1
            start = end
        return block

    @classmethod
    def build(
        cls,
        series: np.ndarray,
        *,
        k: int = DEFAULT_K,
        max_lag: int = DEFAULT_MAX_LAG,
        groups: Sequence[object] | np.ndarray | None = None,
        max_candidates: int = DEFAULT_CANDIDATES,
    ) -> RelatedIndex:
        """The experts of every row of ``series[page, cycle]`` (0/1 or any numbers)."""
        s = np.asarray(series)
        if s.ndim != 2:
            raise ValueError("series must be [page, cycle]")
        if not 1 <= max_lag < max(2, s.shape[1]):
            raise ValueError(f"max_lag={max_lag}: expected 1 .. series length - 1")
        p = s.shape[0]
        index = cls(
            ids=np.full((p, k), -1, dtype=np.int32),
            weights=np.zeros((p, k), dtype=np.float32),
            lags=np.zeros((p, k), dtype=np.uint8),
            block=cls.blocks(s, groups, max_candidates),
            max_lag=max_lag,
        )
        index.refresh(s, np.arange(p))
        return index

    def refresh(self, series: np.ndarray, rows: np.ndarray | Sequence[int]) -> None:
        """Recompute the experts of ``rows`` against their block (the series may have grown)."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        z = standardize(series)
        n = z.shape[1]
        k = self.ids.shape[1]
        for b in np.unique(self.block[rows]):
            members = np.flatnonzero(self.block == b)
            targets = rows[self.block[rows] == b]
            zt, zm = z[targets], z[members]
            best = np.full((len(targets), len(members)), -np.inf, dtype=np.float32)
            lag = np.zeros_like(best, dtype=np.uint8)
            for d in range(1, min(self.max_lag, n - 1) + 1):
                # c[a, j] = sum_i z_a[i] z_j[i - d]: member j leads target a by d
                c = zt[:, d:] @ zm[:, : n - d].T
                better = c > best
                best[better] = c[better]
                lag[better] = d
            best[targets[:, None] == members[None, :]] = -np.inf  # not its own expert
            # weight desc, ties by id asc: members are ascending and the sort is stable
            top = np.argsort(-best, axis=1, kind="stable")[:, :k]
            w = np.take_along_axis(best, top, axis=1)
            ok = w > 0
            m = top.shape[1]
            self.ids[targets] = -1
            self.weights[targets] = 0.0
            self.lags[targets] = 0
            self.ids[targets, :m] = np.where(ok, members[top], -1)
            self.weights[targets, :m] = np.where(ok, w, 0.0)
            self.lags[targets, :m] = np.where(ok, np.take_along_axis(lag, top, axis=1), 0)

    # -- using ----------------------------------------------------------------------

    def q(self, observed: np.ndarray, rate: np.ndarray | None = None) -> np.ndarray:
        """``Q`` of every row at the cycle after the last column of ``observed``.

        ``observed[page, cycle]``: 1 changed, 0 unchanged, NaN not observed (the
        last column is the latest cycle). ``rate`` (per page) fills NaN; default
        each page's mean over its observed cycles (0 if none).
        """
        obs = np.asarray(observed, dtype=np.float64)
        p, n = obs.shape
        if rate is None:
            seen = ~np.isnan(obs)
            rate = np.nansum(obs, axis=1) / np.maximum(seen.sum(axis=1), 1)
        has = self.ids >= 0
        ids = np.where(has, self.ids, 0)
        col = n - self.lags.astype(np.int64)  # lag d: the expert's cycle c - d, c = n
        col = np.clip(col, 0, n - 1)
        ev = obs[ids, col]
        ev = np.where(np.isnan(ev), rate[ids], ev)
        w = np.where(has, self.weights.astype(np.float64), 0.0)
        den = w.sum(axis=1)
        num = (w * ev).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / den, 0.0)
