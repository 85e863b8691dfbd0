"""Change-rate buckets: one byte per URL (Edwards et al. 2001, sec. 4).

Every known URL gets an estimated change rate ``lambda`` (changes per
cycle) from its history columns, and the rate axis is cut into at most 256
log-spaced buckets, so the bucket fits in a ``uint8``.

The estimate, per URL, from ``n`` (change observations), ``X`` (changes seen)
and the visit spacing:

* per-visit change probability ``p = (X + a) / (n + b)``, shrunk towards the
  prior ``(a, b)`` (``RECRAWL_PRIOR``, the same pseudo-counts the ``...p``
  scorers use, so a page never seen changing still has a small rate);
* mean visit spacing ``s = (last_visit_cycle - first_cycle) / n`` cycles when
  the columns have ``first_cycle``, else 1 cycle;
* under a Poisson change process a visit ``s`` cycles after the previous one
  finds a change with probability ``1 - exp(-lambda s)``, hence
  ``lambda = -log(1 - p) / s`` (Cho & Garcia-Molina's estimator, with the prior).

That is the scorers' ``lam`` terminal (scoring/policies.py), and
:func:`change_rates` computes it through the terminal registry: one formula.

Bucket ``j`` holds rates in ``[edges[j], edges[j + 1])``; the edges are
``B + 1`` points log-spaced between the smallest and the largest rate (or
given, to keep assignments stable from one cycle to the next). A bucket's
rate is the mean of its URLs' rates (the geometric middle of its edges when
it is empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MAX_BUCKETS",
    "BucketAssignment",
    "BucketStats",
    "assign_buckets",
    "bucket_stats",
    "change_rates",
    "select_by_quotas",
]

#: One byte per page: at most 256 buckets.
MAX_BUCKETS = 256


@dataclass(frozen=True)
class BucketAssignment:
    """The bucket of every URL (``uint8``), the edges and each bucket's rate."""

    bucket: np.ndarray  # uint8 [urls]
    edges: np.ndarray  # float [B + 1], changes per cycle
    rate: np.ndarray  # float [B], changes per cycle
    url_rate: np.ndarray  # float [urls], changes per cycle

    @property
    def n_buckets(self) -> int:
        return int(self.rate.shape[0])

    def sizes(self, mask: np.ndarray | None = None) -> np.ndarray:
        """URLs per bucket (only those where ``mask`` is true, if given)."""
        b = self.bucket if mask is None else self.bucket[mask]
        return np.bincount(b, minlength=self.n_buckets).astype(np.int64)


def _check_n_buckets(n_buckets: int) -> int:
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, (int, np.integer)):
        raise ValueError(f"n_buckets={n_buckets!r}: expected a whole number from 1 to 256")
    if not 1 <= n_buckets <= MAX_BUCKETS:
        raise ValueError(
            f"n_buckets={n_buckets}: expected 1 to {MAX_BUCKETS} "
            "(the bucket is stored in one byte per URL)"
        )
    return int(n_buckets)


def change_rates(
    columns: Mapping[str, np.ndarray],
    cycle: int,
    *,
    prior: tuple[float, float] | None = None,
) -> np.ndarray:
    """Estimated changes per cycle of every URL (see the module docstring).

    ``columns`` are the store's columns (``n``, ``X``, ``last_visit_cycle``
    and, when present, ``first_cycle``); ``cycle`` is the current cycle.

    The one definition is the scorers' ``lam`` terminal (scoring/policies.py:
    ``CGp / s``), computed here by the terminal registry; without ``first_cycle``
    the spacing is one cycle, i.e. ``CGp`` itself (``lam`` would be NaN there).
    """
    from scrapy_recrawl.scoring import compute_terminals

    name = "lam" if "first_cycle" in columns else "CGp"
    return compute_terminals(columns, cycle, prior=prior, needed=(name,))[name]


