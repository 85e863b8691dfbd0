"""What a cycle recrawls: the monitoring sample and the scored top-k with a per-host cap.

Pure functions over the store's numpy columns, so the schedulers stay thin
adapters to Scrapy's contract and this part is testable without a crawl.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from ..history.base import HistoryArrays
from ..scoring import CORE_TERMINALS, ExpressionScorer, Scorer, core_registry, top_k_indices
from ..scoring.terminals import BUDGET
from .score_check import ScoreSpread, score_spread


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
    out = np.zeros(len(failures), dtype=bool)
    failing = np.flatnonzero(failures > 0)  # few: the rule runs on those rows only
    last = columns["last_failure_cycle"][failing]
    wait = np.left_shift(np.int64(1), np.clip(failures[failing] - 1, 0, 62).astype(np.int64))
    out[failing] = cycle <= last + wait
    return out


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
    # picks a plug-in marked due now (DUE_NOW): right after the monitored ones, ahead of
    # the scorer's own picks, whose lowest score is the cycle's cut-off
    due: int = 0
    #: how this cycle's scores spread (core/score_check.py), when asked (check_spread)
    spread: ScoreSpread | None = None


#: A boolean column a ColumnProvider may add: candidates marked in it are *due now* and
#: are taken first, ahead of the scored top-k, best score first among them, within ``k``
#: and the per-host cap (the sitemaps' announced changes: scrapy_recrawl/evidence/).
#: A convention of names, so the core ranks them without importing the plug-in.
DUE_NOW = "due_now"


def due_first(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Ranking keys: ``scores``, except at ``rows`` (the due ones), whose keys rank above
    every other, in their own score order (best first; NaN last).

    Keys rather than a second selection, so :func:`top_k_indices` and the per-host cap
    rank both groups in one pass. A due key is ``top + step * place`` with ``top`` the
    largest finite score: ``step`` (``|top|`` / 2**30) is far above the spacing of floats
    near ``top``, so the keys stay distinct, and finite unless ``top`` is within a
    factor (1 + due rows / 2**30) of the largest float.
    """
    if len(rows) == 0:
        return scores
    keys = np.array(scores, dtype=np.float64)  # a copy: the picks keep their own scores
    top = float(keys.max()) if len(keys) else 0.0
    if not np.isfinite(top):  # a NaN or an inf among them: the finite ones' largest
        finite = keys[np.isfinite(keys)]
        top = float(finite.max()) if len(finite) else 0.0
    step = max(abs(top), 1.0) * 2.0**-30
    best_first = rows[top_k_indices(keys[rows], len(rows))]
    keys[best_first] = top + step * np.arange(len(rows), 0, -1, dtype=np.float64)
    return keys


def _due_rows(columns: Mapping[str, np.ndarray], candidates: np.ndarray) -> np.ndarray:
    """Positions in ``candidates`` (row indices, ascending) of the rows marked DUE_NOW:
    from the few marked rows, not a pass over every candidate."""
    flagged = np.flatnonzero(columns[DUE_NOW])
    pos = np.searchsorted(candidates, flagged)
    inside = pos < len(candidates)
    inside[inside] = candidates[pos[inside]] == flagged[inside]
    return pos[inside]


def host_of(url: str) -> str:
    return urlsplit(url).hostname or ""


# scheme://netloc, as urlsplit() reads them, when nothing in it needs urlsplit's
# clean-up (leading blanks, tabs or newlines anywhere in scheme or netloc)
_NETLOC = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#\t\r\n]*)(?:[/?#]|\Z)")


#: netloc -> host, kept across calls (the crawl asks for one URL's host per response);
#: emptied when full: the hosts of a crawl are few
_HOST_OF_NETLOC: dict[str, str] = {}
_HOSTS_KEPT = 4096


