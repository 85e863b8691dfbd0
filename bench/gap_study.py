"""Where the gap to the oracle is: which per-URL information would raise ChangeRate.

    nice .venv/bin/python bench/gap_study.py                 # the six shared histories
    nice .venv/bin/python bench/gap_study.py --jobs 1 --history ../shared/data/changes/scoop_extras.npz

Issue 18's bar: a scorer learned on the first half of each shared history
(``../shared/data/changes/*.npz``) finds >= 0.90 of the oracle's ChangeRate on the
second half (replay: warm-up W=2 days, then k = 5% of the pages a day). The GP and the
best presets stop near 0.85. This study asks what per-URL information, computable
online with O(1) state per URL, would raise what is achievable, and by how much.
Every number is a replay of the **second half** (core/simulate.py ``simulate``,
custom selection functions), with everything fitted on the **first half** only.

Two kinds of measurement, each against the same baselines:

* **Information value** (``gbm:<set>``): a gradient-boosted classifier (scikit-learn's
  HistGradientBoostingClassifier, the ``ml`` extra) learns P(page stale now | features)
  from a replay of the first half under ``cg+`` (every page, every cycle after the
  warm-up; its label is the truth of the change matrix: a change since the page's last
  fetch). On the second half the pages are ranked by that probability. The feature
  sets: ``base`` (what the terminals tell today: n, X, t, NAD, SAD, AAD, GAD, CGp,
  NADh (the group's pooled prior), lam), then ``base`` plus one candidate:

  - ``tc``: cycles since the last observed change, and since it at the last visit
    (hazard shapes, bursts). From columns the stores keep (last_change_cycle,
    first_cycle, last_visit_cycle).
  - ``interval``: the last interval between two observed changes, and ``tc`` over
    it. Needs the cycle of the change before the last: a new store column.
  - ``weekday``: the weekday of the day scored, and the page's share of its changes
    on that weekday (changes seen after a gap spread evenly over its days). Needs 14
    counters per URL (changes and exposure per weekday): new columns.
  - ``group``: co-change in the page's directory (core/groups.py): the number and
    share of the other pages of its group seen changed since its last visit, and the
    share seen changed in the last cycle. From columns the stores keep
    (last_change_cycle, last_visit_cycle, group).
  - ``decay``: time-decayed change rates, sum of exp(-age/tau) over observed changes
    over the same sum of the days observed, tau = 14 and 60 days. Two floats and a
    time per tau: new columns.
  - ``all``: base plus every candidate.

  A flexible model on the same information is not a terminal; it says how much a
  feature can add at most (up to what the model and the first half can learn; its
  rows come from a ``cg+`` replay, its own replay visits other states). Its ties
  (trees give the same probability to whole blocks of quiet pages) are broken by
  ``cg+``'s score.

* **Parametric scorers** a terminal could give, their parameters chosen by the best
  first-half ChangeRate on a small grid, from columns the stores keep:

  - ``burst``: the cumulative hazard since the last visit of
    ``h(s) = CGp (1 + beta exp(-s/tau))``, ``s`` the days since the last observed
    change: ``CGp (t + beta tau (exp(-a/tau) - exp(-tc/tau)))``, ``a = tc - t``;
    beta in {1, 4, 16}, tau in {2, 7, 30}.
  - ``cochange``: ``CGp t (1 + gamma share)``, ``share`` the group's share of pages
    seen changed since the page's last visit; gamma in {0.5, 2, 8, 32}.

Baselines: ``cg+``, ``aad+``, the preset best on the *first* half (a pick a user can
make: ``first-half pick``) and the best of every replayable preset on the second half
(``hindsight``, no user can pick it). Printed: one table, ChangeRate / oracle per
history and the mean, then the parameters chosen. About 3 minutes on 2 processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

# one thread per process (the classifier's OpenMP): the processes are the parallelism
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.simulate import ORACLE, load_groups, simulate  # noqa: E402
from scrapy_recrawl.learn.config import replayable_presets  # noqa: E402
from scrapy_recrawl.scoring import top_k_indices  # noqa: E402
from scrapy_recrawl.scoring.registry import core_registry  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
KW: dict[str, Any] = {"warmup": 2, "k": 0.05, "seed": 0}
BASE = ("n", "X", "t", "NAD", "SAD", "AAD", "GAD", "CGp", "NADh", "lam")
SETS = ("base", "tc", "interval", "weekday", "group", "decay", "all")
TAUS = (14.0, 60.0)
BURST_GRID = [(b, tau) for b in (1.0, 4.0, 16.0) for tau in (2.0, 7.0, 30.0)]
COCHANGE_GRID = [0.5, 2.0, 8.0, 32.0]
#: pages sampled per cycle for the classifier's training rows
ROWS_PER_CYCLE = 3000


class Tracker:
    """Per-page state the stores do not keep (a ReplayExtension: the replay calls
    ``fetched`` after every fetch, warm-up included)."""

    def __init__(self, pages: int, weekday: np.ndarray) -> None:
        self.pages = pages
        self.weekday = weekday  # per cycle, Monday = 0
        self.last_visit = np.full(pages, -1, dtype=np.int64)
        self.last_hit = np.full(pages, -1, dtype=np.int64)
        self.prev_hit = np.full(pages, -1, dtype=np.int64)
        self.xd = np.zeros((len(TAUS), pages))
        self.nd = np.zeros((len(TAUS), pages))
        self.updated = np.zeros(pages)
        self.wx = np.zeros((pages, 7))
        self.wn = np.zeros((pages, 7))

    def columns(self, cycle: int) -> dict[str, np.ndarray]:
        return {}

    def fetched(self, idx: Any, hit: np.ndarray, cycle: int) -> None:
        idx = np.arange(self.pages)[idx] if isinstance(idx, slice) else np.asarray(idx)
        hit = np.asarray(hit, dtype=bool)
        lv = self.last_visit[idx]
        obs = lv >= 0  # the first fetch is no observation
        i, h, gap = idx[obs], hit[obs], cycle - lv[obs]
        for j, tau in enumerate(TAUS):
            f = np.exp(-(cycle - self.updated[i]) / tau)
            self.xd[j, i] = self.xd[j, i] * f + h
            self.nd[j, i] = self.nd[j, i] * f + gap
        self.updated[i] = cycle
        share = h / np.maximum(gap, 1)
        for off in range(int(gap.max()) if gap.size else 0):
            m = gap > off
            day = self.weekday[cycle - off]
            self.wn[i[m], day] += 1.0
            self.wx[i[m], day] += share[m]
        hi = i[h]
        self.prev_hit[hi] = self.last_hit[hi]
        self.last_hit[hi] = cycle
        self.last_visit[idx] = cycle


def group_cochange(state: dict[str, np.ndarray], cycle: int) -> dict[str, np.ndarray]:
    """From stored columns: other pages of the group seen changed since each page's
    last visit (count, share) and the group's share seen changed in the last cycle."""
    g = np.asarray(state["group"], dtype=np.int64)
    lc = np.asarray(state["last_change_cycle"], dtype=np.int64) + 1  # >= 0
    lv = np.asarray(state["last_visit_cycle"], dtype=np.int64) + 1
    big = int(cycle) + 4
    keys = np.sort(g * big + lc)
    pos = np.searchsorted(keys, g * big + lv, side="right")
    end = np.searchsorted(keys, g * big + big - 1, side="right")
    co = (end - pos).astype(np.float64)  # lc <= lv for the page itself: never counted
    size = np.bincount(g).astype(np.float64)[g]
    recent = np.bincount(g, weights=(lc >= cycle).astype(np.float64))[g]  # changed at cycle-1
    return {
        "co": co,
        "co_share": co / np.maximum(size - 1.0, 1.0),
        "grp_recent": recent / size,
    }


