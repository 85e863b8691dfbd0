"""What the add-on costs a crawl: pages/s with and without it, in one run.

    .venv/bin/python bench/crawl_overhead.py [--pages 5000] [--repeat 3]

Serves the example site (``--pages`` pages) from a separate process and crawls
all of it with `scrapy crawl site`:

* baseline: Scrapy's default scheduler, no recrawl middleware (the add-on off);
* add-on, cycle 1: a fresh store (a warm-up cycle: every page fetched, signed,
  stored with its body);
* add-on, cycle 2: the same store again (warm-up: every page recrawled with
  conditional requests and compared).

Runs alternate between the variants; the median of ``--repeat`` runs is
compared. Like for like: before each crawl the site forgets what it served
(``POST /_admin/reset``: its serve log grows by every fetch, and a server holding
tens of thousands of log entries answers more slowly, which charged whichever crawl
ran later, the add-on's, until 2026-11-29), and every other repetition runs the
baseline after the two add-on cycles instead of before them. Target (issue 32): add-on pages/s at least 0.95 of the baseline on both
cycles, with ``--repeat`` 5 or more.

Beside the wall rate it prints the CPU time of each crawl process (user + system,
from ``resource.getrusage(RUSAGE_CHILDREN)``; start-up and the cycle's opening and
closing included) per response, and the add-on's CPU per response over the baseline:
what the add-on adds is CPU, and CPU time is far less disturbed than wall time by
other work on the machine. The crawls run with Python's bytecode cache on, as an
installed package has it (bench/import_cost.py says why).

This machine's speed drifts: the same crawl's rate moves by 10% from one minute to
the next, the baseline's as much as the add-on's. So the ratio is given two ways, and
the target must hold for both: the ratio of the medians, and the median of each
repetition's own ratio (its add-on cycle over the baseline run beside it, minutes
apart: a pair shares the machine's speed of the moment). Beside them, the crawl's own
CPU from ``spider_opened`` to ``spider_closed`` (bench/crawl_probe.py: no start-up,
no imports), and the part of it in Python's garbage collector.

``--hooks`` also times the add-on's entry points inside the crawls (bench/crawl_probe.py:
the middleware's hooks, the scheduler's, the store's flush; the collector's time left
out) and prints where each variant's CPU per response goes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROJECT = REPO / "example_project"
BENCH = REPO / "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reset_site(base: str) -> None:
    """The site forgets what it has served (its log; its clock stays at day 0)."""
    request = urllib.request.Request(base + "/_admin/reset", data=b"", method="POST")
    urllib.request.urlopen(request, timeout=10).read()


def crawl(
    base: str, settings: dict[str, str], workdir: str, hooks: bool = False
) -> tuple[int, float, float, dict[str, Any]]:
    """One ``scrapy crawl``: (responses, elapsed seconds by Scrapy's stats, CPU seconds
    of its process, what bench/crawl_probe.py measured inside it)."""
    reset_site(base)
    stats_file = os.path.join(workdir, "stats.json")
    probe_file = os.path.join(workdir, "probe.json")
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={base}/"]
    for k, v in {
        "LOG_LEVEL": "CRITICAL",
        "STATS_DUMP_FILE": stats_file,
        "EXTENSIONS": json.dumps(
            {"example_project.stats_dump.StatsDump": 0, "crawl_probe.CrawlProbe": 0}
        ),
        "CRAWL_PROBE_FILE": probe_file,
        "CRAWL_PROBE_HOOKS": str(hooks),
        **settings,
    }.items():
        cmd += ["-s", f"{k}={v}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PROJECT), str(BENCH)])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed (module docstring)
    cpu_before = children_cpu()
    subprocess.run(cmd, cwd=PROJECT, env=env, check=True)
    cpu = children_cpu() - cpu_before
    with open(stats_file, encoding="utf-8") as fh:
        stats = json.load(fh)
    with open(probe_file, encoding="utf-8") as fh:
        probe = json.load(fh)
    pages = int(stats.get("downloader/response_count", 0))
    seconds = float(stats.get("elapsed_time_seconds", 0.0))
    return pages, seconds, cpu, probe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--hooks", action="store_true", help="time the add-on's entry points (crawl_probe.py)"
    )
    args = ap.parse_args()
    port = free_port()
    site = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "example_project.site",
            "--port",
            str(port),
            "--pages",
            str(args.pages),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    names = ("baseline", "add-on, cycle 1", "add-on, cycle 2")
    # per variant, one entry per repetition
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpu_per_page: dict[str, list[float]] = {name: [] for name in names}
    crawl_cpu: dict[str, list[float]] = {name: [] for name in names}
    gc_cpu: dict[str, list[float]] = {name: [] for name in names}
    hooks: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    pages_seen: dict[str, int] = {}
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/_admin/day", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeat):
                store = os.path.join(tmp, f"history-{rep}.sqlite3")
                runs = [
                    ("baseline", {"ADDONS": "{}"}),
                    ("add-on, cycle 1", {"RECRAWL_STORE": store}),
                    ("add-on, cycle 2", {"RECRAWL_STORE": store}),
                ]
                if rep % 2:  # the baseline last: no variant always runs first
                    runs = runs[1:] + runs[:1]
                for name, settings in runs:
                    pages, seconds, cpu, probe = crawl(base, settings, tmp, args.hooks)
                    rates[name].append(pages / seconds)
                    cpu_per_page[name].append(cpu / pages)
                    crawl_cpu[name].append(probe["cpu"] / pages)
                    gc_cpu[name].append(probe["gc"] / pages)
                    for label, tally in probe["hooks"].items():
                        if tally["calls"]:  # a hook this variant never runs: no figure
                            hooks[name].setdefault(label, []).append(tally["cpu"] / pages)
                    pages_seen[name] = pages
                    print(
                        f"  run {rep + 1} {name}: {pages} responses in {seconds:.1f}s, "
                        f"{cpu:.1f} CPU s ({probe['cpu']:.1f} s of it crawling)",
                        flush=True,
                    )
    finally:
        site.terminate()
        site.wait()
    med = statistics.median
    base_rate = med(rates["baseline"])
    print()
    print(
        f"| crawl of the example site ({args.pages:,} pages) | responses | median pages/s "
        "| ratio of medians | median of paired ratios | CPU µs per response "
        "| of it crawling | of that in GC | add-on's crawling CPU µs per response |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    verdicts = []
    for name in names:
        paired = med([a / b for a, b in zip(rates[name], rates["baseline"], strict=True)])
        ratio = med(rates[name]) / base_rate
        over = med(crawl_cpu[name]) - med(crawl_cpu["baseline"])
        if name != "baseline":
            verdicts.append(min(ratio, paired))
        print(
            f"| {name} | {pages_seen[name]:,} | {med(rates[name]):.0f} | {ratio:.2f} "
            f"| {paired:.2f} | {med(cpu_per_page[name]) * 1e6:.0f} "
            f"| {med(crawl_cpu[name]) * 1e6:.0f} | {med(gc_cpu[name]) * 1e6:.0f} "
            f"| {'' if name == 'baseline' else f'{over * 1e6:.0f}'} |"
        )
    if args.hooks:
        print()
        print(
            "| CPU µs per response inside (the collector's time left out; "
            "Scrapy's next_request runs inside the add-on's) | " + " | ".join(names) + " |"
        )
        print("|---|" + "---:|" * len(names))
        labels = sorted({label for h in hooks.values() for label in h})
        for label in labels:
            cells = [
                f"{med(hooks[n][label]) * 1e6:.0f}" if label in hooks[n] else "" for n in names
            ]
            print(f"| {label} | " + " | ".join(cells) + " |")
    worst = min(verdicts)
    print()
    print(
        f"lowest add-on ratio (the lower of the two ratios): {worst:.2f} (target >= 0.95): "
        f"{'PASS' if worst >= 0.95 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