def assign_buckets(
    columns: Mapping[str, np.ndarray],
    cycle: int,
    n_buckets: int = 64,
    *,
    prior: tuple[float, float] | None = None,
    edges: np.ndarray | None = None,
) -> BucketAssignment:
    """Put every URL of ``columns`` in a change-rate bucket.

    Returns the ``uint8`` bucket per URL, the ``n_buckets + 1`` log-spaced
    edges (changes per cycle; pass ``edges`` to reuse earlier ones), the mean
    rate per bucket and each URL's own rate.
    """
    B = _check_n_buckets(n_buckets if edges is None else len(edges) - 1)
    lam = change_rates(columns, cycle, prior=prior)
    if edges is None:
        if lam.size:
            lo, hi = float(lam.min()), float(lam.max())
        else:
            lo, hi = 1e-3, 1.0
        lo = max(lo, 1e-12)
        if hi <= lo * (1.0 + 1e-9):
            lo, hi = lo / 2.0, lo * 2.0
        edges = np.geomspace(lo, hi, B + 1)
    else:
        edges = np.asarray(edges, dtype=np.float64)
        if edges.ndim != 1 or not (np.diff(edges) > 0).all() or edges[0] <= 0:
            raise ValueError("edges must be increasing positive rates")
    # the top edge is inclusive: the fastest URL is in the last bucket
    bucket = np.clip(np.searchsorted(edges, lam, side="right") - 1, 0, B - 1).astype(np.uint8)
    counts = np.bincount(bucket, minlength=B)
    sums = np.bincount(bucket, weights=lam, minlength=B)
    middle = np.sqrt(edges[:-1] * edges[1:])
    rate = np.where(counts > 0, sums / np.maximum(counts, 1), middle)
    return BucketAssignment(bucket=bucket, edges=edges, rate=rate, url_rate=lam)


@dataclass(frozen=True)
class BucketStats:
    """What the model needs per non-empty bucket, and which buckets those are."""

    buckets: np.ndarray  # int [B'] bucket numbers of the non-empty buckets
    sizes: np.ndarray  # float [B'] b_i0
    rate: np.ndarray  # float [B'] changes per cycle
    obsolete: np.ndarray  # float [B'] y_i0: expected stale copies now

    def change_share(self, period_cycles: float = 1.0) -> np.ndarray:
        """``a_i``: the share of a bucket that changes in one period (Poisson)."""
        return -np.expm1(-self.rate * float(period_cycles))


def bucket_stats(
    assignment: BucketAssignment,
    last_visit_cycle: np.ndarray,
    cycle: int,
    mask: np.ndarray | None = None,
    stale: np.ndarray | None = None,
) -> BucketStats:
    """Sizes, rates and expected obsolete copies of the non-empty buckets.

    A URL last fetched ``t`` cycles ago is stale with probability
    ``1 - exp(-rate t)``, using its bucket's rate, unless ``stale`` gives each URL's
    (recrawl-plan: one minus the freshness estimate's, scoring/freshness.py
    ``unchanged_probability``); ``y_i0`` sums that over the bucket. ``mask``
    restricts the count (e.g. to live, already-fetched URLs).
    """
    B = assignment.n_buckets
    bucket = assignment.bucket
    age = np.maximum(cycle - np.asarray(last_visit_cycle, dtype=np.float64), 0.0)
    given = None if stale is None else np.nan_to_num(np.asarray(stale, dtype=np.float64))
    if mask is not None:
        bucket, age = bucket[mask], age[mask]
        given = None if given is None else given[mask]
    sizes = np.bincount(bucket, minlength=B).astype(np.float64)
    stale = -np.expm1(-assignment.rate[bucket] * age) if given is None else given
    obsolete = np.bincount(bucket, weights=stale, minlength=B)
    keep = np.flatnonzero(sizes > 0)
    return BucketStats(
        buckets=keep,
        sizes=sizes[keep],
        rate=assignment.rate[keep],
        obsolete=np.minimum(obsolete[keep], sizes[keep]),
    )


def select_by_quotas(
    bucket: np.ndarray,
    last_visit_cycle: np.ndarray,
    quotas: np.ndarray,
    candidates: np.ndarray | None = None,
) -> np.ndarray:
    """Indices to fetch: ``quotas[j]`` URLs of bucket ``j``, oldest-visited first.

    ``candidates`` (bool mask) limits the choice; ties go to the lower index.
    The result is grouped by bucket, oldest first inside each.
    """
    bucket = np.asarray(bucket)
    idx = np.arange(bucket.shape[0]) if candidates is None else np.flatnonzero(candidates)
    if idx.size == 0:
        return idx.astype(np.int64)
    bk = bucket[idx].astype(np.int64)
    last = np.asarray(last_visit_cycle)[idx]
    order = np.lexsort((idx, last, bk))  # by bucket, then oldest visit, then index
    idx, bk = idx[order], bk[order]
    starts = np.searchsorted(bk, np.arange(len(quotas)), side="left")
    rank = np.arange(idx.size) - starts[bk]
    q = np.asarray(quotas, dtype=np.int64)
    take = rank < np.where(bk < len(q), q[np.minimum(bk, len(q) - 1)], 0)
    return idx[take].astype(np.int64)
