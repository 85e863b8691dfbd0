"""Self-training: what a user gets from ``recrawl-evolve`` on a site's own history.

    .venv/bin/python bench/selftrain.py                          # fitness changerate
    .venv/bin/python bench/selftrain.py --fitness freshness
    .venv/bin/python bench/selftrain.py --fitness changerate:0.5,freshness:0.5
    .venv/bin/python bench/selftrain.py --quick --history FILE.npz --no-site   # a smoke run

For each history (the six of ``../shared/data/changes/*.npz`` and the example site's
120-day history, ``example_project/site.py`` as bench/planner.py builds it; or the
``--history`` files), ``recrawl-evolve`` runs on the **first half of the days** (its
own folds, validation, preset guard: learn/evolve.py; population 100, 15 generations,
2 GP seeds by default, as the issue measured), once per bench seed (``--seeds``, at
least 3: the spread of what a user gets). The expression it returns (learned, or the
preset the guard kept) then crawls the **second half** (5% of the pages per day),
beside every preset the replay can run (learn/config.py ``replayable_presets``:
scoring/presets.py iterated, so new presets appear here by themselves) and the oracle.

``--start warm`` (the default) is what a user gets: the first half was crawled with
the default scorer (``RECRAWL_SCORER``, ``aad+``), so when the learned scorer (or a
preset, or the oracle) takes over at the half it finds a store that already holds the
first half's observations (``simulate(..., handover=half, before=default)``).
``--start cold`` replays the second half alone, from an empty store (the warm-up, then
the budget): every scorer must learn each page's rate again from nothing.

Printed: one table per history (ChangeRate as a share of the oracle's, NDCG,
freshness; the learned scorer as mean ± sd over the seeds), then one summary table
(per history and the mean: the learned scorer against the best preset for the
fitness), and one machine-readable last line::

    summary: fitness=<f> histories=<n> seeds=<s> learned_share=<mean> learned_freshness=<mean> ...

Runs in parallel processes (``--jobs``, default 2): one task per (history, seed), and
one per history for the presets.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.simulate import (  # noqa: E402
    ORACLE,
    load_changes,
    load_groups,
    simulate,
)
from scrapy_recrawl.learn.config import (  # noqa: E402
    VALIDATION,
    EvolveConfig,
    fitness_weights,
    replayable_presets,
)
from scrapy_recrawl.learn.evolve import evolve  # noqa: E402
from scrapy_recrawl.learn.fitness import replay_fitness  # noqa: E402
from scrapy_recrawl.settings import DEFAULTS  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
SITE = "example_site"
METRICS = ("share", "ndcg", "freshness")
#: the presets whose freshness the summary shows beside the learned scorer's (those of
#: them scoring/presets.py has: the issue's bar for --fitness freshness)
FRESHNESS_REFERENCES = ("age", "nutch", "chogm", "lambdacrawl")


def site_changes() -> np.ndarray:
    """The example site's change matrix [page, day] (bench/planner.py's)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from planner import site_changes as make

    return np.asarray(make(pages=2000, days=120, seed=1))


