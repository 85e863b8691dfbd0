"""The crawl's freshness estimate against the site's own truth, per cycle.

    .venv/bin/python bench/freshness_estimate.py [--pages 2000] [--cycles 15]
        [--budget 0.05] [--scorers gp4c] [--seed 1] [--keep DIR | --replay DIR]

For each scorer, the demo's crawl (example_project/demo.py: the example site reset
to day 0, one real ``scrapy crawl site`` per cycle = one simulated day, the add-on
with a store of its own, then the site moves to the next day). After the last cycle,
per cycle:

* **truth**: the true freshness of the known pages at the end of the cycle (every
  truth page fetched at least once, not gone: the share whose last fetched copy is
  current; example_project/truth.py ``known_freshness_by_day``);
* **estimate**: ``recrawl-report``'s figure for the cycle (insight/cycles.py, from the
  store's visit log: scoring/freshness.py's one definition);
* **crawl stat**: ``recrawl/freshness_estimate`` as the next cycle's crawl put it in its
  stats (cycle_summary.py, from the store's columns; the last cycle has none);
* **old**: the estimator before issue 26 (a CG rate over the mean visit interval,
  ``exp(-rate * age)``, over the pages with an observation), on the same log.

and the mean absolute error of each over cycles 3 .. last (the budgeted cycles).
``--keep DIR`` saves each scorer's store, stats and truth there; ``--replay DIR``
recomputes the table from such a directory without crawling.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from example_project import truth  # noqa: E402
from example_project.demo import crawl_cycle, post  # noqa: E402
from example_project.site import RunningSite  # noqa: E402
from scrapy_recrawl.cycle_summary import FRESHNESS_CYCLE_STAT, FRESHNESS_STAT  # noqa: E402
from scrapy_recrawl.history.sqlite import SqliteHistoryStore  # noqa: E402
from scrapy_recrawl.insight.cycles import estimate_by_cycle  # noqa: E402
from scrapy_recrawl.insight.log import VisitLog  # noqa: E402

#: the first cycle of the error's mean: the first budgeted one (W = 2 warm-up cycles)
FIRST_SCORED = 3


def old_estimate(log: VisitLog, cycles: list[int]) -> dict[int, float]:
    """The estimator before issue 26, as recrawl-report computed it (kept here only to
    compare): per URL with an observation, ``CG = -log((n - X + 0.5)/(n + 0.5))`` over
    its mean visit interval ``max((last - first)/n, 1)`` cycles, ``exp(-rate * age)`` at
    the next cycle's start (age ``c + 1 - last``), averaged over those URLs."""
    good = log.good
    url, cyc, obs = log["url_id"][good], log["cycle"][good], log["changed"][good]
    out = {}
    for c in cycles:
        at = cyc <= c
        ids, row = np.unique(url[at], return_inverse=True)
        n = np.bincount(row, weights=(obs[at] >= 0), minlength=ids.size)
        X = np.bincount(row, weights=(obs[at] == 1), minlength=ids.size)
        first = np.full(ids.size, np.iinfo(np.int64).max)
        last = np.full(ids.size, -1)
        np.minimum.at(first, row, cyc[at])
        np.maximum.at(last, row, cyc[at])
        interval = np.maximum((last - first) / np.maximum(n, 1.0), 1.0)
        cg = -np.log((n - X + 0.5) / (n + 0.5))
        p = np.exp(-(cg / interval) * (c + 1 - last))
        seen = n > 0
        out[c] = float(p[seen].mean()) if seen.any() else float("nan")
    return out


def crawl(site: RunningSite, scorer: str, args: argparse.Namespace, out: Path) -> None:
    """The demo's crawl of one scorer; its store, per-cycle stats and truth into ``out``."""
    post(site.base_url + "/_admin/reset")
    out.mkdir(parents=True, exist_ok=True)
    store = str(out / "history.sqlite3")
    stats = []
    for cycle in range(1, args.cycles + 1):
        t0 = time.monotonic()
        stats.append(crawl_cycle(site.base_url, store, scorer, args.budget, args.seed))
        print(f"  {scorer} cycle {cycle:2d}: {time.monotonic() - t0:.1f}s", flush=True)
        if cycle < args.cycles:
            post(site.base_url + "/_admin/advance")
    changes_doc, served_doc = truth.fetch_truth(site.base_url)
    (out / "stats.json").write_text(json.dumps(stats))
    (out / "truth.json").write_text(json.dumps({"changes": changes_doc, "served": served_doc}))


def table(scorer: str, out: Path) -> dict[str, float]:
    stats = json.loads((out / "stats.json").read_text())
    docs = json.loads((out / "truth.json").read_text())
    cycles = list(range(1, len(stats) + 1))
    true = truth.known_freshness_by_day(docs["changes"], docs["served"], [c - 1 for c in cycles])
    crawl_stat = {
        int(s[FRESHNESS_CYCLE_STAT]): float(s[FRESHNESS_STAT])
        for s in stats
        if FRESHNESS_STAT in s and FRESHNESS_CYCLE_STAT in s
    }
    store = SqliteHistoryStore(out / "history.sqlite3", read_only=True)
    store.open()
    try:
        log = VisitLog.read(store)
        new = estimate_by_cycle(store, log, np.asarray(cycles))
    finally:
        store.close()
    old = old_estimate(log, cycles)
    print(f"\n{scorer}: true freshness of the known pages at each cycle's end, and the estimates\n")
    print("| cycle | true | estimate | 90% interval | crawl stat | old estimate |")
    print("|---:|---:|---:|---:|---:|---:|")
    errs: dict[str, list[float]] = {"estimate": [], "crawl stat": [], "old": []}
    for c in cycles:
        t = true[c - 1][0]
        e = new.get(c)
        s = crawl_stat.get(c)
        o = old[c]
        cell = "-" if e is None else f"{e.share:.3f}"
        band = "-" if e is None else f"{e.low:.3f}-{e.high:.3f}"
        print(f"| {c} | {t:.3f} | {cell} | {band} | {'-' if s is None else f'{s:.3f}'} | {o:.3f} |")
        if c >= FIRST_SCORED:
            if e is not None:
                errs["estimate"].append(abs(e.share - t))
            if s is not None:
                errs["crawl stat"].append(abs(s - t))
            errs["old"].append(abs(o - t))
    mae = {k: float(np.mean(v)) if v else float("nan") for k, v in errs.items()}
    worst = {k: float(np.max(v)) if v else float("nan") for k, v in errs.items()}
    print(
        f"\nMAE over cycles {FIRST_SCORED}-{cycles[-1]} (largest error): "
        + ", ".join(f"{k} {mae[k]:.3f} ({worst[k]:.3f})" for k in errs)
    )
    return mae


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--scorers", default="gp4c")
    ap.add_argument("--seed", type=int, default=1)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--keep", type=Path, help="keep each scorer's store, stats and truth")
    where.add_argument("--replay", type=Path, help="the table from a --keep directory")
    args = ap.parse_args(argv)
    scorers = [s.strip() for s in args.scorers.split(",") if s.strip()]
    if args.replay:
        for scorer in scorers:
            table(scorer, args.replay / scorer)
        return
    tmp = Path(tempfile.mkdtemp(prefix="freshness-"))
    base = args.keep or tmp
    try:
        with RunningSite(pages=args.pages, seed=args.seed) as site:
            print(
                f"example site, {args.pages} pages, {args.cycles} cycles, budget "
                f"{args.budget:g}, seed {args.seed}",
                flush=True,
            )
            for scorer in scorers:
                crawl(site, scorer, args, base / scorer)
        for scorer in scorers:
            table(scorer, base / scorer)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
