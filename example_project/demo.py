"""The README's first command: recrawl the example site for 15 simulated days with
three scorers and print how fresh each kept it, scored against the site's ground truth.

    python -m example_project.demo [--pages 2000] [--cycles 15] [--budget 0.05]
                                   [--scorers gp4c,rand,age] [--seed 1]

For each scorer: the site is reset to day 0, then each cycle is one real
``scrapy crawl site`` (cron-style: one run = one cycle = one simulated day)
with the recrawl add-on and a history store of its own, after which the site
moves to the next day. The first RECRAWL_WARMUP_CYCLES (2) cycles fetch every
page, as in the GP4C papers; afterwards each cycle may fetch ``--budget`` of the
known pages. ChangeRate (fetched pages that really had changed since their
previous fetch / pages fetched) and freshness (share of all pages whose copy is
current at the end of the day) come from the site's ground truth, not from our
own change detector. Beside them, per cycle, the crawl's own freshness estimate
(scoring/freshness.py, as recrawl-report shows it) and the truth it estimates: the
freshness of the known pages.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from example_project import truth
from example_project.site import RunningSite

PROJECT_DIR = Path(__file__).resolve().parent
WARMUP = 2


def post(url: str) -> dict:
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def crawl_cycle(
    base_url: str,
    store: str,
    scorer: str,
    budget: float,
    seed: int,
    extra: dict[str, str] | None = None,
) -> dict:
    """One cycle: a real `scrapy crawl site` in the example project, with the add-on on
    (``extra``: more ``-s NAME=VALUE`` settings)."""
    stats_file = store + ".stats.json"
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "site",
        "-a",
        f"start_url={base_url}/",
        "-s",
        f"RECRAWL_STORE={store}",
        "-s",
        f"RECRAWL_SCORER={scorer}",
        "-s",
        # a share as the setting spells it ("5%"); a count as an int
        f"RECRAWL_BUDGET={f'{budget * 100:g}%' if budget < 1 else int(budget)}",
        "-s",
        f"RECRAWL_SEED={seed}",
        "-s",
        "LOG_LEVEL=WARNING",
        "-s",
        f"STATS_DUMP_FILE={stats_file}",
        "-s",
        'EXTENSIONS={"example_project.stats_dump.StatsDump": 0}',
    ]
    for name, value in (extra or {}).items():
        cmd += ["-s", f"{name}={value}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_DIR.parent), str(PROJECT_DIR)])}
    out = subprocess.run(cmd, cwd=PROJECT_DIR, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"scrapy crawl failed ({out.returncode}):\n{out.stderr[-3000:]}")
    with open(stats_file, encoding="utf-8") as fh:
        return json.load(fh)


def run_scorer(site: RunningSite, scorer: str, args: argparse.Namespace, workdir: str) -> dict:
    post(site.base_url + "/_admin/reset")
    store = os.path.join(workdir, f"{scorer}.sqlite3")
    per_cycle = []
    for cycle in range(1, args.cycles + 1):
        t0 = time.monotonic()
        stats = crawl_cycle(site.base_url, store, scorer, args.budget, args.seed)
        per_cycle.append(
            {
                "cycle": cycle,
                "seconds": time.monotonic() - t0,
                "fetched": stats.get("downloader/response_count", 0),
                "detected_changed": stats.get("recrawl/changed", 0),
            }
        )
        if cycle < args.cycles:
            post(site.base_url + "/_admin/advance")
        print(
            f"  {scorer:>6} cycle {cycle:2d}: {per_cycle[-1]['fetched']:5d} responses "
            f"in {per_cycle[-1]['seconds']:.1f}s",
            flush=True,
        )
    changes_doc, served_doc = truth.fetch_truth(site.base_url)
    days = list(range(args.cycles))
    return {
        "score": truth.score(changes_doc, served_doc, first_day=0),
        "cycles": per_cycle,
        "known": truth.known_freshness_by_day(changes_doc, served_doc, days),
        "estimate": estimates(store, args.cycles),
    }


def estimates(store: str, cycles: int) -> dict:
    """The crawl's own freshness estimate at the end of each cycle, as recrawl-report
    shows it (scoring/freshness.py: the figure the crawl puts in its stats)."""
    from scrapy_recrawl.history.sqlite import SqliteHistoryStore
    from scrapy_recrawl.insight.cycles import estimate_by_cycle
    from scrapy_recrawl.insight.log import VisitLog

    history = SqliteHistoryStore(store, read_only=True)
    history.open()
    try:
        return estimate_by_cycle(history, VisitLog.read(history), list(range(1, cycles + 1)))
    finally:
        history.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m example_project.demo", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--scorers", default="gp4c,rand,age")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    scorers = [s.strip() for s in args.scorers.split(",") if s.strip()]
    results = {}
    t0 = time.monotonic()
    with (
        RunningSite(pages=args.pages, seed=args.seed) as site,
        tempfile.TemporaryDirectory() as tmp,
    ):
        print(
            f"example site with {args.pages} pages at {site.base_url}; {args.cycles} cycles "
            f"(= simulated days), budget {args.budget:.0%} of known pages after {WARMUP} "
            "warm-up cycles",
            flush=True,
        )
        for scorer in scorers:
            results[scorer] = run_scorer(site, scorer, args, tmp)
        kept = keep_history(os.path.join(tmp, f"{scorers[0]}.sqlite3"))
    print_table(results, scorers)
    print(f"\n(total {time.monotonic() - t0:.0f}s)")
    print(
        f"\nThe {scorers[0]} crawl's history is kept in {os.path.relpath(kept)}: see what it "
        "learned with\n  cd example_project && ../.venv/bin/scrapy recrawl-report"
    )


#: where the example project's spider keeps its history by default (RECRAWL_STORE unset)
PROJECT_STORE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), ".scrapy", "recrawl", "site", "history.sqlite3"
)


def keep_history(store: str) -> str:
    """Copy the first scorer's history (closed: its crawls are over) to the example
    project's default store, replacing the last demo's, so ``scrapy recrawl-report`` in
    example_project/ reads it with no setting (docs/changes.md)."""
    os.makedirs(os.path.dirname(PROJECT_STORE), exist_ok=True)
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(PROJECT_STORE + suffix):
            os.remove(PROJECT_STORE + suffix)
    src = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    dst = sqlite3.connect(PROJECT_STORE)
    with dst:
        src.backup(dst)  # a consistent copy, whatever the WAL holds
    src.close()
    dst.close()
    return PROJECT_STORE


def print_table(results: dict, scorers: list[str]) -> None:
    print(
        "\nPer cycle, from the site's ground truth (ChangeRate: changed / refetched pages; "
        "freshness: share of pages up to date at the end of the day)\n"
    )
    head = "| cycle | " + " | ".join(f"{s} ChangeRate | {s} freshness" for s in scorers) + " |"
    print(head)
    print("|---:|" + "---:|---:|" * len(scorers))
    days = results[scorers[0]]["score"].days
    for i, day in enumerate(days):
        cells = []
        for s in scorers:
            row = results[s]["score"].days[i]
            rate = "—" if row.change_rate is None else f"{row.change_rate:.3f}"
            cells.append(f"{rate} | {row.freshness:.3f}")
        tag = " (warm-up)" if day.day < WARMUP else ""
        print(f"| {day.day + 1}{tag} | " + " | ".join(cells) + " |")
    print(
        "\nThe crawl's freshness estimate (recrawl-report, the recrawl/freshness_estimate "
        "stat) beside the truth: the share of the known pages (fetched at least once) "
        "whose copy is current at the end of the cycle; in brackets the estimate's 90% "
        "interval\n"
    )
    print("| cycle | " + " | ".join(f"{s} true | {s} estimate" for s in scorers) + " |")
    print("|---:|" + "---:|---:|" * len(scorers))
    errors: dict[str, list[float]] = {s: [] for s in scorers}
    for day in days:
        cells = []
        for s in scorers:
            true = results[s]["known"][day.day][0]
            est = results[s]["estimate"].get(day.day + 1)
            if est is None or est.share != est.share:
                cells.append(f"{true:.3f} | -")
                continue
            cells.append(f"{true:.3f} | {est.share:.3f} ({est.low:.3f}-{est.high:.3f})")
            if day.day >= WARMUP:
                errors[s].append(abs(est.share - true))
        print(f"| {day.day + 1} | " + " | ".join(cells) + " |")
    print(
        "\nMean absolute error of the estimate over the budgeted cycles: "
        + ", ".join(f"{s} {sum(e) / len(e):.3f}" if e else f"{s} -" for s, e in errors.items())
    )
    print("\nMeans over the budgeted cycles (after warm-up):\n")
    print("| scorer | ChangeRate | freshness | ChangeRate vs rand |")
    print("|---|---:|---:|---:|")
    means = {}
    for s in scorers:
        rows = [r for r in results[s]["score"].days if r.day >= WARMUP]
        rates = [r.change_rate for r in rows if r.change_rate is not None]
        cr = sum(rates) / len(rates) if rates else float("nan")
        fr = sum(r.freshness for r in rows) / len(rows) if rows else float("nan")
        means[s] = (cr, fr)
    base = means.get("rand", (float("nan"), 0))[0]
    for s in scorers:
        cr, fr = means[s]
        ratio = f"{cr / base:.2f}x" if base and base == base else "—"
        print(f"| {s} | {cr:.3f} | {fr:.3f} | {ratio} |")


if __name__ == "__main__":
    main()
