"""Replay a recrawl policy over complete change histories (GP4C's simulation).

Input is a matrix ``changes[page, cycle]`` (1 = the live page changed during
that cycle), as in ``../shared/data/changes/*.npz``. The replay follows
Santos et al. 2013 sec. 5.2 / 2015 sec. 5.2:

* **Warm-up.** During the first ``warmup`` cycles (default 2) every page is
  fetched every cycle. The first fetch of a page is not a change observation
  (there is nothing to compare with); each later fetch is.
* **Budget.** Afterwards, each cycle, every page is scored with
  :func:`~scrapy_recrawl.scoring.registry.compute_terminals` (through
  :meth:`Scorer.terminals <scrapy_recrawl.scoring.Scorer.terminals>`, with the
  scorer's terminal registry) and the :class:`~scrapy_recrawl.scoring.Scorer`
  (the same code the live scheduler runs), and the top ``k`` (default 5% of
  the pages) are fetched. The scorer's terminals get that ``k`` as the crawl's do
  (:func:`~scrapy_recrawl.core.selection.with_budget`: ``chogm_f``, ``lc_f``).
* **No failures.** A change matrix has no failed downloads, so the back-off of
  failing URLs (``core/selection.py: backed_off``, the rule the crawl applies) never
  applies here: its state has no ``failures`` column.
* **What a fetch sees.** A fetch in cycle ``c`` sees the page as it is at the
  end of cycle ``c`` (a change during ``c`` is visible). A fetched page "had
  changed" if it changed in any cycle since its previous fetch. Only fetched
  pages update ``n``, ``X``, the last visit and the estimator state, through
  :func:`scrapy_recrawl.history.state.observe` (the store's one update rule).

Metrics for every cycle after the warm-up, and their means:

* **ChangeRate** = changed fetched pages / ``k``.
* **NDCG@k**: the fetched list in score order, relevant = had changed,
  discount ``1/log2(i + 1)``; the ideal list puts ``min(k, S)`` relevant pages
  first, ``S`` being the number of pages stale before the fetch (the oracle's
  choice). NDCG is 1 in a cycle where no page is stale (nothing to miss).
* **Freshness**: the share of *all* pages whose stored copy is current at the
  end of the cycle.

``oracle`` is the clairvoyant policy that knows which pages are stale now
(not the future): stale pages first, the longest-unvisited first. It gives
the upper bound the presets are reported against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from scrapy_recrawl.core.budget import (
    adaptive_cut,
    budget_pages,
    check_adaptive_budget,
    cycle_budget,
    parse_budget,
)
from scrapy_recrawl.core.groups import GROUP_COLUMN, history_groups
from scrapy_recrawl.core.selection import with_budget
from scrapy_recrawl.history.state import observe
from scrapy_recrawl.scoring import Scorer, TerminalRegistry, top_k_indices


class ReplayExtension(Protocol):
    """Extra per-page state a replay keeps beside the estimators (e.g. content/replay.py)."""

    def columns(self, cycle: int) -> Mapping[str, np.ndarray]:
        """Terminal columns to add before scoring ``cycle``."""
        ...

    def fetched(self, idx: np.ndarray | slice, hit: np.ndarray, cycle: int) -> None:
        """Pages ``idx`` were fetched in ``cycle``; ``hit``: which had changed."""
        ...


#: ``select(state, cycle, k) -> row indices, best first``: a policy given as a function.
SelectFn = Callable[[Mapping[str, np.ndarray], int, int], np.ndarray]

ORACLE = "oracle"


@dataclass
class ReplayResult:
    """Per-cycle metrics of one replay (cycles after the warm-up)."""

    policy: str
    pages: int
    k: int
    #: the first cycle the metrics cover: the warm-up's length, or the hand-over's cycle
    warmup: int
    change_rate: np.ndarray
    ndcg: np.ndarray
    freshness: np.ndarray
    #: pages fetched that had changed, per cycle
    changed_fetched: np.ndarray = field(repr=False)
    #: per-URL state at the end of the replay (the store's columns)
    state: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: pages fetched per cycle (below ``k`` where the adaptive budget cut the list)
    fetched: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    #: with ``born`` (new pages): new pages fetched per cycle
    fetched_new: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    #: with ``born``: new pages found and not fetched yet at each cycle's end
    backlog: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    #: with ``born``: per page, the cycles from its appearance to its first fetch (0: in
    #: the cycle it appeared; -1: never fetched)
    new_latency: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)

    @property
    def mean_change_rate(self) -> float:
        return float(self.change_rate.mean()) if self.change_rate.size else float("nan")

    @property
    def mean_ndcg(self) -> float:
        return float(self.ndcg.mean()) if self.ndcg.size else float("nan")

    @property
    def mean_freshness(self) -> float:
        return float(self.freshness.mean()) if self.freshness.size else float("nan")

    def summary(self) -> dict[str, float]:
        """Means of the three metrics."""
        return {
            "change_rate": self.mean_change_rate,
            "ndcg": self.mean_ndcg,
            "freshness": self.mean_freshness,
        }


def resolve_k(k: int | float | str, pages: int) -> int:
    """Budget per cycle: a page count or a share of the pages (``"5%"``; a float below 1
    still reads as a share), at most ``pages``.

    The crawl's own rule (:func:`scrapy_recrawl.core.budget.parse_budget` and
    :func:`~scrapy_recrawl.core.budget.budget_pages`), so a replay spends what the
    crawl would; a bad ``k`` raises ValueError (RecrawlSettingError) naming it.
    """
    if isinstance(k, np.integer):
        k = int(k)
    elif isinstance(k, np.floating):
        k = float(k)
    value, _ = parse_budget(k, "k")
    return min(pages, budget_pages(value, pages))


def new_state(pages: int) -> dict[str, np.ndarray]:
    """Empty per-URL state, the same columns the history store hands the scheduler."""
    return {
        "n": np.zeros(pages, dtype=np.int64),
        "X": np.zeros(pages, dtype=np.int64),
        "sad": np.zeros(pages),
        "aad_sum": np.zeros(pages),
        "gad": np.zeros(pages),
        "last_visit_cycle": np.zeros(pages, dtype=np.int64),
        "last_visit_time": np.zeros(pages),
        "D": np.full(pages, np.nan),
        "A": np.full(pages, np.nan),
        "R": np.full(pages, np.nan),
        "M": np.full(pages, np.nan),
        # as the stores keep them: the cycle of the first fetch (the replay's warm-up
        # fetches every page at cycle 0), the cycle that last saw a change (-1: none)
        "first_cycle": np.zeros(pages, dtype=np.int64),
        "last_change_cycle": np.full(pages, -1, dtype=np.int64),
    }


def _record_fetch(
    state: dict[str, np.ndarray],
    idx: np.ndarray | slice,
    changed: np.ndarray,
    cycle: int,
    now: float,
    first: bool = False,
) -> None:
    if not first:
        new = observe(
            state["n"][idx],
            state["X"][idx],
            state["sad"][idx],
            state["aad_sum"][idx],
            state["gad"][idx],
            changed,
        )
        for col, values in zip(("n", "X", "sad", "aad_sum", "gad"), new, strict=True):
            state[col][idx] = values
        seen = np.asarray(changed, dtype=bool)
        if isinstance(idx, slice):
            state["last_change_cycle"][idx][seen] = cycle  # a view: assigned in place
        else:
            state["last_change_cycle"][np.asarray(idx)[seen]] = cycle
    state["last_visit_cycle"][idx] = cycle
    state["last_visit_time"][idx] = now


class _Picker:
    """One policy's pick of a cycle's fetches: a scorer's top-k (its own terminals,
    from its registry, with the cycle's budget, as in the crawl), the oracle's, or a
    selection function's."""

    def __init__(
        self,
        policy: Scorer | str | SelectFn,
        prior: tuple[float, float] | None,
        seed: int,
        registry: TerminalRegistry | None = None,
    ) -> None:
        self.oracle = isinstance(policy, str) and policy.strip().lower() == ORACLE
        self.select: SelectFn | None = None
        self.scorer: Scorer | None = None
        if callable(policy) and not isinstance(policy, (Scorer, str)):
            self.select = policy
            self.label = getattr(policy, "__name__", "custom")
        elif self.oracle:
            self.label = ORACLE
        else:
            self.scorer = (
                policy
                if isinstance(policy, Scorer)
                else Scorer.from_spec(policy, prior=prior, seed=seed, registry=registry)  # type: ignore[arg-type]
            )
            name = self.scorer.name
            self.label = name if name != "expression" else str(self.scorer)
        self.cut_prior = self.scorer.prior if self.scorer is not None else prior

    def __call__(
        self,
        state: dict[str, np.ndarray],
        extension: ReplayExtension | None,
        stale: np.ndarray,
        cyc: int,
        now: float,
        budget: int,
    ) -> np.ndarray:
        if self.select is not None:
            return np.asarray(self.select(state, cyc, budget), dtype=np.int64)[:budget]
        if self.oracle:
            # stale pages first (a bonus above any age), the longest-unvisited first
            t = cyc - state["last_visit_cycle"]
            return top_k_indices(stale * float(cyc + 1) + t, budget)
        assert self.scorer is not None
        # only a scorer reads the extension's columns (its terminals, as in the crawl)
        cols = state if extension is None else {**state, **extension.columns(cyc)}
        terms = self.scorer.terminals(with_budget(cols, budget), cyc, now)
        return self.scorer.top_k(terms, budget)


