"""What a cycle recrawls: the monitoring sample and the scored top-k with a per-host cap.

Pure functions over the store's numpy columns, so the schedulers stay thin
adapters to Scrapy's contract and this part is testable without a crawl.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from ..history.base import HistoryArrays
from ..scoring import Scorer, top_k_indices


def monitor_mask(ids: np.ndarray, share: float, seed: int) -> np.ndarray:
    """A fixed pseudo-random sample of URL ids (the same ids every cycle).

    splitmix64 of (id, seed): membership depends on the id alone, so the
    sample stays put as the store grows and histories stay complete.
    """
    if share <= 0:
        return np.zeros(ids.shape, dtype=bool)
    with np.errstate(over="ignore"):
        z = ids.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53) < share


def backed_off(columns: dict[str, np.ndarray], cycle: int) -> np.ndarray:
    """URLs skipped in ``cycle`` for their failed downloads: after ``k`` consecutive
    failed cycles, the last one ``c``, the cycles ``c + 1 .. c + 2**(k - 1)`` pass it by
    (1, 2, 4 ... cycles; at ``RECRAWL_MAX_FAILURES`` the URL is gone instead).

    The one back-off rule: both schedulers (through :func:`candidate_mask`) and any
    replay whose state has these columns. Columns absent (a history without failures,
    such as core/simulate.py's): nothing is backed off.
    """
    failures = columns.get("failures")
    if failures is None:
        return np.zeros(len(columns["gone"]) if "gone" in columns else 0, dtype=bool)
    last = columns["last_failure_cycle"]
    wait = np.left_shift(np.int64(1), np.clip(failures - 1, 0, 62).astype(np.int64))
    return (failures > 0) & (cycle <= last + wait)


def candidate_mask(
    arrays: HistoryArrays, exclude: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Which known URLs may be recrawled this cycle, and how many are backed off.

    Not gone, not in ``exclude`` (ids still in flight), not backed off
    (:func:`backed_off`).
    """
    cols = arrays.columns
    live = ~cols["gone"]
    if exclude is not None and len(exclude):
        live &= ~np.isin(arrays.ids, exclude)
    waiting = live & backed_off(cols, arrays.cycle)
    return live & ~waiting, int(np.count_nonzero(waiting))


@dataclass
class Selection:
    """URL ids to recrawl this cycle, best first, with their scores."""

    ids: np.ndarray
    scores: np.ndarray
    monitored: int
    scored: int
    backed_off: int = 0  # candidates skipped for their failed downloads (backed_off())


def host_of(url: str) -> str:
    return urlsplit(url).hostname or ""


def select_recrawls(
    arrays: HistoryArrays,
    scorer: Scorer,
    k: int | None,
    *,
    now: float,
    exclude: np.ndarray | None = None,
    monitor_share: float = 0.0,
    seed: int = 0,
    max_per_domain: int | None = None,
    urls_of: Callable[[np.ndarray], list[str]] | None = None,
) -> Selection:
    """Score every live known URL and pick this cycle's recrawls.

    Candidates: :func:`candidate_mask` (not gone, not in ``exclude``, not backed off).
    The monitoring sample comes first and outside ``k``; then the top ``k``
    by score (all candidates when ``k`` is None), at most ``max_per_domain``
    per host (``urls_of`` maps ids to URLs for that).
    """
    cols = arrays.columns
    live, waiting = candidate_mask(arrays, exclude)
    monitored = live & monitor_mask(arrays.ids, monitor_share, seed)
    candidates = np.flatnonzero(live & ~monitored)
    state = {name: col[candidates] for name, col in cols.items()}
    scores = (
        scorer.score(scorer.terminals(state, arrays.cycle, now)) if len(candidates) else np.zeros(0)
    )
    want = len(candidates) if k is None else min(k, len(candidates))
    if max_per_domain is None or urls_of is None:
        order = top_k_indices(scores, want)
    else:
        order = _capped_order(scores, want, max_per_domain, arrays.ids[candidates], urls_of)
    mon = np.flatnonzero(monitored)
    ids = np.concatenate([arrays.ids[mon], arrays.ids[candidates[order]]])
    sel_scores = np.concatenate([np.full(len(mon), np.inf), scores[order]])
    return Selection(
        ids=ids, scores=sel_scores, monitored=len(mon), scored=len(candidates), backed_off=waiting
    )


def _capped_order(
    scores: np.ndarray,
    k: int,
    cap: int,
    ids: np.ndarray,
    urls_of: Callable[[np.ndarray], list[str]],
) -> np.ndarray:
    """Best-first indices, skipping a host once it has ``cap`` picks."""
    full = top_k_indices(scores, len(scores))
    per_host: Counter[str] = Counter()
    picked: list[int] = []
    chunk = max(1024, 2 * k)
    for start in range(0, len(full), chunk):
        part = full[start : start + chunk]
        for i, url in zip(part, urls_of(ids[part]), strict=True):
            host = host_of(url)
            if per_host[host] < cap:
                per_host[host] += 1
                picked.append(int(i))
                if len(picked) == k:
                    return np.asarray(picked, dtype=np.int64)
    return np.asarray(picked, dtype=np.int64)
