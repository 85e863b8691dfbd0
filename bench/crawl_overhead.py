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

REPO = Path(__file__).resolve().parent.parent
PROJECT = REPO / "example_project"


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


def crawl(base: str, settings: dict[str, str], workdir: str) -> tuple[int, float, float]:
    """One ``scrapy crawl``: (responses, elapsed seconds by Scrapy's stats, CPU seconds
    of its process)."""
    reset_site(base)
    stats_file = os.path.join(workdir, "stats.json")
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={base}/"]
    for k, v in {
        "LOG_LEVEL": "CRITICAL",
        "STATS_DUMP_FILE": stats_file,
        "EXTENSIONS": json.dumps({"example_project.stats_dump.StatsDump": 0}),
        **settings,
    }.items():
        cmd += ["-s", f"{k}={v}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PROJECT)])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed (module docstring)
    cpu_before = children_cpu()
    subprocess.run(cmd, cwd=PROJECT, env=env, check=True)
    cpu = children_cpu() - cpu_before
    with open(stats_file, encoding="utf-8") as fh:
        stats = json.load(fh)
    pages = int(stats.get("downloader/response_count", 0))
    seconds = float(stats.get("elapsed_time_seconds", 0.0))
    return pages, seconds, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
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
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/_admin/day", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        results: dict[str, list[float]] = {
            "baseline": [],
            "add-on, cycle 1": [],
            "add-on, cycle 2": [],
        }
        cpu_per_page: dict[str, list[float]] = {name: [] for name in results}
        pages_seen: dict[str, int] = {}
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
                    pages, seconds, cpu = crawl(base, settings, tmp)
                    results[name].append(pages / seconds)
                    cpu_per_page[name].append(cpu / pages)
                    pages_seen[name] = pages
                    print(
                        f"  run {rep + 1} {name}: {pages} responses in {seconds:.1f}s, "
                        f"{cpu:.1f} CPU s",
                        flush=True,
                    )
    finally:
        site.terminate()
        site.wait()
    base_rate = statistics.median(results["baseline"])
    print()
    base_cpu = statistics.median(cpu_per_page["baseline"])
    print(
        f"| crawl of the example site ({args.pages:,} pages) | responses | median pages/s "
        "| ratio | median CPU µs per response | add-on CPU µs per response |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, rates in results.items():
        med = statistics.median(rates)
        cpu = statistics.median(cpu_per_page[name])
        over = "" if name == "baseline" else f"{(cpu - base_cpu) * 1e6:.0f}"
        print(
            f"| {name} | {pages_seen[name]:,} | {med:.0f} | {med / base_rate:.2f} "
            f"| {cpu * 1e6:.0f} | {over} |"
        )
    worst = min(statistics.median(r) for n, r in results.items() if n != "baseline")
    print()
    print(
        f"lowest add-on ratio: {worst / base_rate:.2f} (target >= 0.95): "
        f"{'PASS' if worst / base_rate >= 0.95 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
