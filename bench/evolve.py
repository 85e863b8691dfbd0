"""GP4C (`scrapy recrawl-evolve`): speed against a naive engine, and quality on real histories.

    .venv/bin/python bench/evolve.py                  # speed: the papers' configuration
    .venv/bin/python bench/evolve.py --quality        # quality tables + the Fig. 5 check

**Speed.** The papers' configuration (population 300, 50 generations, 5 seeds,
``all`` terminals, tournament 2, ...) on 20,000 pages x 57 cycles: pages
drawn at random (seed 0, without replacement) from the six histories of
``../shared/data/changes`` (26,139 pages), their first 57 days. Prints the
wall time, and the ratio against a *naive engine*: one independent
``simulate()`` per individual (its expression parsed by ``Scorer.from_spec``,
no caching, no batching), timed in the same run on a random sample of the
individuals the GP kept, and extrapolated to every fitness lookup of the run
(population x generations x seeds). The naive engine breaks score ties by
index as the batched one does (``IndexTieScorer``), so the two fitness values
can be compared; the bench prints how many agree.

**Quality.** ``recrawl-evolve`` on every history (``--history FILE`` to
choose, ``--site`` for the example site's 120-day history from
``example_project/site.py``, as bench/planner.py builds it), trained for
ChangeRate, then for NDCG: the test-fold table (winner, every preset, the
oracle) and the papers' Fig. 5 check (both winners at k = 1% and 5%); at the
end one summary table over all histories. ``--seed-presets`` /
``--no-seed-presets`` (the default) is ``recrawl-evolve``'s option of that name.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.simulate import load_changes, load_groups, simulate  # noqa: E402
from scrapy_recrawl.learn.config import EvolveConfig  # noqa: E402
from scrapy_recrawl.learn.evolve import evolve  # noqa: E402
from scrapy_recrawl.learn.fitness import IndexTieScorer  # noqa: E402
from scrapy_recrawl.learn.search import fold_roles, split_folds  # noqa: E402
from scrapy_recrawl.plugin_terminals import default_registry  # noqa: E402
from scrapy_recrawl.scoring import Scorer  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"


def bench_pages(pages: int, cycles: int, seed: int = 0) -> np.ndarray:
    """``pages`` rows drawn from all shared histories (first ``cycles`` days each)."""
    mats = [load_changes(str(f))[:, :cycles] for f in sorted(DATA.glob("*.npz"))]
    allc = np.concatenate(mats)
    rng = np.random.default_rng(seed)
    if pages <= allc.shape[0]:
        return allc[np.sort(rng.choice(allc.shape[0], pages, replace=False))]
    return allc[np.sort(rng.choice(allc.shape[0], pages, replace=True))]


def speed(args: argparse.Namespace) -> None:
    changes = bench_pages(args.pages, args.cycles)
    config = EvolveConfig(
        population=args.population,
        generations=args.generations,
        seeds=args.seeds,
        terminals="all",
        jobs=args.jobs,
    )
    print(
        f"data: {changes.shape[0]} pages x {changes.shape[1]} cycles drawn from "
        f"{DATA} (mean change rate {changes.mean():.4f}); GP: population "
        f"{config.population}, {config.generations} generations, {config.seeds} seeds, "
        f"terminals all, fitness {config.fitness}, jobs {config.jobs}",
        flush=True,
    )
    t0 = time.perf_counter()
    result = evolve(changes, config, progress=not args.quiet)
    wall = time.perf_counter() - t0
    lookups = config.population * config.generations * config.seeds
    # the naive engine on a sample of the same individuals, same training pages
    folds = split_folds(changes.shape[0], config.folds, config.seed)
    train_f, _v, _t = fold_roles(config.folds)
    train = changes[np.sort(np.concatenate([folds[i] for i in train_f]))]
    pool = [c for c in result.candidates if c.tree is not None]
    sample = random.Random(1).sample(pool, min(args.naive, len(pool)))
    agree = 0
    t1, c1 = time.perf_counter(), time.process_time()
    for cand in sample:
        scorer = IndexTieScorer(
            Scorer.from_spec(cand.expression, prior=config.prior, registry=default_registry())
        )
        r = simulate(train, scorer, warmup=config.warmup, k=config.budget, prior=config.prior)
        agree += abs(r.mean_change_rate - cand.train) <= 1e-12
    naive_each = (time.perf_counter() - t1) / len(sample)
    naive_cpu_each = (time.process_time() - c1) / len(sample)
    naive_total = naive_each * lookups
    naive_cpu_total = naive_cpu_each * lookups
    cpu = result.stats["cpu_seconds"]
    st = result.stats
    print()
    print("| measure | value |")
    print("|---|---:|")
    print(f"| pages x cycles | {changes.shape[0]:,} x {changes.shape[1]} |")
    print(f"| training pages (2 of 5 folds) | {result.pages['train']:,} |")
    print(f"| fitness lookups (population x generations x seeds) | {lookups:,} |")
    print(f"| replays after the cache | {int(st['fitness_replays']):,} |")
    print(f"| cache hit rate | {st['cache_hit_rate']:.1%} |")
    print(f"| whole run, wall (GP + validation + test table) | {wall:.1f} s |")
    print(f"| naive engine, per individual (mean of {len(sample)}) | {naive_each * 1e3:.1f} ms |")
    print(f"| naive engine, all lookups (extrapolated) | {naive_total:.0f} s |")
    print(f"| whole run, CPU (all processes) | {cpu:.1f} s |")
    print(f"| naive engine, CPU per individual | {naive_cpu_each * 1e3:.1f} ms |")
    print(f"| naive engine, CPU for all lookups (extrapolated) | {naive_cpu_total:.0f} s |")
    print(f"| naive fitness == batched fitness | {agree}/{len(sample)} |")
    print()
    print(f"wall time: {wall:.1f} s ({wall / 60:.1f} min; target <= 15 min)")
    print(f"ratio naive / this engine, wall time: {naive_total / wall:.1f}x (target >= 8x)")
    print(f"ratio naive / this engine, CPU time: {naive_cpu_total / cpu:.1f}x")
    print(f"expression: {result.expression}")


def site_changes(pages: int = 2000, days: int = 120, seed: int = 1) -> np.ndarray:
    """The example site's change matrix [page, day] (bench/planner.py's, its truth pages)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from planner import site_changes as make

    return make(pages=pages, days=days, seed=seed)


