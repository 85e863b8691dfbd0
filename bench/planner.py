"""The WebFountain planner: paper-size solve time, and the planner beside the scorers.

    .venv/bin/python bench/planner.py               # both parts
    .venv/bin/python bench/planner.py --solve       # part 1 only
    .venv/bin/python bench/planner.py --replay      # part 2 only
    .venv/bin/python bench/planner.py --solve --plot docs/img/planning.png

Part 1 solves the paper's synthetic set-up at the paper's size (T = 14
periods, B = 255 buckets; scrapy_recrawl.planning.paper_instance) for the
three strategies of its section 5.1, and prints the solve time, the largest
constraint violation, and Table 3 / Figure 4's quantities (objective, pages
and obsolete pages at the end of the cycle, obsolete pages per period) with
the shape of each plan (buckets never crawled, crawled more than once).

Part 2 replays the planner (re-planning every 7 cycles from the bucket
statistics learned so far, 64 buckets, T = 14) on every change matrix in
``../shared/data/changes/*.npz`` and on the example site's own change
history (example_project/site.py, 2000 pages, 120 days), beside the scorers
``aad+`` (the best preset), ``age``, ``rand`` and the ``oracle``, in the
simulator's setting (warm-up W = 2, k = 5% of the pages per cycle): mean
ChangeRate, NDCG@k and freshness.

BLAS threads are pinned to 1: the solver's vectors are small, and on a
busy machine multi-threaded BLAS makes each of its many small products
thousands of times slower.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.commands.plan import format_comparison  # noqa: E402
from scrapy_recrawl.core.simulate import load_changes, simulate  # noqa: E402
from scrapy_recrawl.planning import STRATEGIES, paper_instance, solve_plan  # noqa: E402
from scrapy_recrawl.planning.replay import replay_plan  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
SCORERS = ("aad+", "age", "rand", "oracle")
SITE = "example_site"


def site_changes(pages: int = 2000, days: int = 120, seed: int = 1) -> np.ndarray:
    """The example site's change matrix [page, day] over its truth pages (status 200)."""
    sys.path.insert(0, str(ROOT))
    from example_project.site import SiteModel

    model = SiteModel(pages=pages, seed=seed)
    rows = []
    for i in range(pages):
        if not model.is_truth(i):
            continue
        row = np.zeros(days, dtype=np.uint8)
        d = np.asarray(model.change_days(i, days - 1), dtype=np.int64)
        row[d] = 1
        rows.append(row)
    return np.asarray(rows)


