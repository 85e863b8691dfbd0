"""Bags of words and the significant-change test (Radinsky & Bennett 2013, Eq. 1).

A :class:`Bag` is a page version's term counts, bounded: the ``N`` most
frequent terms (``RECRAWL_BOW_TERMS``, default 256) as 32-bit term hashes with
their counts, plus the page's total number of words, so the mass of the terms
left out is known (``other``). Stored size: ``12 + 8 N`` bytes at most
(2,060 bytes at N = 256); see :meth:`Bag.to_bytes`.

**Eq. 1.** Two versions differ *significantly* when the chi-squared test of
homogeneity of their word distributions rejects at level ``p``
(``RECRAWL_CHI2_P``, default 0.05): a 2 x V contingency table, one row per
version, one column per term kept in either bag plus one ``other`` column for
the words neither bag kept; columns that are empty in both rows are dropped.
Statistic ``sum (O - E)^2 / E`` (no Yates correction), ``V - 1`` degrees of
freedom, p-value from :func:`scipy.stats.chi2.sf` — the same numbers as
``scipy.stats.chi2_contingency(table, correction=False)`` (tests check it).

Truncation makes the test approximate: a term kept in one bag and cut from
the other (it was not among the other version's top ``N``) counts as absent
there. With ``N`` above a page's vocabulary (most pages: a few hundred
distinct words) the test is exact.

**Magnitude.** ``cosine_distance(a, b) = 1 - cos`` of the two term-count
vectors over the kept terms: the paper's ``||A(t) - A(t - i)||`` (sec. 4.2.1,
feature 3).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["Bag", "bag_from_hashes", "bag_from_text", "chi2_test", "cosine_distance"]

#: Default number of terms kept per version (RECRAWL_BOW_TERMS).
DEFAULT_TERMS = 256
_MAGIC = b"RCBW"
_VERSION = 1
_HEAD = struct.Struct("<4sBxHI")  # magic, version, pad, term count, total words


@dataclass(frozen=True, eq=False)
class Bag:
    """Top-``N`` term counts of one page version: ``terms`` (uint32, sorted) and ``counts``."""

    terms: np.ndarray  # uint32 term hashes, ascending
    counts: np.ndarray  # uint32 counts, same length
    total: int  # words in the version (>= counts.sum(): the rest were cut)

    def __post_init__(self) -> None:
        if self.terms.shape != self.counts.shape:
            raise ValueError("Bag.terms and Bag.counts must have the same length")
        if self.total < int(self.counts.sum()):
            raise ValueError("Bag.total is below the sum of the kept counts")

    def __len__(self) -> int:
        return int(self.terms.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Bag):
            return NotImplemented
        return (
            self.total == other.total
            and np.array_equal(self.terms, other.terms)
            and np.array_equal(self.counts, other.counts)
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def other(self) -> int:
        """Words of this version whose term was cut (not among the top ``N``)."""
        return self.total - int(self.counts.sum())

    def to_bytes(self) -> bytes:
        """``b"RCBW"``, version u8, pad, term count u16, total u32, then terms u32 and counts u32."""
        head = _HEAD.pack(_MAGIC, _VERSION, len(self), min(self.total, 0xFFFFFFFF))
        return (
            head
            + self.terms.astype("<u4", copy=False).tobytes()
            + self.counts.astype("<u4", copy=False).tobytes()
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Bag:
        """Inverse of :meth:`to_bytes`; ``ValueError`` on anything else."""
        try:
            magic, version, count, total = _HEAD.unpack_from(data, 0)
        except struct.error:
            raise ValueError("not a Bag: too short") from None
        if magic != _MAGIC or version != _VERSION:
            raise ValueError("not a Bag (bad magic or version)")
        if len(data) != _HEAD.size + 8 * count:
            raise ValueError("truncated or oversized Bag")
        arr = np.frombuffer(data, dtype="<u4", count=2 * count, offset=_HEAD.size)
        return cls(arr[:count].astype(np.uint32), arr[count:].astype(np.uint32), int(total))


def bag_from_hashes(words: np.ndarray | Iterable[int], max_terms: int = DEFAULT_TERMS) -> Bag:
    """The bag of a version from its word hashes (e.g. the change detector's visible words).

    Keeps the ``max_terms`` most frequent terms; ties go to the smaller hash, so
    the bag is a pure function of the multiset of words.
    """
    if max_terms < 1:
        raise ValueError("max_terms must be >= 1")
    w = np.asarray(list(words) if not isinstance(words, np.ndarray) else words)
    h = (w.astype(np.uint64, copy=False) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    terms, counts = np.unique(h, return_counts=True)
    if len(terms) > max_terms:
        keep = np.lexsort((terms, -counts))[:max_terms]  # count desc, then hash asc
        keep.sort()
        terms, counts = terms[keep], counts[keep]
    return Bag(terms.astype(np.uint32), counts.astype(np.uint32), int(h.shape[0]))


def bag_from_text(text: str, max_terms: int = DEFAULT_TERMS) -> Bag:
    """Bag of a plain text (lower-cased words), for tests, the bench and the example site."""
    import re

    import xxhash

    words = re.findall(r"\w+", text.lower())
    return bag_from_hashes(
        np.fromiter((xxhash.xxh32_intdigest(x.encode()) for x in words), np.uint64, len(words)),
        max_terms,
    )


def _table(a: Bag, b: Bag) -> np.ndarray:
    """The 2 x V contingency table of Eq. 1 (terms of either bag + ``other``), empty columns dropped."""
    union = np.union1d(a.terms, b.terms)
    table = np.zeros((2, len(union) + 1), dtype=np.float64)
    table[0, np.searchsorted(union, a.terms)] = a.counts
    table[1, np.searchsorted(union, b.terms)] = b.counts
    table[0, -1], table[1, -1] = a.other, b.other
    return table[:, table.sum(axis=0) > 0]


def chi2_test(a: Bag, b: Bag) -> tuple[float, float, int]:
    """Chi-squared test of homogeneity of two bags: ``(statistic, p_value, dof)``.

    Two empty versions, or one distinct term on both sides, are the same
    distribution (p = 1); one empty and one not are different (p = 0).
    """
    from scipy.stats import chi2

    if a.total == 0 or b.total == 0:
        same = a.total == b.total
        return (0.0, 1.0, 0) if same else (float("inf"), 0.0, 0)
    table = _table(a, b)
    dof = table.shape[1] - 1
    if dof < 1:
        return 0.0, 1.0, 0
    rows = table.sum(axis=1, keepdims=True)
    cols = table.sum(axis=0, keepdims=True)
    expected = rows * cols / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    return stat, float(chi2.sf(stat, dof)), int(dof)


def significant(a: Bag | None, b: Bag | None, p: float = 0.05) -> bool:
    """Eq. 1: the word distributions of ``a`` and ``b`` differ at level ``p``."""
    if a is None or b is None:
        return a is not b
    return chi2_test(a, b)[1] < p


def cosine_distance(a: Bag, b: Bag) -> float:
    """``1 - cos(a, b)`` of the kept term counts (0: same direction; 1: no common term)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0 if len(a) == len(b) else 1.0
    _, ia, ib = np.intersect1d(a.terms, b.terms, assume_unique=True, return_indices=True)
    dot = float(np.dot(a.counts[ia].astype(np.float64), b.counts[ib].astype(np.float64)))
    na = float(np.linalg.norm(a.counts.astype(np.float64)))
    nb = float(np.linalg.norm(b.counts.astype(np.float64)))
    return max(0.0, 1.0 - dot / (na * nb))