def quality(args: argparse.Namespace) -> None:
    files = [Path(f) for f in args.history] or (
        [] if args.site and not args.all else sorted(DATA.glob("*.npz"))
    )
    sources: list[tuple[str, object]] = [(p.stem, p) for p in files]
    if args.site:
        sources.append(("example_site", None))
    summary = []
    for name, path in sources:
        changes = site_changes() if path is None else load_changes(str(path))
        groups = None if path is None else load_groups(str(path))  # the pooled priors' groups
        if args.cycles:
            changes = changes[:, : args.cycles]
        runs = {}
        for fitness in ("changerate", "ndcg"):
            config = EvolveConfig(
                population=args.population,
                generations=args.generations,
                seeds=args.seeds,
                terminals=args.terminals,
                fitness=fitness,
                selection=args.selection,
                jobs=args.jobs,
                seed_presets=args.seed_presets,
            )
            t0 = time.perf_counter()
            runs[fitness] = evolve(
                changes, config, progress=not args.quiet, source=str(path), groups=groups
            )
            runs[fitness].seconds = time.perf_counter() - t0
        res = runs["changerate"]
        print(f"\n### {name}: {changes.shape[0]} pages x {changes.shape[1]} cycles\n")
        print(
            f"trained for ChangeRate in {res.seconds:.0f} s (population {args.population}, "
            f"{args.generations} generations, {args.seeds} seeds, terminals {args.terminals}, "
            f"selection {args.selection}, seed presets {'on' if args.seed_presets else 'off'})\n"
        )
        print(res.table())
        rows = {label: cr for label, _e, cr, _n, _f, _s in res.rows()}
        presets = {k: v for k, v in rows.items() if k not in ("winner", "oracle")}
        best_name = max(presets, key=presets.get)
        verdict = "beats" if rows["winner"] > presets[best_name] else "does NOT beat"
        print(
            f"\nwinner ChangeRate {rows['winner']:.4f} {verdict} the best preset "
            f"({best_name} {presets[best_name]:.4f}); winner / oracle = "
            f"{rows['winner'] / rows['oracle']:.3f}"
        )
        print(f"expression: {res.expression}")
        # Fig. 5: both winners at smaller k (trained at k = 5%)
        folds = split_folds(changes.shape[0], res.config.folds, res.config.seed)
        test = changes[folds[fold_roles(res.config.folds)[2]]]
        print("\nFig. 5 check (test fold; both trained at k = 5%):\n")
        print("| trained for | k | ChangeRate | NDCG |")
        print("|---|---:|---:|---:|")
        out = {}
        for fitness, r in runs.items():
            for k in (0.01, 0.05):
                s = Scorer.from_spec(
                    r.expression, prior=r.config.prior, registry=default_registry()
                )
                rr = simulate(test, s, warmup=2, k=k, prior=r.config.prior)
                out[(fitness, k)] = (rr.mean_change_rate, rr.mean_ndcg)
                print(f"| {fitness} | {k:.0%} | {rr.mean_change_rate:.4f} | {rr.mean_ndcg:.4f} |")
        nd, cr = out[("ndcg", 0.01)], out[("changerate", 0.01)]
        holds = nd[0] > cr[0]
        print(
            f"\nk = 1%: ndcg-trained ChangeRate {nd[0]:.4f} vs changerate-trained {cr[0]:.4f}: "
            f"claim {'holds' if holds else 'does NOT hold'}"
            f" (ndcg-trained expression: {runs['ndcg'].expression})",
            flush=True,
        )
        fig5 = "tie" if nd[0] == cr[0] else ("yes" if holds else "no")
        beats = (
            "tie"
            if rows["winner"] == presets[best_name]
            else ("yes" if rows["winner"] > presets[best_name] else "no")
        )
        summary.append(
            f"| {name} | {rows['winner']:.4f} | {best_name} {presets[best_name]:.4f} | "
            f"{rows['winner'] / rows['oracle']:.3f} | {beats} | "
            f"{fig5} ({nd[0]:.4f} vs {cr[0]:.4f}) | {res.seconds + runs['ndcg'].seconds:.0f} s |"
        )
    print("\n## summary (test fold, k = 5%, ChangeRate)\n")
    print(
        "| history | winner | best preset | winner / oracle | beats every preset | "
        "NDCG-trained beats ChangeRate-trained at k = 1% (Fig. 5) | both runs, wall |"
    )
    print("|---|---:|---|---:|---|---|---:|")
    for line in summary:
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quality", action="store_true", help="quality tables instead of speed")
    ap.add_argument("--history", action="append", default=[], help="(quality) .npz file(s)")
    ap.add_argument("--pages", type=int, default=20000)
    ap.add_argument("--cycles", type=int, default=None)
    ap.add_argument("--population", type=int, default=300)
    ap.add_argument("--generations", type=int, default=50)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--naive", type=int, default=30, help="individuals timed on the naive engine")
    ap.add_argument("--site", action="store_true", help="(quality) the example site's history")
    ap.add_argument(
        "--all", action="store_true", help="(quality) with --site: the shared histories too"
    )
    ap.add_argument("--terminals", default="all", help="(quality) terminal set")
    ap.add_argument("--selection", default="best", help="(quality) final selection")
    ap.add_argument(
        "--seed-presets",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="(quality) presets in the initial population (recrawl-evolve's option)",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    if args.quality:
        quality(args)
    else:
        args.cycles = args.cycles or 57
        speed(args)


if __name__ == "__main__":
    main()
