"""Replaying a whole population at once: GP4C's fitness evaluation.

:class:`PopulationReplay` replays every tree of a generation over the same
change matrix, sharing the state of the trees that fetched the same pages, and
gives exactly the numbers of :func:`scrapy_recrawl.core.simulate.simulate` (and of
:func:`scrapy_recrawl.content.replay.simulate_content` for trees using ``Q``). This
module keeps the replay's state (the class table, the groups, the Q states) from
cycle to cycle; each cycle's top-k of every individual is :mod:`.selections`'.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from scrapy_recrawl.content import window as win
from scrapy_recrawl.content.replay import replay_registry
from scrapy_recrawl.core.selection import with_budget
from scrapy_recrawl.core.simulate import (
    _record_fetch,
    new_state,
    resolve_k,
)
from scrapy_recrawl.learn import gp
from scrapy_recrawl.learn.gp import Tree
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import (
    CORE_TERMINALS,
    TerminalRegistry,
)

from .config import related_parameters
from .fitness import (
    _STATE_COLUMNS,
    _WINDOW_MISSING,
    PopulationFitness,
    _Group,
    _window_columns,
    _window_terms,
)
from .selections import Selections


def _q_column(state: Any, cycle: int) -> np.ndarray:
    """``Q`` of every URL for ``cycle`` from a content replay state, as a float64 terminal."""
    q = state.columns(cycle)["Q"]
    return replay_registry().compute({"n": q, "Q": q}, cycle, needed=("Q",))["Q"]


class PopulationReplay:
    """:func:`simulate` for many trees at once over the same ``changes``.

    Same warm-up, same top-k selection, same updates, same metrics: the
    numbers equal ``simulate(changes, scorer)`` for a scorer that scores
    with :func:`gp.evaluate` (tests check it). What is shared: the warm-up (run
    once), and the per-URL state as a table of *classes* (URLs in the same
    state); every individual's URLs point into one table, so terminals and the
    values of common subtrees are computed once per cycle for all of them.

    ``window`` > 0 also keeps paper 004's window of the last ``window`` change
    observations as state columns (the terminals ``C1..Cl`` and ``D1..Dl``,
    ``D_i = max(C_1..C_i)`` on change matrices); the numbers then equal
    :func:`~scrapy_recrawl.content.replay.simulate_content` with the same
    ``window`` (tests check it). 0 (the default) keeps none: a tree using
    ``C*`` / ``D*`` is refused, and the class table merges more URLs.

    **Q** (paper 004's related pages) depends on what the *other* pages were
    seen doing, so it is no column of a URL's state: two URLs in one class can
    have different experts. Each group that has an individual using ``Q``
    keeps its own observation log and related-page index, the very object
    :func:`~scrapy_recrawl.content.replay.simulate_content` keeps
    (``content.replay.ContentState``: same build at the end of the warm-up,
    same refresh every ``refresh_every`` cycles, same ``Q``), copied only when
    a group splits (groups never merge, so at most one copy per individual per
    batch). Q trees are evaluated per URL (their class-level subterminals
    gathered per URL, ``Q`` added) and select with :func:`top_k_by_index`;
    they still share the group's state and, when they pick the same URLs, one
    selection. Trees without ``Q`` keep the class-level path and cost what
    they cost without it. ``related`` sets the index
    (``experts``, ``max_lag``, ``max_candidates``, ``history``,
    ``refresh_every``, ``groups``: simulate_content's parameters, same
    defaults, i.e. ``RECRAWL_EXPERTS``, ``RECRAWL_EXPERTS_LAG``,
    ``RECRAWL_EXPERTS_CANDIDATES``, ``RECRAWL_EXPERTS_HISTORY``); the numbers
    then equal ``simulate_content(changes, scorer, **related)`` (tests check it).

    **Any terminal of the registry** (``registry``; None: the default one). The class
    table holds every column of the simulator's state (``new_state``), each fetch
    applied by the simulator's own ``_record_fetch``, so a column added there is kept
    here too. The core terminals (and the window's) are functions of a URL's own
    columns: computed once per class. Any other terminal may read what a class does
    not determine (a per-URL column given as ``columns``, e.g. a host group or an
    importance; the cycle's budget) or depend on every URL (a Lagrange multiplier over
    the collection, a group's pooled rate), so it is computed per URL from every URL's
    state, as simulate() computes it, and the trees using it are evaluated per URL
    like Q trees (tests/test_learn_objectives.py checks the numbers equal simulate's).
    """

    def __init__(
        self,
        changes: np.ndarray,
        *,
        k: int | float = 0.05,
        warmup: int = 2,
        prior: tuple[float, float] | None = None,
        cycle_hours: float = 24.0,
        window: int = 0,
        related: Mapping[str, Any] | None = None,
        registry: TerminalRegistry | None = None,
        columns: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        c = np.asarray(changes)
        self.related = related_parameters(related)
        self.window = 0 if window == 0 else win.check_window(window)
        self.registry = default_registry() if registry is None else registry
        #: the simulator's per-URL state columns (core/simulate.py new_state, whatever it
        #: keeps): the class table holds them all, updated by simulate's own _record_fetch
        self.state_columns = tuple(new_state(1))
        self.columns = self.state_columns + _window_columns(self.window)
        #: per-URL columns that no fetch changes (a page's host group, its importance...),
        #: for the terminals evaluated per URL
        self.static = {name: np.asarray(v) for name, v in (columns or {}).items()}
        for name, v in self.static.items():
            if v.shape[:1] != c.shape[:1]:
                raise ValueError(
                    f"column {name!r}: {v.shape[:1]} rows, the changes have {c.shape[0]}"
                )
        if c.ndim != 2 or c.shape[0] == 0:
            raise ValueError(f"changes must be a non-empty [page, cycle] matrix, got {c.shape}")
        self.pages, self.cycles = c.shape
        if not 1 <= warmup <= self.cycles:
            raise ValueError(f"warmup={warmup!r}: expected 1..{self.cycles}")
        self.k = resolve_k(k, self.pages)
        self.warmup = warmup
        self.prior = prior
        self.seconds = float(cycle_hours) * 3600.0
        self.by_cycle = np.ascontiguousarray(c.T != 0)
        # the warm-up, exactly as simulate() runs it
        state = new_state(self.pages)
        cwin = win.empty_window(self.pages, max(1, self.window))
        stale = np.zeros(self.pages, dtype=bool)
        #: what the warm-up fetches saw (the Q groups' observation log starts with it)
        self._warmup_hits: list[np.ndarray] = []
        for cyc in range(warmup):
            stale |= self.by_cycle[cyc]
            self._warmup_hits.append(stale.copy())
            _record_fetch(state, slice(None), stale.copy(), cyc, cyc * self.seconds, first=cyc == 0)
            if cyc > 0:  # as simulate_content: the first fetch is not an observation
                win.push(cwin, slice(None), stale.astype(np.float64))
            stale[:] = False
        cols = {col: state[col] for col in self.state_columns}
        for i, name in enumerate(_window_columns(self.window)):
            cols[name] = np.where(np.isnan(cwin[:, i]), _WINDOW_MISSING, cwin[:, i])
        table, self.page_class = self._classes(cols, names=self.columns)
        self.table = table
        self.discount = 1.0 / np.log2(np.arange(2, self.k + 2, dtype=np.float64))
        self.ideal = np.concatenate(([0.0], np.cumsum(self.discount)))
        self.interner = gp.Interner()
        #: compact the class table when it grows past this (and 4x its live classes)
        self.compact_above = 8192
        self.compactions = 0
        #: (group, cycle) pairs replayed: the per-URL work actually done
        self.groups_seen = 0
        #: Q states copied when a group with Q individuals split
        self.q_copies = 0

    def _q_state(self) -> Any:
        """The Q state (observation log, related-page index) after the warm-up, as
        simulate_content builds it."""
        from scrapy_recrawl.content.replay import ContentState

        r = self.related
        st = ContentState(
            self.pages,
            self.cycles,
            self.warmup,
            window=1,  # the C window is the class table's; this one is unused
            wants_q=True,
            experts=r["experts"],
            max_lag=r["max_lag"],
            groups=r["groups"],
            max_candidates=r["max_candidates"],
            history=r["history"],
            refresh_every=r["refresh_every"],
        )
        for cyc, hit in enumerate(self._warmup_hits):
            st.fetched(slice(None), hit.copy(), cyc)
        return st

    @staticmethod
    def _classes(
        columns: dict[str, np.ndarray],
        ids: np.ndarray | None = None,
        names: Sequence[str] = _STATE_COLUMNS,
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Rows with equal state merged: (class table, class of each row / of ``ids``)."""
        stacked = _class_key(columns, names)
        _, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
        table = {c: np.ascontiguousarray(columns[c][first]) for c in names}
        inverse = inverse.reshape(-1)
        return table, inverse if ids is None else inverse[ids]

    def evaluate(self, trees: Sequence[Tree]) -> PopulationFitness:
        """Replay every tree; mean ChangeRate, NDCG and freshness of each.

        Individuals that have fetched the same URLs so far are in the same
        state: they form a *group* with one copy of the per-URL arrays, share
        the terminal and subtree values, and, when their scores rank the
        classes alike, share the top-k selection too (equivalent expressions
        stay together for the whole replay).
        """
        g = len(trees)
        pages, k = self.pages, self.k
        evaluated = self.cycles - self.warmup
        cr = np.zeros((g, evaluated))
        nd = np.zeros((g, evaluated))
        fr = np.zeros((g, evaluated))
        if g == 0:
            return PopulationFitness(cr.mean(1), nd.mean(1), fr.mean(1))
        roots = [self.interner.intern(t) for t in trees]
        used = [tuple(sorted(gp.terminals_used(t))) for t in trees]
        uses_q = np.array(["Q" in u for u in used], dtype=bool)
        everything = frozenset().union(*used)
        for name in everything - {"Q"}:
            self.registry.get(name)  # an unknown name: the registry's message
        # terminals that are not a function of a URL's own class state (module docstring)
        url_only = frozenset(n for n in everything if not _class_local(n)) - {"Q"}
        per_url = np.array([bool(set(u) & url_only) or "Q" in u for u in used], dtype=bool)
        needed = everything - {"Q"} - url_only
        # one Q state per group that has an individual using Q (group 0: everyone)
        q_states: dict[int, Any] = {0: self._q_state()} if uses_q.any() else {}
        wants_window = any(n[0] in "CD" and n[1:].isdigit() for n in needed)
        if wants_window and not self.window:
            raise ValueError(
                "the C1..C5 / D1..D5 terminals need PopulationReplay(..., window=l) (l >= 1)"
            )
        table = {c: v.copy() for c, v in self.table.items()}
        group_of = np.zeros(g, dtype=np.intp)
        page_class = self.page_class[None, :].copy()  # [group, URL]
        stale = np.zeros((1, pages), dtype=bool)  # [group, URL]
        live_after_compaction = len(table["n"])
        discount = self.discount
        for j, cyc in enumerate(range(self.warmup, self.cycles)):
            stale |= self.by_cycle[cyc]
            now = cyc * self.seconds
            size = len(table["n"])
            cols = table
            if wants_window:
                cols = {**table, **_window_terms(table, self.window)}
            terms = self.registry.compute(cols, cyc, now, prior=self.prior, needed=needed)
            url_terms = self._url_terms(table, cyc, now, url_only)
            groups: dict[int, _Group] = {}
            selections = Selections(self.interner, k)  # this cycle's distinct selections
            sel_of = np.empty(g, dtype=np.intp)
            with np.errstate(all="ignore"):
                for i, root in enumerate(roots):
                    gid = int(group_of[i])
                    grp = groups.get(gid)
                    if grp is None:
                        grp = groups[gid] = _Group(page_class[gid], size, terms, url_terms)
                        if gid in q_states:  # once per cycle and Q group, as simulate_content
                            grp.q = _q_column(q_states[gid], cyc)
                    select = selections.by_url if per_url[i] else selections.by_class
                    sel_of[i] = select(root, used[i], grp, gid)
            s_group = np.array(selections.group, dtype=np.intp)
            s_idx = np.stack(selections.idx)
            hit = stale[s_group[:, None], s_idx]
            n_stale = np.count_nonzero(stale, axis=1)[s_group]
            found = np.count_nonzero(hit, axis=1)
            best = self.ideal[np.minimum(k, n_stale)]
            s_nd = np.array(
                [
                    float(discount[:k] @ hit[s]) / best[s] if best[s] > 0 else 1.0
                    for s in range(s_group.shape[0])
                ]
            )
            cr[:, j] = (found / k)[sel_of]
            nd[:, j] = s_nd[sel_of]
            fr[:, j] = (1.0 - (n_stale - found) / pages)[sel_of]
            # next groups: (group, URLs fetched); one representative selection each
            next_of: dict[tuple[int, bytes], int] = {}
            reps: list[int] = []
            next_of_sel = np.empty(s_group.shape[0], dtype=np.intp)
            for sid in range(s_group.shape[0]):
                key = (int(s_group[sid]), np.sort(s_idx[sid]).tobytes())
                new_gid = next_of.get(key)
                if new_gid is None:
                    new_gid = next_of[key] = len(reps)
                    reps.append(sid)
                next_of_sel[sid] = new_gid
            group_of = next_of_sel[sel_of]
            rep = np.array(reps)
            if q_states:
                q_states = self._next_q_states(
                    q_states, group_of, uses_q, s_group, rep, s_idx, hit, cyc
                )
            r_idx = s_idx[rep]
            r_rows = np.arange(rep.shape[0])[:, None]
            r_old_group = s_group[rep]
            page_class = page_class[r_old_group]
            stale = stale[r_old_group]
            r_hit = hit[rep]
            # the fetched URLs move to new classes: (old class, changed) -> new state
            old = page_class[r_rows, r_idx]
            keys, inverse = np.unique(old * 2 + r_hit, return_inverse=True)
            src = keys // 2
            changed = (keys % 2).astype(bool)
            # the new classes' state: simulate's own update of a fetch (one rule)
            fresh = {col: table[col][src] for col in self.state_columns}
            _record_fetch(fresh, slice(None), changed, cyc, now)
            for col in self.state_columns:
                table[col] = np.concatenate((table[col], fresh[col]))
            # the window shifts by one: the new observation first (win.push per class)
            names = _window_columns(self.window)
            for newer, older in zip(names[::-1][:-1], names[::-1][1:], strict=True):
                table[newer] = np.concatenate((table[newer], table[older][src]))
            if names:
                table[names[0]] = np.concatenate((table[names[0]], changed.astype(np.float64)))
            page_class[r_rows, r_idx] = size + inverse.reshape(r_idx.shape)
            stale[r_rows, r_idx] = False
            self.groups_seen += rep.shape[0]
            if len(table["n"]) > max(self.compact_above, 4 * live_after_compaction):
                table, page_class = self._compact(table, page_class)
                self.compactions += 1
                live_after_compaction = len(table["n"])
        return PopulationFitness(
            np.array([r.mean() for r in cr]),
            np.array([r.mean() for r in nd]),
            np.array([r.mean() for r in fr]),
            per_cycle={"changerate": cr, "ndcg": nd, "freshness": fr},
        )

    def _url_terms(
        self,
        table: Mapping[str, np.ndarray],
        cycle: int,
        now: float,
        names: frozenset[str],
    ) -> Callable[[np.ndarray], dict[str, np.ndarray]] | None:
        """How a group gets this cycle's per-URL terminals ``names``: from every URL's
        state (its class's columns gathered, plus the static columns), through the
        registry, exactly as simulate() computes them."""
        if not names:
            return None

        def compute(page_class: np.ndarray) -> dict[str, np.ndarray]:
            state = {col: table[col][page_class] for col in self.state_columns}
            state.update(self.static)
            # a terminal solving for the whole cycle (the policies' chogm_f, lc_f) also
            # needs the cycle's budget, handed over as simulate() does
            state = with_budget(state, self.k)
            return self.registry.compute(state, cycle, now, prior=self.prior, needed=names)

        return compute

    def _next_q_states(
        self,
        q_states: dict[int, Any],
        group_of: np.ndarray,
        uses_q: np.ndarray,
        s_group: np.ndarray,
        rep: np.ndarray,
        s_idx: np.ndarray,
        hit: np.ndarray,
        cyc: int,
    ) -> dict[int, Any]:
        """The Q states of the next groups: the parent's (copied if it split), plus this fetch."""
        wanted = set(np.unique(group_of[uses_q]).tolist())
        children: dict[int, list[int]] = {}
        for new_gid, sid in enumerate(rep.tolist()):
            if new_gid in wanted:
                children.setdefault(int(s_group[sid]), []).append(new_gid)
        out: dict[int, Any] = {}
        for parent, kids in children.items():
            st = q_states[parent]
            # copies first: the parent's state is still the one before this fetch
            for new_gid in kids[1:]:
                out[new_gid] = copy.deepcopy(st)
                self.q_copies += 1
            out[kids[0]] = st
        for new_gid, st in out.items():
            sid = int(rep[new_gid])
            st.fetched(s_idx[sid], hit[sid].copy(), cyc)
        return out

    def _compact(
        self, table: dict[str, np.ndarray], page_class: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Drop classes no URL is in any more, and merge classes with equal state."""
        live = np.flatnonzero(np.bincount(page_class.ravel(), minlength=len(table["n"])))
        merged, live_class = self._classes(
            {c: v[live] for c, v in table.items()}, names=self.columns
        )
        remap = np.zeros(len(table["n"]), dtype=np.int64)
        remap[live] = live_class
        return merged, remap[page_class]


#: Paper 004's window terminals: columns of the class table too (PopulationReplay's window).
_WINDOW_NAMES = frozenset(f"{c}{i}" for c in "CD" for i in range(1, 6))
_CORE_NAMES = frozenset(t.name for t in CORE_TERMINALS)


def _class_local(name: str) -> bool:
    """Whether terminal ``name`` is a function of a URL's own state columns alone (the core
    terminals, the window's): computed once per class. Any other terminal of the registry
    (a plug-in's column, a group's pooled rate, one that depends on the budget or on the
    other URLs) is computed per URL: always right, only slower."""
    return name in _CORE_NAMES or name in _WINDOW_NAMES


def _class_key(columns: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    """The rows' state as one float64 matrix for np.unique: a column with NaN (a
    magnitude never recorded on a change matrix) as a NaN flag and its values, so equal
    rows merge (NaN never equals NaN); columns equal on every row left out (they tell no
    row apart). float64 holds the int columns exactly (counts, cycles far below 2^53)."""
    parts = []
    rows = 0
    for name in names:
        v = np.asarray(columns[name], dtype=np.float64)
        rows = v.shape[0]
        nan = np.isnan(v)
        for part in (nan.astype(np.float64), np.where(nan, 0.0, v)) if nan.any() else (v,):
            if part.size and not (part == part[0]).all():
                parts.append(part)
    return np.stack(parts, 1) if parts else np.zeros((rows, 1))
