"""Replay every scoring preset on the shared real change histories.

    .venv/bin/python bench/replay_presets.py            # the preset table
    .venv/bin/python bench/replay_presets.py --grid     # + the prior grid used to pick DEFAULT_PRIOR

Data: ``../shared/data/changes/*.npz`` beside the repository (array
``changes``, uint8 [pages, days]; see that directory's README, section 1).
Simulation as in GP4C: warm-up W=2 cycles (days), then k = 5% of the pages
per day (scrapy_recrawl.core.simulate). Prints one row per dataset and
scorer: mean ChangeRate, NDCG@k, freshness, and ChangeRate as a share of the
oracle's; then the mean of each over the datasets.

``--grid`` replays the smoothed presets for every prior (a, b) of a grid, on
the first half of every history (days 0..D/2, "fit") and on the second half
("check"), and prints the mean ChangeRate/oracle over the datasets; the
default prior is the best on the fit halves, and the check column shows
whether that choice holds on data it was not picked on.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.simulate import load_changes, simulate  # noqa: E402
from scrapy_recrawl.learn.config import replayable_presets  # noqa: E402
from scrapy_recrawl.scoring import DEFAULT_PRIOR, SMOOTHED_PRESETS  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
#: every preset a change matrix can replay (scoring/presets.py iterated: new ones too)
POLICIES = (*replayable_presets(), "oracle")
GRID_A = (0.05, 0.1, 0.25, 0.5, 1.0)
GRID_B = (1.0, 2.0, 5.0, 20.0, 100.0, 1000.0)


def _run(args: tuple[str, str, tuple[float, float] | None, int, int | None]) -> tuple:
    path, policy, prior, start, stop = args
    changes = load_changes(path)[:, start:stop]
    r = simulate(changes, policy, warmup=2, k=0.05, seed=0, prior=prior)
    return (
        Path(path).stem,
        policy,
        prior,
        start,
        r.mean_change_rate,
        r.mean_ndcg,
        r.mean_freshness,
    )


def preset_table(files: list[Path], jobs: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    tasks = [(str(f), p, None, 0, None) for f in files for p in POLICIES]
    with ProcessPoolExecutor(jobs) as ex:
        rows = list(ex.map(_run, tasks))
    res = {(d, p): (cr, nd, fr) for d, p, _, _, cr, nd, fr in rows}
    print(f"prior for the '+' presets: (a, b) = {DEFAULT_PRIOR}; W=2, k=5% of pages, seed 0")
    print()
    print("| dataset | scorer | ChangeRate | NDCG | freshness | ChangeRate / oracle |")
    print("|---|---|---:|---:|---:|---:|")
    for f in files:
        d = f.stem
        orc = res[(d, "oracle")][0]
        for p in POLICIES:
            cr, nd, fr = res[(d, p)]
            print(f"| {d} | {p} | {cr:.4f} | {nd:.4f} | {fr:.4f} | {cr / orc:.3f} |")
    print()
    print("Mean over the datasets (each dataset weighs the same):")
    print()
    print(
        "| scorer | ChangeRate | NDCG | freshness | ChangeRate / oracle | beats age and rand on CR/oracle in |"
    )
    print("|---|---:|---:|---:|---:|---|")
    names = [f.stem for f in files]
    for p in POLICIES:
        cr = np.mean([res[(d, p)][0] for d in names])
        nd = np.mean([res[(d, p)][1] for d in names])
        fr = np.mean([res[(d, p)][2] for d in names])
        share = np.mean([res[(d, p)][0] / res[(d, "oracle")][0] for d in names])
        wins = sum(res[(d, p)][0] > max(res[(d, "age")][0], res[(d, "rand")][0]) for d in names)
        print(
            f"| {p} | {cr:.4f} | {nd:.4f} | {fr:.4f} | {share:.3f} | {wins}/{len(names)} datasets |"
        )
    return res


def grid(files: list[Path], jobs: int) -> None:
    priors = [(a, b) for a in GRID_A for b in GRID_B if a < b]
    tasks = []
    for f in files:
        days = load_changes(str(f)).shape[1]
        half = days // 2
        for start, stop in ((0, half), (half, None)):
            tasks.append((str(f), "oracle", None, start, stop))
            for p in SMOOTHED_PRESETS:
                for prior in priors:
                    tasks.append((str(f), p, prior, start, stop))
    with ProcessPoolExecutor(jobs) as ex:
        rows = list(ex.map(_run, tasks, chunksize=4))
    names = [f.stem for f in files]
    orc = {(d, s): cr for d, p, _, s, cr, _, _ in rows if p == "oracle"}
    share: dict[tuple[str, tuple[float, float], int], list[float]] = {}
    fresh: dict[tuple[str, tuple[float, float], int], list[float]] = {}
    for d, p, prior, s, cr, _nd, fr in rows:
        if p == "oracle":
            continue
        share.setdefault((p, prior, s), []).append(cr / orc[(d, s)])
        fresh.setdefault((p, prior, s), []).append(fr)
    fit_start = 0
    print()
    print(
        "Prior grid: mean ChangeRate/oracle over the datasets "
        f"({len(names)}), fit = first half of each history, check = second half"
    )
    print()
    print("| scorer | a | b | fit CR/oracle | check CR/oracle | fit freshness | check freshness |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    best: dict[str, tuple[float, tuple[float, float]]] = {}
    for p in SMOOTHED_PRESETS:
        for prior in priors:
            fit = float(np.mean(share[(p, prior, fit_start)]))
            chk = float(
                np.mean(
                    [
                        v
                        for (q, pr, s), vals in share.items()
                        if q == p and pr == prior and s
                        for v in vals
                    ]
                )
            )
            ffit = float(np.mean(fresh[(p, prior, fit_start)]))
            fchk = float(
                np.mean(
                    [
                        v
                        for (q, pr, s), vals in fresh.items()
                        if q == p and pr == prior and s
                        for v in vals
                    ]
                )
            )
            print(
                f"| {p} | {prior[0]:g} | {prior[1]:g} | {fit:.4f} | {chk:.4f} | {ffit:.4f} | {fchk:.4f} |"
            )
            if p not in best or fit > best[p][0]:
                best[p] = (fit, prior)
    print()
    print("Best prior per scorer on the fit halves:")
    for p, (fit, prior) in best.items():
        print(f"  {p}: a={prior[0]:g}, b={prior[1]:g} (fit CR/oracle {fit:.4f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--grid", action="store_true", help="also run the prior grid")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument(
        "--data", type=Path, default=DATA, help=f"directory of .npz files (default {DATA})"
    )
    args = ap.parse_args(argv)
    files = sorted(args.data.glob("*.npz")) if args.data.is_dir() else []
    if not files:
        print(
            f"SKIP: no change histories at {args.data} (expected ../shared/data/changes/*.npz "
            "beside the repository; see ../shared/data/README.md)"
        )
        return 0
    t0 = time.perf_counter()
    preset_table(files, args.jobs)
    if args.grid:
        grid(files, args.jobs)
    print()
    print(f"({time.perf_counter() - t0:.0f} s, {len(files)} datasets, numpy {np.__version__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
