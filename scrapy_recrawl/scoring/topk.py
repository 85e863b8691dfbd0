"""Top-k of a score vector: the cycle's best URLs, fast, with ties broken the same way everywhere."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: URLs evaluated per block: the expression's temporaries stay in the CPU cache
#: (numexpr's trick, with plain numpy), about 2x faster than whole arrays at 1M.
CHUNK = 1 << 15


def _chunks(size: int) -> list[tuple[int, int]]:
    return [(s, min(s + CHUNK, size)) for s in range(0, size, CHUNK)]


def _length(terminals: Mapping[str, np.ndarray]) -> int:
    for v in terminals.values():
        return int(np.shape(v)[0])
    raise ValueError("no terminal arrays given: cannot tell how many URLs to score")


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first; NaN/inf rank last.

    One selection over all scores, then a sort of the ``k`` chosen only.
    Ties are broken arbitrarily but deterministically (same scores, same order).
    """
    s = np.asarray(scores, dtype=np.float64)
    size = s.shape[0]
    k = int(k)
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    # the common case first: no non-finite score near the top, no copy
    idx = _sampled_top(s, k, sanitized=False) if k < size else None
    if idx is None:
        bad = ~np.isfinite(s)
        if bad.any():
            s = s.copy()
            s[bad] = -np.inf
        if k >= size:
            return np.argsort(-s)
        idx = _select_top(s, k)
    return idx[np.argsort(-s[idx])]


_SAMPLE = 1 << 14


def _select_top(s: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of ``s`` (finite or -inf; any order)."""
    idx = _sampled_top(s, k, sanitized=True)
    if idx is not None:
        return idx
    size = s.shape[0]
    return np.argpartition(s, size - k)[size - k :]


def _sampled_top(s: np.ndarray, k: int, sanitized: bool) -> np.ndarray | None:
    """Indices of the k largest values of ``s`` through a sampled pivot, or None.

    Scores of real crawls are full of ties (integer terminals; most pages at
    exactly 0), on which numpy's introselect is several times slower, up to
    20x when the k-th value is shared by most URLs. So: take a pivot from a
    strided sample, a little below the k-th value; the URLs above it are a
    small candidate set for ``argpartition``; when the pivot *is* the k-th
    value (a big tie block), take everything above it plus the first tied
    URLs by index (scanning only as far as needed). None if the sample misled
    (the caller does a full ``argpartition``), or, when ``s`` is not
    ``sanitized`` (NaN/inf not yet replaced by -inf), if a non-finite value
    could matter: in the sample or among the candidates. So this returns the
    same indices, in the same order, with or without sanitizing first.
    """
    size = s.shape[0]
    if size < 8 * _SAMPLE:
        return None
    sample = s[:: size // _SAMPLE]
    if not sanitized and not np.isfinite(sample).all():
        return None
    m = sample.shape[0]
    above_in_sample = min(m - 1, int(1.25 * k * m / size) + 16)
    j = m - 1 - above_in_sample
    sample = np.partition(sample, j)
    pivot = sample[j]
    above = np.flatnonzero(s > pivot)  # NaN never; +inf checked below
    n_above = above.shape[0]
    if k <= n_above <= max(4 * k, size // 4):
        values = s[above]
        if not sanitized and not np.isfinite(values).all():
            return None
        part = np.argpartition(values, n_above - k)[n_above - k :]
        return above[part]
    if n_above < k:
        if not sanitized and not np.isfinite(s[above]).all():
            return None
        # the sample's share of ties tells how far to scan for the first ones
        share = np.count_nonzero(sample == pivot) / m
        tied = _first_equal(s, pivot, k - n_above, share)
        if tied is not None:
            return np.concatenate((above, tied))
    return None


def _first_equal(s: np.ndarray, value: float, count: int, share: float) -> np.ndarray | None:
    """The ``count`` smallest indices where ``s == value`` (None if fewer)."""
    size = s.shape[0]
    span = size if share <= 0 else min(size, int(count / share * 1.1) + 4096)
    tied = np.flatnonzero(s[:span] == value)
    if tied.shape[0] < count and span < size:
        tied = np.concatenate((tied, np.flatnonzero(s[span:] == value) + span))
    if tied.shape[0] < count:
        return None
    return tied[:count]