def history(source: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The change matrix and the pages' ``group`` column (the pooled priors' groups: each
    page name's directory; the example site's matrix has no names: one group)."""
    if source == SITE:
        return site_changes(), None
    return load_changes(source), load_groups(source)


def halves(changes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = changes.shape[1] // 2
    return changes[:, :half], changes[:, half:]


#: the scorer that crawled the first half before a warm start's hand-over
DEFAULT_SCORER = str(DEFAULTS["RECRAWL_SCORER"])


def second_half(changes: np.ndarray, start: str, **kw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """The matrix to replay and the replay's arguments for the second half: all the
    days, handed over at the half after the default scorer crawled the first (warm), or
    the second half's days alone (cold)."""
    kw = {"warmup": 2, "k": 0.05, **kw}
    if start == "cold":
        return halves(changes)[1], kw
    return changes, {**kw, "handover": changes.shape[1] // 2, "before": DEFAULT_SCORER}


def _metrics(result: Any, oracle_cr: float) -> dict[str, float]:
    return {
        "share": result.mean_change_rate / oracle_cr if oracle_cr > 0 else float("nan"),
        "ndcg": result.mean_ndcg,
        "freshness": result.mean_freshness,
        "changerate": result.mean_change_rate,
    }


def _presets_task(task: tuple[str, int, str]) -> tuple[str, dict[str, dict[str, float]]]:
    """Every preset and the oracle on the second half of one history."""
    source, budget_seed, start = task
    changes, groups = history(source)
    check, kw = second_half(changes, start, seed=budget_seed, groups=groups)
    oracle = simulate(check, ORACLE, **kw)
    out = {}
    for name in (*replayable_presets(), ORACLE):
        r = oracle if name == ORACLE else simulate(check, name, **kw)
        out[name] = _metrics(r, oracle.mean_change_rate)
    return source, out


def _learn_task(task: tuple[str, int, str, dict[str, Any]]) -> tuple[str, int, dict[str, Any]]:
    """``recrawl-evolve`` on the first half, its returned expression on the second."""
    source, seed, start, params = task
    changes, groups = history(source)
    fit, _ = halves(changes)
    config = EvolveConfig(**params, seed=seed, jobs=1)
    t0 = time.process_time()
    result = evolve(fit, config, progress=False, baselines=(ORACLE,), groups=groups)
    check, kw = second_half(changes, start, seed=seed, groups=groups)
    oracle = simulate(check, ORACLE, **kw)
    learned = simulate(check, result.expression, **kw)
    return (
        source,
        seed,
        {
            **_metrics(learned, oracle.mean_change_rate),
            "fitness": replay_fitness(config.fitness, learned),
            "expression": result.expression,
            "returned_preset": result.returned_preset,
            "cpu_seconds": time.process_time() - t0,
        },
    )


def _fmt(values: list[float]) -> str:
    a = np.asarray(values, dtype=np.float64)
    sd = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return f"{a.mean():.3f} ± {sd:.3f}"


def _preset_fitness(fitness: str, m: dict[str, float]) -> float:
    """A preset's fitness from its second-half means (a mix is linear in the means)."""
    w = fitness_weights(fitness)
    return float(sum(weight * m[metric] for metric, weight in w.items()))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fitness", default="changerate", help="as recrawl-evolve's --fitness")
    ap.add_argument("--history", action="append", default=[], metavar="FILE.npz")
    ap.add_argument("--no-site", action="store_true", help="leave out the example site")
    ap.add_argument("--population", type=int, default=100)
    ap.add_argument("--generations", type=int, default=15)
    ap.add_argument("--gp-seeds", type=int, default=2, help="recrawl-evolve's --seeds")
    ap.add_argument("--seeds", type=int, default=3, help="bench seeds (mean ± sd over them)")
    ap.add_argument("--validation", choices=VALIDATION, default="time")
    ap.add_argument("--terminals", default="all")
    ap.add_argument(
        "--seed-presets", action=argparse.BooleanOptionalAction, default=True, help="as evolve's"
    )
    ap.add_argument(
        "--start",
        choices=("warm", "cold"),
        default="warm",
        help="warm: the second half continues the default scorer's crawl of the first "
        "(a user's store); cold: the second half replayed from an empty store",
    )
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: population 12, 2 generations, 1 GP seed, 2 bench seeds",
    )
    args = ap.parse_args(argv)
    try:
        fitness_weights(args.fitness)
    except ValueError as exc:
        ap.error(str(exc))
    if args.quick:
        args.population, args.generations, args.gp_seeds, args.seeds = 12, 2, 1, 2
    sources = [str(Path(f)) for f in args.history] or [str(f) for f in sorted(DATA.glob("*.npz"))]
    if not args.no_site:
        sources.append(SITE)
    params = {
        "population": args.population,
        "generations": args.generations,
        "seeds": args.gp_seeds,
        "fitness": args.fitness,
        "terminals": args.terminals,
        "validation": args.validation,
        "seed_presets": args.seed_presets,
        "keep_best": min(50, args.population),
    }
    EvolveConfig(**params).check()
    t0 = time.perf_counter()
    learn_tasks = [(s, seed, args.start, params) for s in sources for seed in range(args.seeds)]
    with ProcessPoolExecutor(max(1, args.jobs)) as ex:
        preset_futs = [ex.submit(_presets_task, (s, 0, args.start)) for s in sources]
        learn_futs = [ex.submit(_learn_task, t) for t in learn_tasks]
        presets = dict(f.result() for f in preset_futs)
        learned: dict[str, list[dict[str, Any]]] = {s: [] for s in sources}
        for f in learn_futs:
            s, _seed, row = f.result()
            learned[s].append(row)
    wall = time.perf_counter() - t0

    print(
        f"fitness {args.fitness}; evolve on the first half (population {args.population}, "
        f"{args.generations} generations, {args.gp_seeds} GP seeds, terminals {args.terminals}, "
        f"validation {args.validation}, seed presets {'on' if args.seed_presets else 'off'}, "
        f"preset guard on), crawl the second half (k=5%; "
        + (
            f"taking over from {DEFAULT_SCORER}'s crawl of the first half"
            if args.start == "warm"
            else "a fresh replay, W=2"
        )
        + f"); learned: mean ± sd over {args.seeds} seeds"
    )
    summary_rows = []
    for s in sources:
        name = Path(s).stem
        runs, pre = learned[s], presets[s]
        print()
        print(f"### {name}")
        print()
        print("| scorer | ChangeRate / oracle | NDCG | freshness |")
        print("|---|---:|---:|---:|")
        print(
            f"| learned | {_fmt([r['share'] for r in runs])} | {_fmt([r['ndcg'] for r in runs])} "
            f"| {_fmt([r['freshness'] for r in runs])} |"
        )
        for p, m in pre.items():
            print(f"| {p} | {m['share']:.3f} | {m['ndcg']:.3f} | {m['freshness']:.3f} |")
        kept = [r["returned_preset"] for r in runs if r["returned_preset"]]
        exprs = sorted({r["expression"] for r in runs})
        print()
        print(f"returned: {'; '.join(f'`{e}`' for e in exprs)}")
        if kept:
            print(
                f"the guard returned a preset in {len(kept)}/{len(runs)} seeds ({', '.join(kept)})"
            )
        candidates = {p: m for p, m in pre.items() if p != ORACLE}
        best = max(candidates, key=lambda p: _preset_fitness(args.fitness, candidates[p]))
        lf = np.array([r["fitness"] for r in runs])
        sd = float(lf.std(ddof=1)) if lf.size > 1 else 0.0
        bf = _preset_fitness(args.fitness, candidates[best])
        summary_rows.append(
            {
                "name": name,
                "share": [r["share"] for r in runs],
                "freshness": [r["freshness"] for r in runs],
                "ndcg": [r["ndcg"] for r in runs],
                "best": best,
                "best_share": candidates[best]["share"],
                "best_freshness": candidates[best]["freshness"],
                "references": {
                    p: candidates[p]["freshness"] for p in FRESHNESS_REFERENCES if p in candidates
                },
                "at_least": bool(lf.mean() + sd >= bf),
                "kept": len(kept),
            }
        )
    print()
    print(f"### Summary (fitness {args.fitness})")
    print()
    refs = [p for p in FRESHNESS_REFERENCES if all(p in r["references"] for r in summary_rows)]
    print(
        "| history | learned CR / oracle | learned NDCG | learned freshness | best preset "
        "(for the fitness) | its CR / oracle | its freshness | "
        + "".join(f"{p} freshness | " for p in refs)
        + "learned >= best within sd | guard kept a preset |"
    )
    print("|---|---:|---:|---:|---|---:|---:|" + "---:|" * len(refs) + "---|---:|")
    for r in summary_rows:
        print(
            f"| {r['name']} | {_fmt(r['share'])} | {_fmt(r['ndcg'])} | {_fmt(r['freshness'])} "
            f"| {r['best']} | {r['best_share']:.3f} | {r['best_freshness']:.3f} | "
            + "".join(f"{r['references'][p]:.3f} | " for p in refs)
            + f"{'yes' if r['at_least'] else 'no'} | {r['kept']}/{args.seeds} |"
        )
    share = [float(np.mean(r["share"])) for r in summary_rows]
    fresh = [float(np.mean(r["freshness"])) for r in summary_rows]
    best_share = [r["best_share"] for r in summary_rows]
    best_fresh = [r["best_freshness"] for r in summary_rows]
    print(
        f"| mean | {np.mean(share):.3f} | {np.mean([np.mean(r['ndcg']) for r in summary_rows]):.3f} "
        f"| {np.mean(fresh):.3f} | | {np.mean(best_share):.3f} | {np.mean(best_fresh):.3f} | "
        + "".join(f"{np.mean([r['references'][p] for r in summary_rows]):.3f} | " for p in refs)
        + f"{sum(r['at_least'] for r in summary_rows)}/{len(summary_rows)} | |"
    )
    cpu = sum(r["cpu_seconds"] for rows in learned.values() for r in rows)
    print()
    print(f"wall {wall:.0f} s, evolve CPU {cpu:.0f} s, {args.jobs} processes")
    print(
        f"summary: fitness={args.fitness} start={args.start} histories={len(summary_rows)} "
        f"seeds={args.seeds} "
        f"learned_share={np.mean(share):.4f} learned_freshness={np.mean(fresh):.4f} "
        f"best_preset_share={np.mean(best_share):.4f} "
        f"best_preset_freshness={np.mean(best_fresh):.4f} "
        f"at_least_best_preset={sum(r['at_least'] for r in summary_rows)}/{len(summary_rows)}"
    )


if __name__ == "__main__":
    main()