def hosts_of(urls: list[str]) -> list[str]:
    """:func:`host_of` of each URL: ``urlsplit`` runs once per distinct netloc, not once
    per URL (a million URLs of a few thousand hosts: a regex match each)."""
    match = _NETLOC.match
    by_netloc = _HOST_OF_NETLOC
    if len(by_netloc) > _HOSTS_KEPT:
        by_netloc.clear()
    out = []
    for url in urls:
        m = match(url)
        if m is None:
            out.append(host_of(url))
            continue
        netloc = m.group(1)
        host = by_netloc.get(netloc)
        if host is None:
            host = by_netloc[netloc] = host_of("//" + netloc)
        out.append(host)
    return out


def with_budget(columns: Mapping[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """``columns`` and the cycle's recrawl budget ``k`` (pages), as the scalar entry
    :data:`~scrapy_recrawl.scoring.terminals.BUDGET`: how the terminals that solve for a
    whole cycle (``chogm_f``, ``lc_f``: scoring/policies.py) learn it. The one place
    both the crawl (:func:`select_recrawls`) and the replay (core/simulate.py) put it."""
    return {**columns, BUDGET: np.asarray(float(k))}


class _Rows(Mapping[str, np.ndarray]):
    """The candidates' rows of each column, taken when a terminal first reads it: a
    scorer reading 4 of the 14 columns copies 4 (all candidates: no copy at all)."""

    def __init__(self, columns: Mapping[str, np.ndarray], rows: np.ndarray | slice | None) -> None:
        self._columns = columns
        self._rows = rows
        self._taken: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        col = self._taken.get(name)
        if col is None:
            col = self._columns[name]
            if self._rows is not None and np.ndim(col):  # a scalar (the budget) as it is
                col = self._taken[name] = col[self._rows]
        return col

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __contains__(self, name: object) -> bool:
        return name in self._columns


#: Candidates scored at a time when the scorer is a formula of core terminals: each
#: terminal and temporary is a 512 KiB block reused from block to block, not a fresh
#: array of every URL (at 10M URLs: 80 MB each, a dozen of them, page-faulted in anew).
SCORE_BLOCK = 1 << 16


def _blockwise(scorer: Scorer) -> bool:
    """Whether each URL's score depends on its own row only, so scoring block by block
    gives every score bit for bit: an expression of the core terminals (elementwise
    numpy). Not so for ``rand`` (one draw for the whole vector) nor, as far as this
    module knows, a plug-in's terminal."""
    if not isinstance(scorer, ExpressionScorer):
        return False
    registry = scorer.registry if scorer.registry is not None else core_registry()
    return all(registry.get(name) in CORE_TERMINALS for name in scorer.terminals_needed)


def _score(
    scorer: Scorer,
    columns: Mapping[str, np.ndarray],
    candidates: np.ndarray,
    rows: int,
    cycle: int,
    now: float,
) -> np.ndarray:
    """The scores of the ``candidates`` (row indices, ascending) of ``columns``."""
    size = len(candidates)
    if size == 0:
        return np.zeros(0)
    every = size == rows  # candidates[i] == i: read the columns as they are
    if size <= SCORE_BLOCK or not _blockwise(scorer):
        return scorer.score_state(_Rows(columns, None if every else candidates), cycle, now)
    out = np.empty(size)
    for start in range(0, size, SCORE_BLOCK):
        end = min(size, start + SCORE_BLOCK)
        block = slice(start, end) if every else candidates[start:end]
        out[start:end] = scorer.score_state(_Rows(columns, block), cycle, now)
    return out


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
    check_spread: bool = False,
) -> Selection:
    """Score every live known URL and pick this cycle's recrawls.

    Candidates: :func:`candidate_mask` (not gone, not in ``exclude``, not backed off).
    The monitoring sample comes first and outside ``k``; then the top ``k``
    by score (all candidates when ``k`` is None), those a plug-in marked due now
    (:data:`DUE_NOW`) ahead of the rest, at most ``max_per_domain`` per host
    (``urls_of`` maps ids to URLs for that). ``check_spread``: also say how the scores
    spread (:func:`~.score_check.score_spread`, on the scores computed here).
    """
    cols = arrays.columns
    live, waiting = candidate_mask(arrays, exclude)
    monitored = live & monitor_mask(arrays.ids, monitor_share, seed)
    candidates = np.flatnonzero(live & ~monitored)
    want = len(candidates) if k is None else min(k, len(candidates))
    cols = with_budget(cols, want)
    scores = _score(scorer, cols, candidates, len(arrays.ids), arrays.cycle, now)
    spread = None
    if check_spread:
        scored_cols = cols

        def terminals_of(positions: np.ndarray) -> Mapping[str, np.ndarray]:
            rows = _Rows(scored_cols, candidates[positions])
            return scorer.terminals(rows, arrays.cycle, now)

        spread = score_spread(scores, arrays.cycle, terminals_of)
    # a plug-in's due-now URLs (DUE_NOW) rank first; the picks keep their own scores
    due = _due_rows(cols, candidates) if DUE_NOW in cols else np.empty(0, dtype=np.intp)
    keys = due_first(scores, due)
    if max_per_domain is None or urls_of is None:
        order = top_k_indices(keys, want)
    else:
        order = _capped_order(keys, want, max_per_domain, arrays.ids[candidates], urls_of)
    mon = np.flatnonzero(monitored)
    ids = np.concatenate([arrays.ids[mon], arrays.ids[candidates[order]]])
    sel_scores = np.concatenate([np.full(len(mon), np.inf), scores[order]])
    return Selection(
        ids=ids,
        scores=sel_scores,
        monitored=len(mon),
        scored=len(candidates),
        backed_off=waiting,
        # the due picks lead the order (their keys rank above every other)
        due=int(np.count_nonzero(np.isin(order[: len(due)], due))) if len(due) else 0,
        spread=spread,
    )


def _capped_order(
    scores: np.ndarray,
    k: int,
    cap: int,
    ids: np.ndarray,
    urls_of: Callable[[np.ndarray], list[str]],
) -> np.ndarray:
    """Best-first indices, skipping a host once it has ``cap`` picks.

    Only as far down the ranking as the picks need: the best ``2k`` are ranked
    (``top_k_indices``, no sort of every score), their URLs asked for in slices of
    about the picks still missing, and each slice capped with array operations
    (host codes, a running count per host). A ranking used up before ``k`` picks
    (hosts at their cap) is extended fourfold, skipping what was already walked.
    """
    size = len(scores)
    picked: list[np.ndarray] = []
    n_picked = 0
    code_of: dict[str, int] = {}
    counts = np.zeros(0, dtype=np.int64)  # picks per host code so far
    walked = np.zeros(size, dtype=bool)
    m = min(size, max(1024, 2 * k))
    order = top_k_indices(scores, m)
    pos = 0
    while n_picked < k:
        if pos >= len(order):
            if m >= size:
                break
            m = min(size, 4 * m)
            order = top_k_indices(scores, m)
            order = order[~walked[order]]
            pos = 0
            continue
        step = max(1024, (k - n_picked) + (k - n_picked) // 8)
        part = order[pos : pos + step]
        pos += len(part)
        walked[part] = True
        hosts = hosts_of(urls_of(ids[part]))
        codes = np.fromiter(
            (code_of.setdefault(h, len(code_of)) for h in hosts), np.int64, count=len(hosts)
        )
        if len(code_of) > len(counts):
            counts = np.concatenate([counts, np.zeros(len(code_of) - len(counts), np.int64)])
        # rank of each URL among this slice's URLs of its host, in best-first order
        by_host = np.argsort(codes, kind="stable")
        sorted_codes = codes[by_host]
        first = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        group_start = np.repeat(first, np.diff(np.r_[first, len(codes)]))
        rank = np.empty(len(codes), dtype=np.int64)
        rank[by_host] = np.arange(len(codes)) - group_start
        keep = np.flatnonzero(counts[codes] + rank < cap)[: k - n_picked]
        np.add.at(counts, codes[keep], 1)
        picked.append(part[keep])
        n_picked += len(keep)
    return np.concatenate(picked) if picked else np.empty(0, dtype=np.int64)
