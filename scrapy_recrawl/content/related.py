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
with its *candidate window*, at most ``max_candidates``
(``RECRAWL_EXPERTS_CANDIDATES``, default 512) URLs, itself included: the URLs
of its group (the host, or the site folder of the shared histories; ``None``:
one group) are ordered by change rate (as float32), then id, and a URL's
window is the ``max_candidates`` consecutive URLs of that order centred on it
(shifted inwards at the ends of the group; the whole group when it is
smaller), so candidates have a similar change rate.
Build cost: ``P * max_candidates * max_lag * N`` multiply-adds; memory:
``k * 9 + 8`` bytes per URL (int32 id, float32 weight, uint8 lag per expert;
int32 group and float32 rate per URL), 188 bytes at ``k = 20``
(bench/content.py measures it at 100,000 URLs).

Correlations are computed in float64 and rounded to float32 before they are
compared, so the choice does not depend on how the pairs were batched: a
refresh, an extension and a build give the same lists for the same series.

**Incremental upkeep.**

* :meth:`RelatedIndex.refresh` recomputes the experts of some URLs only (those
  with new observations, a bounded number per cycle) against their window,
  leaving the others as they are; refreshing everyone with the series of the
  build gives back :meth:`RelatedIndex.build`.
* :meth:`RelatedIndex.extend` adds new URLs (rows appended at the end of the
  series) without rebuilding: each new URL gets its ``k`` experts from its
  window; each existing URL whose window now holds new URLs compares itself
  with those only and merges them into its list where they rank; an existing
  URL whose window lost one of its experts to the newcomers (windows have a
  fixed size) is recomputed against its new window. The result is exactly
  :meth:`build` on the grown series (same ids, weights, lags: tested), as long
  as the old rows' series are the ones their lists were computed from (what
  :meth:`refresh` keeps). Each URL keeps the rate it had when it entered the
  index as its place in the order; a rebuild re-sorts everyone.
  Cost per new URL: its own window (``max_candidates * max_lag * N``), the
  same again to merge it into the lists of the URLs whose window it enters
  (``max_candidates`` of them, up to 1.5 times that at the ends of a group), plus a full recomputation of those of them
  that lost an expert to it (at most all of them; in bench/content.py
  ``grow``, a handful for 5,000 new URLs). So the same bound
  (``RECRAWL_EXPERTS_CANDIDATES``) caps the work per new URL; a sort of the
  index (``P log P``) is paid once per call. Memory: the new rows, one group's
  standardized series at a time.