def simulate(
    changes: np.ndarray,
    policy: Scorer | str | SelectFn = "gp4c",
    *,
    warmup: int = 2,
    k: int | float = 0.05,
    seed: int = 0,
    prior: tuple[float, float] | None = None,
    cycle_hours: float = 24.0,
    name: str | None = None,
    extension: ReplayExtension | None = None,
    groups: np.ndarray | None = None,
    adaptive_budget: float | None = None,
    handover: int | None = None,
    before: Scorer | str | SelectFn | None = None,
    born: np.ndarray | None = None,
    new_share: float = 0.2,
    new_share_max: float = 0.5,
    registry: TerminalRegistry | None = None,
) -> ReplayResult:
    """Replay ``policy`` over ``changes[page, cycle]``; returns per-cycle metrics.

    ``policy`` is a :class:`Scorer`, anything :meth:`Scorer.from_spec`
    accepts (preset, expression, JSON path), ``"oracle"``, or a selection
    function ``select(state, cycle, k) -> row indices, best first`` (e.g. the
    WebFountain planner). ``seed`` seeds
    ``rand``; ``prior`` is RECRAWL_PRIOR for the ``...p`` terminals;
    ``cycle_hours`` is the length of a cycle for the ``hours`` terminal;
    ``name`` labels the result (default: the policy's); ``extension`` keeps
    extra per-page state and terminal columns (the content replay's window and
    related pages) through the same loop; ``groups`` is the pages' ``group`` column
    (int codes, :func:`scrapy_recrawl.core.groups.history_groups` of their names) for
    the pooled-prior terminals (none: one group). ``adaptive_budget`` is
    RECRAWL_ADAPTIVE_BUDGET: a policy's ranked picks are cut as the crawl cuts them
    (:func:`scrapy_recrawl.core.budget.adaptive_cut`; not the oracle's); ChangeRate
    stays per budget page, ``fetched`` says what each cycle spent.

    ``handover`` is the cycle from which ``policy`` crawls and the metrics are kept
    (None: the first after the warm-up); the budgeted cycles before it are crawled
    by ``before`` (a policy as ``policy``; None: ``policy`` itself), so the policy
    takes over a store that already holds their observations: what a user gets who
    crawled with one scorer, ran ``recrawl-evolve`` and pasted the winner.

    ``born`` (one cycle per page; None: every page exists from cycle 0) replays a
    growing site: page ``p`` appears in cycle ``born[p]``, found that cycle (a page
    the crawl fetches links to it), and is unknown until its first fetch. Each budgeted
    cycle then spends the crawl's budget as the crawl does (``k`` a page count or a
    share of the known pages; the new URLs' share by
    :func:`scrapy_recrawl.core.budget.cycle_budget` from RECRAWL_NEW_SHARE
    ``new_share``, RECRAWL_NEW_SHARE_MAX ``new_share_max`` and the backlog waiting as
    the cycle opens; a share the backlog does not claim lent to the recrawls, taken
    back by the cycle's finds); the backlog is fetched first, oldest first, then the
    cycle's finds. The policy ranks the known pages only; ChangeRate is per budget
    page, freshness over the pages that exist (one never fetched is not fresh);
    ``fetched_new``, ``backlog`` and ``new_latency`` say how new pages fared.

    ``registry``: the terminals a policy (and ``before``) given as a string may name
    (None: the core's; :mod:`scrapy_recrawl.plugin_terminals` gives the plug-ins' too,
    whose columns this replay does not fill: NaN, ranked last).
    """
    c = np.asarray(changes)
    if c.ndim != 2:
        raise ValueError(f"changes must be a 2-d [page, cycle] matrix, got shape {c.shape}")
    pages, cycles = c.shape
    if pages == 0:
        raise ValueError("changes has no pages")
    if born is not None:
        return _simulate_growing(
            c,
            policy,
            np.asarray(born, dtype=np.int64),
            warmup=warmup,
            k=k,
            seed=seed,
            prior=prior,
            cycle_hours=cycle_hours,
            name=name,
            adaptive_budget=adaptive_budget,
            new_share=new_share,
            new_share_max=new_share_max,
            extension=extension,
            handover=handover,
            groups=groups,
            registry=registry,
        )
    if not 1 <= warmup <= cycles:
        raise ValueError(f"warmup={warmup!r}: expected 1..{cycles} (the number of cycles)")
    budget = resolve_k(k, pages)
    first = warmup if handover is None else handover
    if not warmup <= first <= cycles:
        raise ValueError(f"handover={handover!r}: expected {warmup}..{cycles} (warm-up to end)")
    pick = _Picker(policy, prior, seed, registry)
    pick_before = pick if before is None else _Picker(before, prior, seed, registry)
    name = name or pick.label

    by_cycle = np.ascontiguousarray(c.T != 0)  # [cycle, page], one row per cycle
    seconds = float(cycle_hours) * 3600.0
    state = new_state(pages)
    if groups is not None:
        if np.shape(groups) != (pages,):
            raise ValueError(
                f"groups must hold one code per page ({pages}), got {np.shape(groups)}"
            )
        state[GROUP_COLUMN] = np.asarray(groups)
    stale = np.zeros(pages, dtype=bool)  # changed since our last fetch
    everyone = slice(None)

    for cyc in range(warmup):
        stale |= by_cycle[cyc]
        _record_fetch(state, everyone, stale.copy(), cyc, cyc * seconds, first=cyc == 0)
        if extension is not None:
            extension.fetched(everyone, stale.copy(), cyc)
        stale[:] = False

    evaluated = cycles - first
    change_rate = np.zeros(evaluated)
    ndcg = np.zeros(evaluated)
    freshness = np.zeros(evaluated)
    changed_fetched = np.zeros(evaluated, dtype=np.int64)
    fetched = np.zeros(evaluated, dtype=np.int64)
    threshold = check_adaptive_budget(adaptive_budget, "adaptive_budget")
    discount = 1.0 / np.log2(np.arange(2, budget + 2, dtype=np.float64))
    ideal = np.concatenate(([0.0], np.cumsum(discount)))  # ideal[m] = IDCG with m relevant

    for cyc in range(warmup, cycles):
        stale |= by_cycle[cyc]
        now = cyc * seconds
        chooser = pick if cyc >= first else pick_before
        idx = chooser(state, extension, stale, cyc, now, budget)
        if threshold is not None and not chooser.oracle:
            idx = idx[: adaptive_cut(state, idx, cyc, chooser.cut_prior, threshold)]
        hit = stale[idx]
        if cyc >= first:
            j = cyc - first
            fetched[j] = idx.size
            n_stale = int(np.count_nonzero(stale))
            found = int(np.count_nonzero(hit))
            changed_fetched[j] = found
            change_rate[j] = found / budget
            best = ideal[min(budget, n_stale)]
            ndcg[j] = float(discount[: idx.size] @ hit) / best if best > 0 else 1.0
            freshness[j] = 1.0 - (n_stale - found) / pages
        _record_fetch(state, idx, hit, cyc, now)
        if extension is not None:
            extension.fetched(idx, hit, cyc)
        stale[idx] = False

    return ReplayResult(
        policy=name,
        pages=pages,
        k=budget,
        warmup=first,
        change_rate=change_rate,
        ndcg=ndcg,
        freshness=freshness,
        changed_fetched=changed_fetched,
        state=state,
        fetched=fetched,
    )


