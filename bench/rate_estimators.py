"""What a better rate estimate would add where a user's crawl takes over its own store.

    nice .venv/bin/python bench/rate_estimators.py             # the six shared histories
    nice .venv/bin/python bench/rate_estimators.py --jobs 1 --history ../shared/data/changes/scoop_extras.npz

bench/selftrain.py's warm start: the default scorer (``aad+``) crawls the first half of
each shared history (``../shared/data/changes/*.npz``; warm-up W = 2 days, then k = 5%
of the pages a day), then a scorer takes over the store it filled and crawls the second
half (``core/simulate.py``: ``simulate(..., handover=half, before="aad+")``). Every
number is ChangeRate over the second half as a share of the oracle's, the oracle taking
over the same store.

The candidates rank by an expected number of changes since the last visit,
``rate * t``, with other estimates of each page's rate than the presets' per-visit
shares (``NADp``, ``AADp``: changes per observation, whatever the observations' spacing):

* ``per-day``: changes per day observed, ``(X + a)/(span + b)``, ``span`` the days
  between the first and the last visit (from columns the stores keep).
* ``decayed``: the same with every observation weighted by ``exp(-age/T)``: a
  time-decayed count of changes over a time-decayed exposure, for pages whose rate
  drifts. Needs two floats per URL that the stores do not keep (a schema step).
* ``decayed+burst``: ``decayed`` with ``burst``'s aftershocks (the ``burst`` terminal,
  ``tau`` = 2 days): ``rate * (t + beta * burst)``.
* ``interval``: ``burst`` with the last interval between two observed changes ``L``
  (the issue's terminal; needs the cycle of the change before the last, a new store
  column): its score times ``1 + gamma`` once ``tc >= 0.8 L`` (a page that changes
  every ``L`` days is due again), ``gamma`` in {0.5, 2}.
* ``true rate``: each page's own rate over the second half, in hindsight: the best a
  stationary Poisson ranking could do (no user can have it).

The candidates' parameters (``T`` in {30, 90, 180} days, ``beta`` in {0, 4}; ``a = 0.5``,
``b = 10`` days; ``gamma``) are picked per history on the **first half** alone, by the same
take-over one level down (``aad+`` crawls its first quarter, the candidate its second).
Printed: one table, its mean and its ratio to ``aad+`` (the baseline in the same run),
then the parameters picked, and a ``summary:`` line. A few seconds on 2 processes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.selection import with_budget  # noqa: E402
from scrapy_recrawl.core.simulate import ORACLE, load_changes, load_groups, simulate  # noqa: E402
from scrapy_recrawl.scoring import Scorer  # noqa: E402
from scrapy_recrawl.scoring.registry import compute_terminals  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
DEFAULT = "aad+"
PRESETS = ("aad+", "cg+", "burst")
PRIOR = (0.5, 10.0)  # a changes in b days
GRID = [(T, beta) for T in (30.0, 90.0, 180.0) for beta in (0.0, 4.0)]
Select = Callable[[Mapping[str, np.ndarray], int, int], np.ndarray]


class DecayedRate:
    """Per page, a time-decayed count of observed changes and of days observed, folded
    at each fetch the replay records (what a store would keep: two floats per URL).
    ``T = inf``: no decay (``per-day``)."""

    def __init__(self, T: float) -> None:
        self.T = T
        self.last: np.ndarray | None = None  # last_visit_cycle when last followed

    def follow(self, state: Mapping[str, np.ndarray]) -> None:
        last = state["last_visit_cycle"]
        if self.last is None:  # the warm-up's observations, undecayed
            self.changes = state["X"].astype(np.float64)
            self.exposure = (last - state["first_cycle"]).astype(np.float64)
        else:
            f = last != self.last  # fetched in the previous cycle: one more observation
            gap = (last - self.last)[f].astype(np.float64)
            keep = np.exp(-gap / self.T)
            # that fetch saw a change iff it set last_change_cycle to its own cycle
            hit = state["last_change_cycle"][f] == last[f]
            self.changes[f] = self.changes[f] * keep + hit
            self.exposure[f] = self.exposure[f] * keep + gap
        self.last = last.copy()

    def rate(self) -> np.ndarray:
        return (self.changes + PRIOR[0]) / (self.exposure + PRIOR[1])


class PreviousChange:
    """Per page, the cycle of the change before the last observed one (-1: none), as a
    store column would keep it: follows ``last_change_cycle`` from cycle to cycle."""

    def __init__(self) -> None:
        self.last: np.ndarray | None = None

    def follow(self, state: Mapping[str, np.ndarray]) -> None:
        last = state["last_change_cycle"]
        if self.last is None:
            self.previous = np.full(last.shape, -1, dtype=np.int64)
        else:
            moved = last != self.last
            self.previous[moved] = self.last[moved]
        self.last = last.copy()


def _ranked(score: np.ndarray, k: int) -> np.ndarray:
    return np.lexsort((np.arange(score.size), -score))[:k]


def handed_over(
    follow: Callable[[Mapping[str, np.ndarray]], None], pick: Select
) -> tuple[Select, Select]:
    """(before, after) for ``simulate(..., before=, handover=)``: the default scorer's
    picks, then ``pick``'s, with ``follow`` (a candidate's per-URL state) seeing every
    cycle's store on both sides, as a store would fold every visit."""
    default = Scorer.from_spec(DEFAULT)

    def before(state: Mapping[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        follow(state)
        terms = default.terminals(with_budget(state, k), cycle, cycle * 86400.0)
        return default.top_k(terms, k)

    def after(state: Mapping[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        follow(state)
        return pick(state, cycle, k)

    return before, after


def candidate(T: float, beta: float) -> tuple[Select, Select]:
    """``rate * (t + beta * burst)`` with the (decayed) per-day rate."""
    rates = DecayedRate(T)
    needed = ("t", "burst") if beta else ("t",)

    def pick(state: Mapping[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        terms = compute_terminals(state, cycle, needed=needed)  # burst's tau: its default
        extra = beta * terms["burst"] if beta else 0.0
        return _ranked(rates.rate() * (terms["t"] + extra), k)

    return handed_over(rates.follow, pick)


def interval_candidate(gamma: float) -> tuple[Select, Select]:
    """``burst``, raised by ``1 + gamma`` for pages whose last interval between changes
    has (nearly) passed again since their last change."""
    seen = PreviousChange()
    burst = Scorer.from_spec("burst")

    def pick(state: Mapping[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        score = burst.score(burst.terminals(state, cycle, cycle * 86400.0))
        last = state["last_change_cycle"]
        known = (seen.previous >= 0) & (last >= 0)
        due = known & (cycle - last >= 0.8 * (last - seen.previous))
        return _ranked(score * (1.0 + gamma * due), k)

    return handed_over(seen.follow, pick)


def true_rate(changes: np.ndarray, half: int) -> Select:
    """Rank by each page's own change rate over the second half (hindsight) times ``t``."""
    lam = changes[:, half:].mean(axis=1)

    def pick(state: Mapping[str, np.ndarray], cycle: int, k: int) -> np.ndarray:
        return _ranked(lam * (cycle - state["last_visit_cycle"]), k)

    return pick


class Replays:
    """ChangeRate / the oracle's on one matrix, handed over at one cycle from
    ``aad+``; the oracle replayed once."""

    def __init__(self, changes: np.ndarray, handover: int, groups: np.ndarray) -> None:
        self.changes = changes
        self.kw = {"warmup": 2, "k": 0.05, "handover": handover, "groups": groups}
        oracle = simulate(changes, ORACLE, before=DEFAULT, **self.kw)  # type: ignore[arg-type]
        self.oracle = oracle.mean_change_rate

    def share(self, policy: str | Select | tuple[Select, Select]) -> float:
        before, after = policy if isinstance(policy, tuple) else (DEFAULT, policy)
        got = simulate(self.changes, after, before=before, **self.kw)  # type: ignore[arg-type]
        return got.mean_change_rate / self.oracle


def task(source: str) -> tuple[str, dict[str, float], str]:
    changes, groups = load_changes(source), load_groups(source)
    half = changes.shape[1] // 2
    # parameters picked on the first half: aad+ its first quarter, the candidate the rest
    fit, check = Replays(changes[:, :half], half // 2, groups), Replays(changes, half, groups)
    on_fit = {p: fit.share(candidate(*p)) for p in GRID}
    picked = {
        "decayed": max((p for p in GRID if p[1] == 0.0), key=on_fit.__getitem__),
        "decayed+burst": max(GRID, key=on_fit.__getitem__),
    }
    row = {p: check.share(p) for p in PRESETS}
    row["per-day"] = check.share(candidate(np.inf, 0.0))
    for name, params in picked.items():
        row[name] = check.share(candidate(*params))
    gamma = max((0.5, 2.0), key=lambda g: fit.share(interval_candidate(g)))
    row["interval"] = check.share(interval_candidate(gamma))
    row["true rate"] = check.share(true_rate(changes, half))
    chosen = [f"{c} T={T:g} beta={beta:g}" for c, (T, beta) in picked.items()]
    return Path(source).stem, row, "; ".join([*chosen, f"interval gamma={gamma:g}"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--history", action="append", default=[], metavar="FILE.npz")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    sources = [str(Path(f)) for f in args.history] or [str(f) for f in sorted(DATA.glob("*.npz"))]
    with ProcessPoolExecutor(max(1, args.jobs)) as ex:
        results = list(ex.map(task, sources))
    cols = list(results[0][1])
    print(
        "ChangeRate over the second half / the oracle's, taking over aad+'s crawl of the "
        "first half (W=2, k=5%)"
    )
    print()
    print("| history | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, row, _ in results:
        print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    mean = {c: float(np.mean([row[c] for _, row, _ in results])) for c in cols}
    print("| mean | " + " | ".join(f"{mean[c]:.3f}" for c in cols) + " |")
    print("| / aad+ | " + " | ".join(f"{mean[c] / mean[DEFAULT]:.3f}" for c in cols) + " |")
    print()
    for name, _, picked in results:
        print(f"{name}: {picked}")
    print(
        "summary: "
        + " ".join(f"{c.replace(' ', '_')}={mean[c]:.4f}" for c in cols)
        + f" histories={len(results)}"
    )


if __name__ == "__main__":
    main()