**Q.** :meth:`RelatedIndex.q` is the experts' recent change evidence weighted
by correlation: ``Q_i = sum_j w_ij e_j(c - d_ij) / sum_j w_ij`` where
``e_j(c')`` is 1 if expert ``j`` was seen changed in cycle ``c'``, 0 if seen
unchanged, and its mean change rate when not observed then. ``Q = 0`` for a
URL without experts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..blas import one_blas_thread

__all__ = ["RelatedIndex", "cross_correlation", "best_lag_correlation", "standardize"]

DEFAULT_K = 20
DEFAULT_MAX_LAG = 3
DEFAULT_CANDIDATES = 512
_NO_ID = np.iinfo(np.int64).max  # sorts after every real id


def _standardize64(series: np.ndarray) -> np.ndarray:
    s = np.asarray(series, dtype=np.float64)
    if s.ndim == 1:
        s = s[None, :]
    n = s.shape[1]
    z = s - s.mean(axis=1, keepdims=True)
    scale = np.sqrt(n) * s.std(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, z / scale, 0.0)


def standardize(series: np.ndarray) -> np.ndarray:
    """Rows centred and divided by ``sqrt(N) * sd`` (constant rows: 0), float32.

    Then ``sum_i z_a[i] z_b[i - d]`` is the paper's ``xcorr_d``.
    """
    return _standardize64(series).astype(np.float32)


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


def _rates(series: np.ndarray) -> np.ndarray:
    """Each row's change rate, float32: the URL's place in its group's order."""
    return np.asarray(series, dtype=np.float64).mean(axis=1).astype(np.float32)


def _group_codes(groups: Sequence[object] | np.ndarray | None, p: int, codes: dict[str, int]):
    """int32 code per row for ``groups`` (labels compared as str), extending ``codes``."""
    if groups is None:
        codes.setdefault("", 0)
        return np.full(p, codes[""], dtype=np.int32)
    labels = np.asarray(groups).astype(str).reshape(-1)
    if labels.shape[0] != p:
        raise ValueError(f"groups has {labels.shape[0]} labels for {p} rows")
    out = np.empty(p, dtype=np.int32)
    uniq, inv = np.unique(labels, return_inverse=True)
    for i, label in enumerate(uniq.tolist()):
        code = codes.setdefault(label, len(codes))
        out[inv.reshape(-1) == i] = code
    return out


def _window_starts(size: int, m: int) -> np.ndarray:
    """Window start (position in the group's order) of each of ``size`` positions."""
    if size <= m:
        return np.zeros(size, dtype=np.int64)
    pos = np.arange(size, dtype=np.int64)
    return np.clip(pos - m // 2, 0, size - m)


@dataclass
class RelatedIndex:
    """Per URL row: its ``k`` experts (``ids`` -1 where none), ``weights`` and ``lags``."""

    ids: np.ndarray  # int32 [P, k], -1 = empty slot
    weights: np.ndarray  # float32 [P, k]
    lags: np.ndarray  # uint8 [P, k]
    block: np.ndarray  # int32 [P]: the row's group (candidates never cross groups)
    max_lag: int
    #: float32 [P]: each row's change rate when it entered the index (its place in the order)
    rate: np.ndarray | None = None
    max_candidates: int = DEFAULT_CANDIDATES
    #: group label -> code in ``block``
    group_codes: dict[str, int] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes the index takes: expert lists, group and rate per URL."""
        extra = 0 if self.rate is None else self.rate.nbytes
        return int(
            self.ids.nbytes + self.weights.nbytes + self.lags.nbytes + self.block.nbytes + extra
        )

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    # -- building -------------------------------------------------------------------

    @staticmethod
    def blocks(
        series: np.ndarray,
        groups: Sequence[object] | np.ndarray | None = None,
        max_candidates: int = DEFAULT_CANDIDATES,
    ) -> np.ndarray:
        """A partition of the rows into blocks of at most ``max_candidates``, by group, then
        change rate, then id (the candidate sets before windows; kept for callers)."""
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
        if max_candidates < 2:
            raise ValueError("max_candidates must be >= 2")
        p = s.shape[0]
        codes: dict[str, int] = {}
        index = cls(
            ids=np.full((p, k), -1, dtype=np.int32),
            weights=np.zeros((p, k), dtype=np.float32),
            lags=np.zeros((p, k), dtype=np.uint8),
            block=_group_codes(groups, p, codes),
            max_lag=max_lag,
            rate=_rates(s),
            max_candidates=int(max_candidates),
            group_codes=codes,
        )
        index.refresh(s, np.arange(p))
        return index

    # -- the candidate windows ---------------------------------------------------------

    def _ensure_rate(self, series: np.ndarray) -> None:
        if self.rate is None or len(self.rate) != len(self):  # built by hand (tests)
            self.rate = _rates(series[: len(self)])

    def _orders(self, groups: np.ndarray, upto: int | None = None) -> dict[int, np.ndarray]:
        """Rows of each group in ``groups`` (among the first ``upto`` rows), by rate then id.

        One sort of the whole index, so many small groups cost no more than one big one.
        """
        assert self.rate is not None
        p = len(self) if upto is None else upto
        rows = np.arange(p)
        order = np.lexsort((rows, self.rate[:p], self.block[:p]))
        sb = self.block[order]
        out = {}
        for g in np.asarray(groups).tolist():
            lo = int(np.searchsorted(sb, g, side="left"))
            hi = int(np.searchsorted(sb, g, side="right"))
            out[int(g)] = order[lo:hi]
        return out

    # -- computing lists --------------------------------------------------------------

    def _scores(
        self, zt: np.ndarray, zm: np.ndarray, targets: np.ndarray, members: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Best lagged correlation (float32, rounded from float64) and its lag, [T, M],
        of the standardized rows ``zt`` (ids ``targets``) and ``zm`` (ids ``members``)."""
        n = zt.shape[1]
        lags = min(self.max_lag, n - 1)
        # one product for every lag: column block d-1 holds the members delayed by d (laid
        # out [N, lags * M], C-contiguous: much faster than a transposed view in OpenBLAS)
        shifted = np.zeros((n, lags, len(members)), dtype=np.float64)
        zmt = zm.T
        for d in range(1, lags + 1):
            shifted[d:, d - 1, :] = zmt[: n - d]
        # c[a, j] = sum_i z_a[i] z_j[i - d]: member j leads target a by d
        c = (zt @ shifted.reshape(n, -1)).astype(np.float32)
        c = c.reshape(len(targets), lags, len(members))
        best = np.ascontiguousarray(c[:, 0])
        lag = np.ones(best.shape, dtype=np.uint8)
        for d in range(2, lags + 1):
            better = c[:, d - 1] > best  # ties keep the smaller lag
            np.copyto(best, c[:, d - 1], where=better)
            np.copyto(lag, np.uint8(d), where=better)
        best[targets[:, None] == members[None, :]] = -np.inf  # not its own expert
        return best, lag

    def _store_top(
        self,
        targets: np.ndarray,
        cand: np.ndarray,
        w: np.ndarray,
        lag: np.ndarray,
    ) -> None:
        """Keep the ``k`` best positive candidates per target: weight desc, then id asc."""
        k = self.ids.shape[1]
        key_id = np.where(w > 0, cand, _NO_ID)
        order = np.lexsort((key_id, -w), axis=-1)[:, :k]
        wt = np.take_along_axis(w, order, axis=1)
        ok = wt > 0
        m = order.shape[1]
        self.ids[targets] = -1
        self.weights[targets] = 0.0
        self.lags[targets] = 0
        self.ids[targets, :m] = np.where(ok, np.take_along_axis(cand, order, axis=1), -1)
        self.weights[targets, :m] = np.where(ok, wt, 0.0)
        self.lags[targets, :m] = np.where(ok, np.take_along_axis(lag, order, axis=1), 0)

    def _recompute(self, zg: np.ndarray, order: np.ndarray, pos: np.ndarray) -> None:
        """Recompute the rows at positions ``pos`` (sorted) of a group's ``order``
        (``zg``: the group's standardized series, in that order)."""
        size, m = len(order), self.max_candidates
        starts = _window_starts(size, m)
        width = min(size, m)
        step = max(1, m // 4)
        i = 0
        while i < len(pos):
            # a chunk of targets whose windows fit in one span of width + step positions
            j = int(np.searchsorted(starts[pos], starts[pos[i]] + step, side="left"))
            j = max(j, i + 1)
            chunk = pos[i:j]
            lo, hi = int(starts[chunk[0]]), int(starts[chunk[-1]]) + width
            members = order[lo:hi]
            targets = order[chunk]
            best, lag = self._scores(zg[chunk], zg[lo:hi], targets, members)
            col = np.arange(lo, hi)[None, :]
            s = starts[chunk][:, None]
            best[(col < s) | (col >= s + width)] = -np.inf  # outside the target's window
            cand = np.broadcast_to(members[None, :].astype(np.int64), best.shape)
            self._store_top(targets, cand, best, lag)
            i = j

    def refresh(self, series: np.ndarray, rows: np.ndarray | Sequence[int]) -> None:
        """Recompute the experts of ``rows`` against their window (the series may have grown)."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        s = np.asarray(series)
        self._ensure_rate(s)
        where = np.zeros(len(self), dtype=bool)
        where[rows] = True
        with one_blas_thread():
            for order in self._orders(np.unique(self.block[rows])).values():
                # standardized per group (row by row: the same numbers as all at once)
                self._recompute(_standardize64(s[order]), order, np.flatnonzero(where[order]))

    def extend(
        self,
        series: np.ndarray,
        groups: Sequence[object] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Add the rows of ``series`` beyond the index's (new URLs), without a rebuild.

        ``series[page, cycle]`` holds every row, old ones first; ``groups`` the
        labels of the new rows, or of every row (``None``: one group). Returns
        the old rows whose lists were merged with new rows or recomputed. Equal to :meth:`build` on ``series``
        when the old rows' series are those their lists were computed from.
        """
        s = np.asarray(series)
        old = len(self)
        p = s.shape[0]
        if s.ndim != 2 or p < old:
            raise ValueError("series must be [page, cycle] with the index's rows first")
        if p == old:
            return np.zeros(0, dtype=np.int64)
        self._ensure_rate(s)
        assert self.rate is not None
        if groups is not None and len(groups) == p:
            groups = np.asarray(groups)[old:]
        if groups is None and self.group_codes and "" not in self.group_codes:
            raise ValueError("the index was built with groups: give the new rows' groups")
        if not self.group_codes:  # built by hand: its codes are its groups
            self.group_codes = {str(int(c)): int(c) for c in np.unique(self.block)}
        m_new = p - old
        k = self.ids.shape[1]
        # each old row's position in its group's order, before the new rows come in
        pos_old = np.zeros(old, dtype=np.int64)
        for o in self._orders(np.unique(self.block), upto=old).values():
            pos_old[o] = np.arange(len(o))
        self.ids = np.concatenate([self.ids, np.full((m_new, k), -1, dtype=np.int32)])
        self.weights = np.concatenate([self.weights, np.zeros((m_new, k), dtype=np.float32)])
        self.lags = np.concatenate([self.lags, np.zeros((m_new, k), dtype=np.uint8)])
        self.block = np.concatenate([self.block, _group_codes(groups, m_new, self.group_codes)])
        self.rate = np.concatenate([self.rate, _rates(s[old:])])
        m = self.max_candidates
        touched: list[np.ndarray] = []
        with one_blas_thread():
            for order in self._orders(np.unique(self.block[old:])).values():
                # the group's new order, old and new rows (the old rows keep their relative order)
                size = len(order)
                is_new = order >= old
                old_order = order[~is_new]
                new_pos_of_old = np.flatnonzero(~is_new)  # old position -> new position
                g_old = len(old_order)
                w_old = min(g_old, m)
                w_new = min(size, m)
                s_old = _window_starts(g_old, m)
                s_new = _window_starts(size, m)[new_pos_of_old]  # per old row, new positions
                # old rows still in the new window: old positions [a, b)
                a = np.searchsorted(new_pos_of_old, s_new, side="left")
                b = np.searchsorted(new_pos_of_old, s_new + w_new, side="left")
                gained_old = (a < s_old) | (b > s_old + w_old)
                # did an expert drop out of the window?
                e = self.ids[old_order].astype(np.int64)
                ep = np.where(e >= 0, pos_old[np.maximum(e, 0)], 0)
                lost = ((e >= 0) & ((ep < a[:, None]) | (ep >= b[:, None]))).any(axis=1)
                redo = gained_old | lost
                # new rows in the new window of each old row
                new_cum = np.concatenate([[0], np.cumsum(is_new)])
                has_new = new_cum[s_new + w_new] - new_cum[s_new] > 0
                merge = has_new & ~redo
                redo_pos = np.sort(np.concatenate([new_pos_of_old[redo], np.flatnonzero(is_new)]))
                zg = _standardize64(s[order])
                self._recompute(zg, order, redo_pos)
                if merge.any():
                    self._merge(zg, order, new_pos_of_old[merge], s_new[merge], w_new, is_new)
                touched += [old_order[redo], old_order[merge]]
        return np.unique(np.concatenate(touched)) if touched else np.zeros(0, dtype=np.int64)

    def _merge(
        self,
        zg: np.ndarray,
        order: np.ndarray,
        pos: np.ndarray,
        starts: np.ndarray,
        width: int,
        is_new: np.ndarray,
    ) -> None:
        """Merge the group's new rows into the lists of the old rows at ``pos``."""
        new_pos = np.flatnonzero(is_new)
        chunk_rows = max(1, (1 << 22) // max(1, len(new_pos)))  # bound the [T, M] matrix
        for i in range(0, len(pos), chunk_rows):
            p = pos[i : i + chunk_rows]
            s = starts[i : i + chunk_rows][:, None]
            targets = order[p]
            newcomers = order[new_pos]
            best, lag = self._scores(zg[p], zg[new_pos], targets, newcomers)
            col = new_pos[None, :]
            best[(col < s) | (col >= s + width)] = -np.inf
            cand = np.concatenate(
                [
                    self.ids[targets].astype(np.int64),
                    np.broadcast_to(newcomers[None, :].astype(np.int64), best.shape),
                ],
                axis=1,
            )
            w = np.concatenate(
                [np.where(self.ids[targets] >= 0, self.weights[targets], -np.inf), best], axis=1
            ).astype(np.float32)
            lg = np.concatenate([self.lags[targets], lag], axis=1)
            self._store_top(targets, cand, w, lg)

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