def _simulate_growing(
    c: np.ndarray,
    policy: Scorer | str | SelectFn,
    born: np.ndarray,
    *,
    warmup: int,
    k: int | float | str,
    seed: int,
    prior: tuple[float, float] | None,
    cycle_hours: float,
    name: str | None,
    adaptive_budget: float | None,
    new_share: float,
    new_share_max: float,
    extension: ReplayExtension | None,
    handover: int | None,
    groups: np.ndarray | None,
    registry: TerminalRegistry | None,
) -> ReplayResult:
    """:func:`simulate` with pages that appear (``born``): the module docstring's replay,
    the known pages ranked, new pages fetched under the crawl's new-share rule."""
    pages, cycles = c.shape
    if extension is not None or handover is not None or groups is not None:
        raise ValueError("born= replays no extension, hand-over or groups")
    if np.shape(born) != (pages,):
        raise ValueError(f"born must hold one cycle per page ({pages}), got {np.shape(born)}")
    if not 1 <= warmup <= cycles:
        raise ValueError(f"warmup={warmup!r}: expected 1..{cycles} (the number of cycles)")
    parse_budget(k, "k")
    pick = _Picker(policy, prior, seed, registry)
    threshold = check_adaptive_budget(adaptive_budget, "adaptive_budget")
    by_cycle = np.ascontiguousarray(c.T != 0)
    seconds = float(cycle_hours) * 3600.0
    state = new_state(pages)
    known = np.zeros(pages, dtype=bool)
    stale = np.zeros(pages, dtype=bool)
    latency = np.full(pages, -1, dtype=np.int64)

    def fetch_new(idx: np.ndarray, cyc: int) -> None:
        known[idx] = True
        latency[idx] = cyc - born[idx]
        state["first_cycle"][idx] = cyc
        _record_fetch(state, idx, np.zeros(idx.size, dtype=bool), cyc, cyc * seconds, first=True)
        stale[idx] = False

    for cyc in range(warmup):
        exists = born <= cyc
        stale |= by_cycle[cyc] & exists
        old = np.flatnonzero(known)
        _record_fetch(state, old, stale[old].copy(), cyc, cyc * seconds)
        stale[old] = False
        fetch_new(np.flatnonzero(exists & ~known), cyc)

    evaluated = cycles - warmup
    out = {name_: np.zeros(evaluated) for name_ in ("change_rate", "ndcg", "freshness")}
    counts = {
        name_: np.zeros(evaluated, dtype=np.int64)
        for name_ in ("changed_fetched", "fetched", "fetched_new", "backlog", "k")
    }
    discount = 1.0 / np.log2(np.arange(2, pages + 2, dtype=np.float64))
    ideal = np.concatenate(([0.0], np.cumsum(discount)))
    for cyc in range(warmup, cycles):
        j = cyc - warmup
        exists = born <= cyc
        stale |= by_cycle[cyc] & exists & known
        waiting = exists & ~known
        backlog = np.flatnonzero(waiting & (born < cyc))  # from earlier cycles
        found = np.flatnonzero(waiting & (born == cyc))  # found in this cycle
        budget = cycle_budget(
            k,
            new_share,
            int(np.count_nonzero(known)),
            warmup=False,
            backlog=backlog.size,
            max_share=new_share_max,
        )
        total, new = int(budget.total or 0), int(budget.new or 0)
        # the recrawls queued: the budget less the share the backlog claims
        rows = np.flatnonzero(known)
        sub = {col: values[rows] for col, values in state.items()}
        want = min(rows.size, total - min(new, backlog.size))
        idx = rows[pick(sub, None, stale[rows], cyc, cyc * seconds, want)] if want else rows[:0]
        if threshold is not None and not pick.oracle:
            idx = idx[: adaptive_cut(state, idx, cyc, pick.cut_prior, threshold)]
        # new pages within their share; what either side leaves flows to the other
        ready = np.concatenate([backlog[np.argsort(born[backlog], kind="stable")], found])
        take_new = min(ready.size, new)
        take_rec = min(idx.size, total - take_new)
        take_new = min(ready.size, total - take_rec)
        idx = idx[:take_rec]
        hit = stale[idx]
        n_stale = int(np.count_nonzero(stale))
        found_changes = int(np.count_nonzero(hit))
        counts["k"][j] = total
        counts["fetched"][j] = idx.size
        counts["changed_fetched"][j] = found_changes
        out["change_rate"][j] = found_changes / total if total else 0.0
        best = ideal[min(idx.size, n_stale)]
        out["ndcg"][j] = float(discount[: idx.size] @ hit) / best if best > 0 else 1.0
        _record_fetch(state, idx, hit, cyc, cyc * seconds)
        stale[idx] = False
        fetch_new(ready[:take_new], cyc)
        counts["fetched_new"][j] = take_new
        counts["backlog"][j] = ready.size - take_new
        alive = int(np.count_nonzero(exists))
        out["freshness"][j] = (
            int(np.count_nonzero(known & exists & ~stale)) / alive if alive else 1.0
        )
    return ReplayResult(
        policy=name or pick.label,
        pages=pages,
        k=int(counts["k"].max()) if evaluated else 0,
        warmup=warmup,
        change_rate=out["change_rate"],
        ndcg=out["ndcg"],
        freshness=out["freshness"],
        changed_fetched=counts["changed_fetched"],
        state=state,
        fetched=counts["fetched"],
        fetched_new=counts["fetched_new"],
        backlog=counts["backlog"],
        new_latency=latency,
    )


def load_changes(path: str) -> np.ndarray:
    """The ``changes`` matrix (uint8 [pages, days]) of a shared-data ``.npz``."""
    with np.load(path, allow_pickle=False) as data:
        return np.asarray(data["changes"])


def load_groups(path: str) -> np.ndarray:
    """The ``group`` column of a shared-data ``.npz``: its page names' directories
    (:func:`scrapy_recrawl.core.groups.history_groups`; no ``pages`` array: one group)."""
    with np.load(path, allow_pickle=False) as data:
        names = [str(p) for p in data["pages"]] if "pages" in data.files else None
        pages = int(data["changes"].shape[0])
    return history_groups(names, pages)
