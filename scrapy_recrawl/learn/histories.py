"""Complete change histories for offline learning: from a file or from the crawl's store.

GP4C learns from *complete* histories: every page observed every cycle
(Santos et al. 2015 sec. 5: BRDC'12 re-fetched each page daily). A crawl
that follows its own scorer does not have them: it re-fetches the pages its
scorer likes, so their histories are dense and the others' sparse, and a
learner would learn the scorer's bias. Only the store's *monitoring sample*
(``RECRAWL_MONITOR_SHARE``: a fixed pseudo-random share of the URLs fetched
every cycle, outside the budget; :func:`scrapy_recrawl.core.selection.monitor_mask`)
is unbiased. :func:`from_store` reads only those URLs, as each cycle's plan recorded
the sample (:class:`MonitorSample`), and refuses, with an explanation, when there are
none.

Files: ``.npz`` with ``changes`` (uint8 [pages, cycles], as in
``../shared/data/changes``), or a CSV with columns ``url,cycle,changed``.
"""

from __future__ import annotations

import csv
import logging
import os
from dataclasses import dataclass

import numpy as np

from scrapy_recrawl.core.groups import history_groups
from scrapy_recrawl.core.selection import monitor_mask
from scrapy_recrawl.history.base import HistoryStore
from scrapy_recrawl.history.cycle_log import monitor_samples
from scrapy_recrawl.history.state import good_status

logger = logging.getLogger(__name__)

MONITOR_HELP = (
    "Set RECRAWL_MONITOR_SHARE (e.g. 0.02) in the project's settings: each cycle the "
    "scheduler then fetches that fixed share of the known URLs, outside the budget, so "
    "their histories are complete and unbiased by the scorer. After enough cycles "
    "(at least --warmup + a few), run recrawl-evolve again; or pass --history FILE."
)


class HistoryError(ValueError):
    """No usable complete history; the message says why and what to do."""


@dataclass
class History:
    """``changes[page, cycle]`` (1 = changed during the cycle) and where it came from."""

    changes: np.ndarray
    source: str
    #: URLs (or page names) per row, when known
    names: list[str] | None = None
    #: why pages were left out (incomplete histories), for the report
    note: str = ""
    #: how the rows were found, when the user should know (a monitoring sample
    #: recomputed from the settings: MonitorSample.info)
    info: str = ""

    @property
    def pages(self) -> int:
        return int(self.changes.shape[0])

    @property
    def cycles(self) -> int:
        return int(self.changes.shape[1])

    @property
    def groups(self) -> np.ndarray:
        """Each page's ``group`` code for the pooled priors (scoring/pooled.py): its URL's
        host or its name's directory (core/groups.py); one group when names are unknown.
        ``simulate(history.changes, ..., groups=history.groups)`` replays with them."""
        return history_groups(self.names, self.pages)


def load(path: str) -> History:
    """A history file: ``.npz`` (array ``changes``) or ``.csv`` (``url,cycle,changed``)."""
    if not os.path.exists(path):
        raise HistoryError(f"--history {path!r}: no such file")
    if os.path.isdir(path):
        raise HistoryError(f"--history {path!r}: is a directory, expected a .npz or .csv file")
    low = path.lower()
    if low.endswith(".npz"):
        return _load_npz(path)
    if low.endswith(".csv"):
        return _load_csv(path)
    raise HistoryError(
        f"--history {path!r}: unknown file type; expected .npz (array 'changes', "
        "pages x cycles) or .csv (columns url,cycle,changed)"
    )


_ZIP = b"PK\x03\x04"