def features(
    state: dict[str, np.ndarray], cycle: int, tr: Tracker, want: tuple[str, ...]
) -> dict[str, np.ndarray]:
    term = core_registry().compute(state, cycle, needed=(*BASE, "tc"))
    out = {k: term[k] for k in BASE}
    if "tc" in want:
        out["tc"] = term["tc"]
        out["tc_at_visit"] = term["tc"] - term["t"]
    if "interval" in want:
        known = tr.prev_hit >= 0
        last = np.where(known, tr.last_hit - tr.prev_hit, np.nan).astype(np.float64)
        out["last_interval"] = last
        out["tc_over_interval"] = term["tc"] / last
    if "weekday" in want:
        day = int(tr.weekday[cycle])
        out["weekday"] = np.full(tr.pages, float(day))
        total = tr.wx.sum(axis=1)
        out["weekday_share"] = (tr.wx[:, day] + 1.0 / 7.0) / (total + 1.0)
        out["weekday_rate"] = (tr.wx[:, day] + 0.05) / (tr.wn[:, day] + 10.0)
    if "group" in want:
        out.update(group_cochange(state, cycle))
    if "decay" in want:
        for j, tau in enumerate(TAUS):
            f = np.exp(-(cycle - tr.updated) / tau)
            out[f"decay{int(tau)}"] = (tr.xd[j] * f + 0.5) / (tr.nd[j] * f + 100.0)
    return out