def plot(plans: list, path: Path) -> None:
    """The paper's Figures 3 and 4 for our plans (needs matplotlib, not a dependency)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for p in plans:
        rate = p.change[0]
        left.plot(rate, p.crawls_per_page(), label=p.strategy)
        right.plot(np.arange(1, p.periods + 1), p.obsolete, marker="o", label=p.strategy)
    left.set_xscale("log")
    left.set_xlabel("share of the bucket changing per period (a_i)")
    left.set_ylabel("crawls per page per cycle")
    left.set_title("Crawls per cycle by change rate (cf. Figure 3)")
    left.axhline(1.0, color="grey", lw=0.5)
    right.set_xlabel("period")
    right.set_ylabel("obsolete pages (old obsolete + new waiting)")
    right.set_title("Obsolete pages per period (cf. Figure 4)")
    for ax in (left, right):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle("WebFountain model, paper set-up scaled to 500,000 pages, T = 14, B = 255")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"(plot written to {path})")


def solve_part(plot_path: Path | None = None) -> None:
    inst = paper_instance()
    print(
        "Paper-size solve: T = 14, B = 255 (x, b: 7,140 variables, n, z: 28; y eliminated "
        "by (2)); 500M pages scaled to 500,000; budget 1.5 crawls per page per cycle"
    )
    print()
    plans = []
    print("| strategy | seconds | iterations | solver status | worst violation (pages) |")
    print("|---|---:|---:|---|---:|")
    for s in STRATEGIES:
        t0 = time.perf_counter()
        plan = solve_plan(**inst, weights=s)
        wall = time.perf_counter() - t0
        worst = max(plan.violations().values())
        print(f"| {s} | {wall:.1f} | {plan.iterations} | {plan.status} | {worst:.2e} |")
        plans.append(plan)
    print()
    format_comparison(plans, out=sys.stdout)
    print()
    print("Crawls per page per cycle by change-rate decile of the buckets (0 = slowest):")
    print()
    print("| strategy | " + " | ".join(f"d{d}" for d in range(10)) + " |")
    print("|---|" + "---:|" * 10)
    for p in plans:
        cpp = p.crawls_per_page()
        dec = [cpp[i * len(cpp) // 10 : (i + 1) * len(cpp) // 10].mean() for i in range(10)]
        print(f"| {p.strategy} | " + " | ".join(f"{v:.2f}" for v in dec) + " |")
    if plot_path is not None:
        print()
        plot(plans, plot_path)


def _replay(task: tuple[str, str]) -> tuple[str, str, dict[str, float], float]:
    source, policy = task
    changes = site_changes() if source == SITE else load_changes(source)
    name = SITE if source == SITE else Path(source).stem
    t0 = time.perf_counter()
    if policy in STRATEGIES:
        res, _ = replay_plan(
            changes, policy, warmup=2, k=0.05, periods=14, plan_every=7, n_buckets=64
        )
    else:
        res = simulate(changes, policy, warmup=2, k=0.05, seed=0)
    return name, res.policy, res.summary(), time.perf_counter() - t0


def replay_part(jobs: int) -> None:
    files = sorted(DATA.glob("*.npz")) if DATA.is_dir() else []
    if not files:
        print(f"(no change matrices in {DATA}: only the example site is replayed)")
    sources = [str(f) for f in files] + [SITE]
    policies = (*STRATEGIES, *SCORERS)
    tasks = [(s, p) for s in sources for p in policies]
    with ProcessPoolExecutor(jobs) as ex:
        rows = list(ex.map(_replay, tasks))
    print(
        "Replay: W = 2, k = 5% of the pages per cycle; planner: 64 buckets, T = 14, "
        "re-planned every 7 cycles"
    )
    print()
    print("| dataset | policy | ChangeRate | NDCG | freshness | ChangeRate / oracle | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|")
    by = {(d, p): (s, sec) for d, p, s, sec in rows}
    names = list(dict.fromkeys(d for d, _, _, _ in rows))
    labels = [f"plan:{s}" for s in STRATEGIES] + list(SCORERS)
    for d in names:
        orc = by[(d, "oracle")][0]["change_rate"]
        for p in labels:
            s, sec = by[(d, p)]
            share = s["change_rate"] / orc if orc > 0 else float("nan")
            print(
                f"| {d} | {p} | {s['change_rate']:.4f} | {s['ndcg']:.4f} | {s['freshness']:.4f} "
                f"| {share:.3f} | {sec:.0f} |"
            )
    print()
    print("Mean over the datasets (each weighs the same):")
    print()
    print("| policy | ChangeRate | NDCG | freshness | ChangeRate / oracle |")
    print("|---|---:|---:|---:|---:|")
    for p in labels:
        cr = np.mean([by[(d, p)][0]["change_rate"] for d in names])
        nd = np.mean([by[(d, p)][0]["ndcg"] for d in names])
        fr = np.mean([by[(d, p)][0]["freshness"] for d in names])
        share = np.mean(
            [by[(d, p)][0]["change_rate"] / by[(d, "oracle")][0]["change_rate"] for d in names]
        )
        print(f"| {p} | {cr:.4f} | {nd:.4f} | {fr:.4f} | {share:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solve", action="store_true", help="part 1 only")
    ap.add_argument("--replay", action="store_true", help="part 2 only")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--plot", type=Path, help="write the part-1 figure here (needs matplotlib)")
    args = ap.parse_args()
    both = not (args.solve or args.replay)
    if args.solve or both:
        solve_part(args.plot)
        print()
    if args.replay or both:
        replay_part(args.jobs)


if __name__ == "__main__":
    main()