def read_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, never unpickled; anything else (no
    such file, not a zip, truncated, an object array) is a :class:`HistoryError`."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(_ZIP))
    except OSError as exc:
        raise HistoryError(f"--history {path!r}: cannot read it ({exc.strerror})") from None
    if magic != _ZIP:
        # np.load would take it for a pickle, and suggest loading it unsafely
        raise HistoryError(f"--history {path!r}: not a .npz file (a zip of numpy arrays)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: np.asarray(data[name]) for name in data.files}
    except Exception as exc:  # noqa: BLE001 -- zip/format errors of every kind
        raise HistoryError(f"--history {path!r}: cannot read the .npz ({exc})") from None


def _load_npz(path: str) -> History:
    data = read_npz(path)
    if "changes" not in data:
        raise HistoryError(
            f"--history {path!r}: no array 'changes' in the .npz "
            f"(it has: {', '.join(data) or 'nothing'})"
        )
    changes = data["changes"]
    names = [str(p) for p in data["pages"]] if "pages" in data else None
    note = ""
    observed = data.get("observed")
    if observed is not None and observed.shape == changes.shape and not observed.all():
        # `recrawl-report --export --all`: a cell never fetched reads as "no change"
        note = (
            f"warning: only {observed.mean():.0%} of this history's page-cycles were "
            "fetched (an --all export): the rest read as 'no change', so a scorer learned "
            "from it learns the crawl's own picks; export the monitoring sample instead"
        )
    return History(_check_matrix(changes, path), source=path, names=names, note=note)


def _check_matrix(changes: np.ndarray, path: str) -> np.ndarray:
    if changes.ndim != 2 or changes.shape[0] == 0 or changes.shape[1] == 0:
        raise HistoryError(
            f"--history {path!r}: 'changes' must be a non-empty pages x cycles matrix, "
            f"got shape {changes.shape}"
        )
    if not np.isin(changes, (0, 1)).all():
        raise HistoryError(f"--history {path!r}: 'changes' must hold only 0 and 1")
    return changes.astype(np.uint8, copy=False)


#: More cycles than any crawl has run: a CSV spanning more is a typo (cycle 20240101)
MAX_CYCLES = 100_000


def _load_csv(path: str) -> History:
    try:
        return _read_csv(path)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise HistoryError(f"--history {path!r}: not a CSV of url,cycle,changed ({exc})") from None
    except OSError as exc:
        raise HistoryError(f"--history {path!r}: cannot read it ({exc.strerror})") from None


def _read_csv(path: str) -> History:
    cells: dict[str, dict[int, int]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        for lineno, row in enumerate(reader, start=1):
            if not row or all(not c.strip() for c in row):
                continue
            if lineno == 1 and [c.strip().lower() for c in row[:3]] == ["url", "cycle", "changed"]:
                continue
            if len(row) != 3:
                raise HistoryError(
                    f"--history {path!r} line {lineno}: expected 3 columns url,cycle,changed, "
                    f"got {len(row)}"
                )
            url, cycle_s, changed_s = (c.strip() for c in row)
            try:
                cycle = int(cycle_s)
                changed = int(changed_s)
            except ValueError:
                raise HistoryError(
                    f"--history {path!r} line {lineno}: cycle and changed must be integers, "
                    f"got {cycle_s!r}, {changed_s!r}"
                ) from None
            if changed not in (0, 1):
                raise HistoryError(
                    f"--history {path!r} line {lineno}: changed must be 0 or 1, got {changed}"
                )
            per = cells.setdefault(url, {})
            per[cycle] = max(per.get(cycle, 0), changed)
    if not cells:
        raise HistoryError(f"--history {path!r}: no rows")
    first = min(min(c) for c in cells.values())
    last = max(max(c) for c in cells.values())
    span = last - first + 1
    if span > MAX_CYCLES:
        raise HistoryError(
            f"--history {path!r}: cycles {first}..{last}, more than {MAX_CYCLES} cycles: "
            "the cycle column should count crawl cycles (1, 2, 3 ...)"
        )
    complete = sorted(u for u, c in cells.items() if len(c) == span)
    dropped = len(cells) - len(complete)
    if not complete:
        raise HistoryError(
            f"--history {path!r}: no URL has a row for every cycle {first}..{last}; "
            "GP4C needs complete histories (every URL observed every cycle)"
        )
    changes = np.zeros((len(complete), span), dtype=np.uint8)
    for r, url in enumerate(complete):
        for cyc, ch in cells[url].items():
            changes[r, cyc - first] = ch
    note = (
        f"{dropped} of {len(cells)} URLs left out: their histories miss cycles in {first}..{last}"
        if dropped
        else ""
    )
    return History(changes, source=path, names=complete, note=note)


@dataclass(frozen=True)
class MonitorSample:
    """Which URL ids were in the monitoring sample at which cycle.

    A crawl records the sample's rule in each cycle's plan (history/cycle_log.py:
    :func:`~scrapy_recrawl.history.cycle_log.monitor_samples`): the share and seed of
    :func:`~scrapy_recrawl.core.selection.monitor_mask`, whose membership depends on the
    id alone. A cycle without a record takes the rule of the last recorded cycle before
    it (or of the first one, before any). A store with no record at all (crawled before
    the rule was recorded) takes ``fallback``: the settings' share and seed.
    """

    #: the recorded cycles, ascending, and their (share, seed); empty: none recorded
    cycles: tuple[int, ...]
    rules: tuple[tuple[float, int], ...]
    fallback: tuple[float, int]

    @classmethod
    def of(cls, store: object, share: float, seed: int) -> MonitorSample:
        samples = monitor_samples(store)
        return cls(tuple(samples), tuple(samples.values()), (float(share), int(seed)))

    @property
    def recorded(self) -> bool:
        return bool(self.cycles)

    @property
    def empty(self) -> bool:
        """No cycle had a sample (a share of 0 in every rule)."""
        return not any(share > 0 for share, _ in self.rules or (self.fallback,))

    @property
    def current(self) -> tuple[float, int]:
        """The rule of the last cycle (the fallback when none is recorded)."""
        return self.rules[-1] if self.rules else self.fallback

    def members(self, url_ids: np.ndarray, cycles: np.ndarray) -> np.ndarray:
        """``url_ids[i]`` was in the sample at ``cycles[i]`` (element-wise)."""
        url_ids = np.asarray(url_ids)
        if not self.recorded:
            return monitor_mask(url_ids, *self.fallback)
        which = np.searchsorted(np.asarray(self.cycles), np.asarray(cycles), side="right") - 1
        which = np.maximum(which, 0)
        out = np.zeros(url_ids.shape, dtype=bool)
        for rule in dict.fromkeys(self.rules):  # a few distinct rules: one mask each
            rows = np.isin(which, [i for i, r in enumerate(self.rules) if r == rule])
            out[rows] = monitor_mask(url_ids[rows], *rule)
        return out

    def ever(self, ids: np.ndarray) -> np.ndarray:
        """Ids in the sample at some cycle."""
        out = np.zeros(np.shape(ids), dtype=bool)
        for rule in dict.fromkeys(self.rules or (self.fallback,)):
            out |= monitor_mask(np.asarray(ids), *rule)
        return out

    def describe(self) -> str:
        """The rule(s), as settings: recorded per cycle, or the fallback's."""
        if not self.recorded:
            share, seed = self.fallback
            return f"RECRAWL_MONITOR_SHARE={share:g}, RECRAWL_SEED={seed} of the settings"
        spans: list[tuple[tuple[float, int], int, int]] = []
        for cycle, rule in zip(self.cycles, self.rules, strict=True):
            if spans and spans[-1][0] == rule:
                spans[-1] = (rule, spans[-1][1], cycle)
            else:
                spans.append((rule, cycle, cycle))
        parts = [
            f"RECRAWL_MONITOR_SHARE={share:g}, RECRAWL_SEED={seed}"
            + ("" if len(spans) == 1 else f" in cycles {first}..{last}")
            for (share, seed), first, last in spans
        ]
        return "; ".join(parts) + ", recorded by the crawl"

    def info(self, where: str) -> str | None:
        """The line saying the sample is recomputed from the settings, or that the
        settings name another sample than the recorded one (None: nothing to say)."""
        if self.recorded:
            share, seed = self.fallback
            if share > 0 and (share, seed) != self.current:
                return (
                    f"the settings say RECRAWL_MONITOR_SHARE={share:g}, RECRAWL_SEED={seed}; "
                    f"the history store {where} recorded the sample its crawls fetched "
                    f"({self.describe()}): that one is read"
                )
            return None
        return (
            f"the history store {where} does not record its monitoring sample (crawled "
            f"before scrapy-recrawl recorded it): recomputed from {self.describe()}; "
            "they must be the crawl's"
        )


def from_store(
    store: HistoryStore, *, monitor_share: float, seed: int, min_cycles: int = 3
) -> History:
    """The monitoring sample's complete histories from an open history store.

    Rows: URLs of the sample (:class:`MonitorSample`: the rule each cycle's plan
    recorded; ``monitor_share`` and ``seed``, the settings', only for a store that
    records none) with a good fetch (2xx/304) while in the sample in every cycle of
    the window; the window is the run of cycles, ending at the last one, that keeps
    the most page-cycles. Column 0 is the window's first fetch (a baseline, not an
    observation), column j the change observed at the window's j-th cycle.
    """
    where = store.location
    sample = MonitorSample.of(store, monitor_share or 0.0, seed)
    if not sample.recorded and sample.empty:
        raise HistoryError(
            f"the history store {where} has no complete histories: RECRAWL_MONITOR_SHARE "
            f"is 0, so every URL was fetched only when the scorer picked it, and learning "
            f"from those biased, partial histories would learn the scorer's own bias. "
            + MONITOR_HELP
        )
    if sample.empty:
        raise HistoryError(
            f"the history store {where} has no complete histories: its crawls had no "
            "monitoring sample (RECRAWL_MONITOR_SHARE was 0, or plan mode picked), so "
            "every URL was fetched only when the scorer picked it, and learning from those "
            "biased, partial histories would learn the scorer's own bias. " + MONITOR_HELP
        )
    info = sample.info(where)
    if info:
        logger.info(info)
    arrays = store.arrays()  # type: ignore[attr-defined]
    ids = arrays.ids[sample.ever(arrays.ids)]
    if ids.size == 0:
        raise HistoryError(
            f"the history store {where} has no URL in the monitoring sample "
            f"({sample.describe()}, {len(arrays.ids)} URLs known). " + MONITOR_HELP
        )
    log = store.visit_log()  # type: ignore[attr-defined]
    good = good_status(log["status"])
    # a visit counts while its URL was in the sample of that cycle
    keep = good & sample.members(log["url_id"], log["cycle"])
    url_id, cycle, changed = log["url_id"][keep], log["cycle"][keep], log["changed"][keep]
    if url_id.size == 0:
        raise HistoryError(
            f"the history store {where}: the monitoring sample ({ids.size} URLs) has no "
            "successful fetch yet. " + MONITOR_HELP
        )
    c0, c1 = int(cycle.min()), int(cycle.max())
    span = c1 - c0 + 1
    sampled, rows = np.unique(url_id, return_inverse=True)  # no Python loop per visit
    fetched = np.zeros((sampled.size, span), dtype=bool)
    observed = np.full((sampled.size, span), -1, dtype=np.int8)
    fetched[rows, cycle - c0] = True
    np.maximum.at(observed, (rows, cycle - c0), changed.astype(np.int8))
    # best window [s, e] with e in the last two cycles (the last may be in progress)
    best: tuple[int, int, np.ndarray] | None = None
    best_score = 0
    for e in sorted({span - 1, max(0, span - 2)}):
        # tail[:, s]: observed at every cycle s+1..e (one pass, not one slice per s)
        tail = np.ones((fetched.shape[0], e + 1), dtype=bool)
        if e:
            seen = observed[:, e:0:-1] >= 0
            tail[:, :e] = np.logical_and.accumulate(seen, axis=1)[:, ::-1]
        for s in range(0, e + 1 - max(min_cycles - 1, 0)):
            ok = fetched[:, s] & tail[:, s]
            score = int(ok.sum()) * (e - s + 1)
            if score > best_score:
                best, best_score = (s, e, ok), score
    if best is None:
        raise HistoryError(
            f"the history store {where}: no URL of the monitoring sample ({ids.size} URLs, "
            f"{sample.describe()}) has a complete history of at least "
            f"{min_cycles} cycles yet (cycles {c0}..{c1} in the log). " + MONITOR_HELP
        )
    s, e, ok = best
    changes = np.zeros((int(ok.sum()), e - s + 1), dtype=np.uint8)
    if e > s:
        changes[:, 1:] = observed[ok, s + 1 : e + 1] == 1
    names = store.urls(sampled[ok]) if hasattr(store, "urls") else None  # type: ignore[attr-defined]
    left = sampled.size - int(ok.sum())
    note = (
        f"monitoring sample: {ids.size} URLs ({sample.describe()}); "
        f"{int(ok.sum())} complete over cycles {c0 + s}..{c0 + e}"
        + (f", {left} left out (a fetch missing or failed)" if left else "")
    )
    return History(
        changes, source=f"{where} (monitoring sample)", names=names, note=note, info=info or ""
    )