def weekdays(days: np.ndarray) -> np.ndarray:
    return ((np.asarray(days, dtype="datetime64[D]").astype(np.int64) + 3) % 7).astype(np.int64)


def _cgp_t(state: dict[str, np.ndarray], cycle: int) -> dict[str, np.ndarray]:
    return core_registry().compute(state, cycle, needed=("CGp", "t", "tc"))


def burst_policy(beta: float, tau: float) -> Any:
    def select(state: dict[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        term = _cgp_t(state, cycle)
        t, tc = term["t"], term["tc"]
        a = tc - t
        seen = np.asarray(state["last_change_cycle"]) >= 0
        extra = beta * tau * (np.exp(-a / tau) - np.exp(-tc / tau)) * seen
        return top_k_indices(term["CGp"] * (t + extra), k)

    select.__name__ = f"burst(beta={beta:g},tau={tau:g})"
    return select


def cochange_policy(gamma: float) -> Any:
    def select(state: dict[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        term = _cgp_t(state, cycle)
        share = group_cochange(state, cycle)["co_share"]
        return top_k_indices(term["CGp"] * term["t"] * (1.0 + gamma * share), k)

    select.__name__ = f"cochange(gamma={gamma:g})"
    return select


def _share(changes: np.ndarray, policy: Any, groups: np.ndarray, oracle: float, **kw: Any) -> float:
    r = simulate(changes, policy, groups=groups, **KW, **kw)
    return r.mean_change_rate / oracle


def _fit_grid(
    fit: np.ndarray, check: np.ndarray, groups: np.ndarray, grid: list[Any], make: Any
) -> tuple[str, float]:
    """The grid point best on the first half, and its share on the second."""
    o_fit = simulate(fit, ORACLE, **KW).mean_change_rate
    scores = [_share(fit, make(*np.atleast_1d(p)), groups, o_fit) for p in grid]
    best = grid[int(np.argmax(scores))]
    o_check = simulate(check, ORACLE, **KW).mean_change_rate
    pol = make(*np.atleast_1d(best))
    return pol.__name__, _share(check, pol, groups, o_check)


def _collect(fit: np.ndarray, groups: np.ndarray, wd: np.ndarray, rng: Any) -> tuple[Any, Any]:
    """Feature rows (every set's columns) and labels from a cg+ replay of the first half."""
    pages = fit.shape[0]
    cum = np.concatenate([np.zeros((pages, 1), np.int64), np.cumsum(fit, axis=1)], axis=1)
    tr = Tracker(pages, wd)
    rows: list[dict[str, np.ndarray]] = []
    labels: list[np.ndarray] = []

    def select(state: dict[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        feats = features(state, cycle, tr, SETS)
        lv = np.asarray(state["last_visit_cycle"])
        stale = cum[:, cycle + 1] - cum[np.arange(pages), lv + 1] > 0
        take = rng.choice(pages, min(pages, ROWS_PER_CYCLE), replace=False)
        rows.append({k2: v[take] for k2, v in feats.items()})
        labels.append(stale[take])
        return top_k_indices(feats["CGp"] * feats["t"], k)

    simulate(fit, select, groups=groups, extension=tr, **KW)
    names = list(rows[0])
    x = {n: np.concatenate([r[n] for r in rows]) for n in names}
    return x, np.concatenate(labels)


def _columns(feature_set: str, names: list[str]) -> list[str]:
    extra = {
        "tc": ["tc", "tc_at_visit"],
        "interval": ["last_interval", "tc_over_interval"],
        "weekday": ["weekday", "weekday_share", "weekday_rate"],
        "group": ["co", "co_share", "grp_recent"],
        "decay": [f"decay{int(t)}" for t in TAUS],
    }
    if feature_set == "base":
        return list(BASE)
    if feature_set == "all":
        return [n for n in names]
    return [*BASE, *extra[feature_set]]


def _gbm_share(
    fit: np.ndarray, check: np.ndarray, groups: np.ndarray, wd: tuple[np.ndarray, np.ndarray]
) -> dict[str, float]:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    x, y = _collect(fit, groups, wd[0], rng)
    names = list(x)
    o_check = simulate(check, ORACLE, **KW).mean_change_rate
    out = {}
    for fs in SETS:
        cols = _columns(fs, names)
        model = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, random_state=0)
        model.fit(np.column_stack([x[c] for c in cols]), y)
        tr = Tracker(check.shape[0], wd[1])

        def select(state: dict[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
            f = features(state, cycle, tr, SETS if fs == "all" else (fs,))  # noqa: B023
            p = model.predict_proba(np.column_stack([f[c] for c in cols]))[:, 1]  # noqa: B023
            # a tree's probabilities tie in large blocks (every quiet page alike):
            # ties are broken by cg+'s score, not by page order
            return np.lexsort((-(f["CGp"] * f["t"]), -p))[:k]

        r = simulate(check, select, groups=groups, extension=tr, **KW)
        out[f"gbm:{fs}"] = r.mean_change_rate / o_check
    return out


def study(path: str) -> tuple[str, dict[str, float], dict[str, str]]:
    with np.load(path, allow_pickle=False) as data:
        changes = np.asarray(data["changes"])
        wd = weekdays(data["days"])
    groups = load_groups(path)
    half = changes.shape[1] // 2
    fit, check = changes[:, :half], changes[:, half:]
    o_fit = simulate(fit, ORACLE, **KW).mean_change_rate
    o_check = simulate(check, ORACLE, **KW).mean_change_rate
    presets = list(replayable_presets())
    first = {p: simulate(fit, p, groups=groups, **KW).mean_change_rate / o_fit for p in presets}
    second = {
        p: simulate(check, p, groups=groups, **KW).mean_change_rate / o_check for p in presets
    }
    pick = max(first, key=first.__getitem__)
    hind = max(second, key=second.__getitem__)
    row = {
        "cg+": second["cg+"],
        "aad+": second["aad+"],
        "first-half pick": second[pick],
        "hindsight": second[hind],
    }
    chosen = {"first-half pick": pick, "hindsight": hind}
    chosen["burst"], row["burst"] = _fit_grid(fit, check, groups, BURST_GRID, burst_policy)
    chosen["cochange"], row["cochange"] = _fit_grid(
        fit, check, groups, COCHANGE_GRID, cochange_policy
    )
    row.update(_gbm_share(fit, check, groups, (wd[:half], wd[half:])))
    return Path(path).stem, row, chosen


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", action="append", help="a change history .npz (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    paths = args.history or sorted(str(p) for p in DATA.glob("*.npz"))
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(study, paths))
    cols = list(results[0][1])
    print("ChangeRate / oracle on the second half (W=2, k=5%), fitted on the first half")
    print()
    print("| history | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, row, _ in results:
        print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    means = {c: float(np.mean([r[1][c] for r in results])) for c in cols}
    print("| mean | " + " | ".join(f"{means[c]:.3f}" for c in cols) + " |")
    print()
    for name, _, chosen in results:
        print(f"{name}: " + ", ".join(f"{k} = {v}" for k, v in chosen.items()))
    print()
    base = means["cg+"]
    print("mean gain over cg+: " + ", ".join(f"{c} {means[c] - base:+.3f}" for c in cols))
    print(f"wall {time.time() - t0:.0f} s, {args.jobs} processes")


if __name__ == "__main__":
    main()
