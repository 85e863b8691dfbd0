"""Is the scorer telling the URLs apart? A check of a cycle's scores, once per crawl.

A formula that is legal can still rank nothing: protected operators give 0 where they
are undefined (``X/0``, ``log(t-1)`` while every ``t`` is 1: scoring/protected.py), so
such a scorer gives one value to every URL, and an overflowing one (``exp(1000*t)``)
gives inf or NaN, ranked last. The crawl then picks its recrawls in arbitrary order
without a word. The scheduler asks :func:`score_spread` on the scores a cycle has
computed anyway, from the first cycle with a history until one is conclusive, and
warns once, naming ``RECRAWL_SCORER``.

One score value covering most URLs is the scorer's doing only when their terminals
differ: on a young store every page has ``t = 1`` and ``X = 0``, and no formula of them
could rank the pages. So the share of the commonest score is compared with the share
of the commonest combination of the terminals the scorer reads: equal, the history
does not tell the pages apart yet (inconclusive: asked again next cycle); larger, the
formula merges pages its terminals tell apart. Pure numpy on at most :data:`SAMPLE`
evenly spaced URLs, so the check costs a few milliseconds at any store size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

#: URLs looked at (evenly spaced over the scored ones): shares within about 0.5% of
#: the whole store's
SAMPLE = 1 << 16

#: more than this share on one value, or non-finite, is worth a warning (issue 27)
MOST = 0.5


@dataclass(frozen=True)
class ScoreSpread:
    """How the scores of one cycle's sample of URLs spread."""

    cycle: int
    scored: int  # URLs scored this cycle
    sample: int  # of them, looked at
    nonfinite: float  # share of NaN / inf scores
    top: float  # share of the commonest finite score
    top_value: float
    #: share of the commonest combination of the scorer's terminals (None: not needed)
    terminals: float | None = None

    @property
    def conclusive(self) -> bool:
        """Whether this cycle says something of the scorer (else: ask next cycle)."""
        if self.nonfinite > MOST or self.top <= MOST:
            return True
        return self.terminals is not None and self.top > self.terminals

    def warning(
        self, setting: str, scorer: str, terminals: str, expression: str | None = None
    ) -> str | None:
        """The one line to log, or None when the scores spread: ``scorer`` as the setting
        says it, its ``expression`` when that differs (a preset, a file)."""
        where = f"of the {self.scored} URLs scored at cycle {self.cycle}"
        named = f"{setting}={scorer!r}"
        if expression is not None and expression != scorer:
            named += f" ({expression})"
        if self.nonfinite > MOST:
            return (
                f"{named}: {self.nonfinite:.0%} {where} get a score that is not "
                "a finite number (inf or NaN: ranked last, in arbitrary order); check the "
                "expression for an overflow (docs/scorers.md)"
            )
        if self.top > MOST and self.conclusive:
            return (
                f"{named}: one score ({self.top_value:g}) covers {self.top:.0%} "
                f"{where}, though their terminals ({terminals}) tell more of them apart: "
                "those are picked in arbitrary order. Protected operations give 0 where "
                "undefined (X/0, log of 0 or less); a preset with a prior (aad+) ranks "
                "unchanged pages by age and visits (docs/scorers.md)"
            )
        return None


def _top_share(rows: np.ndarray) -> tuple[float, int]:
    """The share of the commonest row of ``rows`` (2-d floats, compared bit for bit once
    -0.0 is 0.0: NaNs alike) and the index of one such row."""
    bits = (np.asarray(rows, dtype=np.float64) + 0.0).view(np.int64)
    order = np.lexsort(bits.T[::-1])
    ranked = bits[order]
    starts = np.flatnonzero(np.r_[True, (ranked[1:] != ranked[:-1]).any(axis=1)])
    counts = np.diff(np.r_[starts, len(ranked)])
    best = int(np.argmax(counts))
    return float(counts[best]) / len(ranked), int(order[starts[best]])


def score_spread(
    scores: np.ndarray,
    cycle: int,
    terminals_of: Callable[[np.ndarray], Mapping[str, np.ndarray]],
    sample: int = SAMPLE,
) -> ScoreSpread | None:
    """The spread of ``scores`` (this cycle's, of every scored URL), from at most
    ``sample`` of them; ``terminals_of(positions)`` gives the scorer's terminals at
    those positions of ``scores``, asked only when one value covers most of them.
    None with fewer than 2 scores (nothing to rank)."""
    size = len(scores)
    if size < 2:
        return None
    if size <= sample:
        positions = np.arange(size)
    else:  # evenly spaced, strictly increasing (size > sample)
        positions = np.arange(sample, dtype=np.int64) * (size - 1) // (sample - 1)
    picked = np.asarray(scores, dtype=np.float64)[positions]
    finite = np.isfinite(picked)
    nonfinite = 1.0 - float(np.count_nonzero(finite)) / len(picked)
    values = picked[finite]
    if len(values) == 0:
        return ScoreSpread(cycle, size, len(picked), nonfinite, 0.0, float("nan"))
    share, at = _top_share(values.reshape(-1, 1))
    top = share * len(values) / len(picked)  # of all the sample, not only the finite
    spread = ScoreSpread(cycle, size, len(picked), nonfinite, top, float(values[at]))
    if top <= MOST or nonfinite > MOST:
        return spread
    terms = terminals_of(positions)
    columns = [
        np.broadcast_to(np.asarray(terms[name], dtype=np.float64), (len(positions),))
        for name in sorted(terms)
    ]
    if not columns:
        return spread
    combined, _ = _top_share(np.stack(columns, axis=1))
    return ScoreSpread(cycle, size, len(picked), nonfinite, top, spread.top_value, combined)
