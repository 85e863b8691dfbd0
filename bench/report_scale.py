"""How long ``scrapy recrawl-report`` takes on a large store, against reading its visit log.

    .venv/bin/python bench/report_scale.py [--sizes 2500x20,10000x20,40000x20,100000x80]
        [--dir /tmp/scrapy-recrawl-report] [--keep] [--profile] [--old-store]

For each ``URLSxCYCLES`` size a SQLite store is built through the store API
(``SqliteHistoryStore.record``, once: ``--keep`` reuses the file on the next run):
every URL visited every cycle from the one it is found in (a tenth are found late),
each with its own change probability, a few error, failed, 304 and gone visits,
and one URL in a hundred that "changes" at every visit by one element (what the
boilerplate section looks for, with a kept copy to guess the XPath from). As each
cycle opens, the freshness estimate of the cycle before is computed and kept in its
record exactly as a crawl does (``CycleTally.open_cycle``, the scheduler's own call:
the same function, the same columns; its time is the build's, printed, not the
report's), so the report reads those and fits only the last cycle's. No plan or
summary is written, so the rest of each row of the cycle table comes from the log
(the heavier path). ``--old-store`` builds the stores as before schema version 8 (no
estimate kept: the report fits every cycle's), in files of their own
(``report-URLSxCYCLES-old.sqlite3``), for the figures of an older store.

Then, in a fresh child process per size (so one size's memory does not count in
the next):

* read: ``store.visit_log()``, the whole log as numpy columns: the baseline, the
  least any report over the log can cost;
* report: ``scrapy recrawl-report -s RECRAWL_STORE=<file> --format json`` run as a
  user runs it (its own process: interpreter and Scrapy start-up included);

each as wall time and CPU time (on a shared machine the CPU time is the steadier
figure), and the ratios report / read. The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrapy_recrawl.core.groups import GroupIndex  # noqa: E402
from scrapy_recrawl.cycle_summary import CycleTally  # noqa: E402
from scrapy_recrawl.history.base import Visit  # noqa: E402
from scrapy_recrawl.history.sqlite import SqliteHistoryStore  # noqa: E402

T0 = 1_700_000_000.0
BOILERPLATE_BODY = (
    b"<html><body><p>News</p><span class='updated'>2024-01-02 10:00</span></body></html>"
)


def build(path: Path, urls: int, cycles: int, seed: int = 1, estimates: bool = True) -> float:
    """The store, through ``record()`` as the middleware writes it; ``estimates``: each
    cycle's opening keeps the freshness estimate of the cycle before as a crawl does
    (module docstring). Returns the seconds those estimates took (the crawl's cost)."""
    rng = np.random.default_rng(seed)
    found = np.where(rng.random(urls) < 0.1, rng.integers(1, max(2, cycles // 2 + 1), urls), 1)
    p = rng.beta(0.3, 4.0, urls)
    boiler = rng.random(urls) < 0.01
    fps = [i.to_bytes(20, "big") for i in range(urls)]
    names = [
        f"https://www.site{i % max(1, urls // 200)}.example.com/news/page-{i}.html"
        for i in range(urls)
    ]
    tally, groups = CycleTally(None), GroupIndex()
    spent = 0.0
    with SqliteHistoryStore(path, flush_every=200_000, flush_seconds=1e9) as store:
        seen = np.zeros(urls, dtype=bool)
        gone = np.zeros(urls, dtype=bool)
        for c in range(1, cycles + 1):
            store.flush()  # the cycle before ended: all of it written, as a crawl's is
            store.advance_cycle()
            if estimates:  # the scheduler's call as it plans cycle c (scheduler.py)
                t = time.perf_counter()
                tally.open_cycle(store, store.arrays(), groups)
                spent += time.perf_counter() - t
            todo = np.flatnonzero((found <= c) & ~gone)
            u = rng.random(todo.size)
            changes = rng.random(todo.size) < p[todo]
            for k, i in enumerate(todo.tolist()):
                t = T0 + c * 3600.0 + k * 0.01
                r = u[k]
                if r < 0.005:
                    status = 0
                elif r < 0.015:
                    status = 500
                elif r < 0.017:
                    status = 404
                elif r < 0.03 and seen[i]:
                    status = 304
                else:
                    status = 200
                good = status in (200, 304)
                observed = good and bool(seen[i])
                changed: bool | None = None
                distance = modified = added = 0
                if observed:
                    changed = status == 200 and (bool(boiler[i]) or bool(changes[k]))
                    if changed and boiler[i]:
                        distance, modified = 3, 1
                    elif changed:
                        distance, modified, added = 12, 3, 1
                store.record(
                    Visit(
                        fps[i],
                        names[i],
                        t,
                        status,
                        changed=changed,
                        distance=distance,
                        modified=modified,
                        added=added,
                        size=8000,
                        gone=status == 404,
                        body=BOILERPLATE_BODY
                        if boiler[i] and status == 200 and c == cycles
                        else None,
                    )
                )
                seen[i] |= good
                gone[i] |= status == 404
        store.flush()
    return spent


def measure(path: Path, profile: bool) -> dict[str, float]:
    """In this (child) process: the log read, then the command as a user runs it."""
    with SqliteHistoryStore(path, read_only=True) as store:
        t, c = time.perf_counter(), time.process_time()
        log = store.visit_log()
        read, read_cpu = time.perf_counter() - t, time.process_time() - c
        visits = int(log["url_id"].size)
    del log
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable]
    if profile:
        cmd += ["-m", "cProfile", "-s", "cumulative"]
    cmd += ["-m", "scrapy", "recrawl-report", "-s", f"RECRAWL_STORE={path}", "--format", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/", check=False)
    report = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if out.returncode != 0:
        raise SystemExit(f"recrawl-report failed:\n{out.stderr[-3000:]}")
    if profile:
        # the profile follows the JSON on stdout
        print(out.stdout[out.stdout.find("   Ordered by") :][:6000], file=sys.stderr)
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "visits": visits,
        "read_s": read,
        "read_cpu_s": read_cpu,
        "report_s": report,
        "report_cpu_s": cpu,
        "report_rss_mb": child,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="2500x20,10000x20,40000x20,100000x80")
    ap.add_argument("--dir", default="/tmp/scrapy-recrawl-report")
    ap.add_argument("--keep", action="store_true", help="reuse (and keep) the built stores")
    ap.add_argument("--profile", action="store_true", help="cProfile the command (stderr)")
    ap.add_argument(
        "--old-store",
        action="store_true",
        help="build the stores as before schema version 8: no estimate kept per cycle",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child), args.profile)))
        return
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes.split(","):
        urls, cycles = (int(x) for x in size.lower().split("x"))
        old = "-old" if args.old_store else ""
        path = folder / f"report-{urls}x{cycles}{old}.sqlite3"
        if not (args.keep and path.exists()):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            t = time.perf_counter()
            spent = build(path, urls, cycles, estimates=not args.old_store)
            print(
                f"built {path} in {time.perf_counter() - t:.0f} s"
                + (
                    f" ({spent:.1f} s of it the {cycles - 1} estimates a crawl keeps)"
                    if spent
                    else ""
                ),
                file=sys.stderr,
            )
        child = [sys.executable, __file__, "--child", str(path)] + (
            ["--profile"] if args.profile else []
        )
        out = subprocess.run(child, capture_output=True, text=True, check=True)
        if args.profile:
            print(out.stderr, file=sys.stderr)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((urls, cycles, got))
        if not args.keep:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(
        f"{'urls':>8} {'cycles':>6} {'visits':>10} {'read log s':>10} {'(cpu)':>6} "
        f"{'report s':>9} {'(cpu)':>6} {'ratio':>6} {'cpu ratio':>9} {'RSS MB':>7}"
    )
    for urls, cycles, g in rows:
        print(
            f"{urls:>8} {cycles:>6} {g['visits']:>10} {g['read_s']:>10.2f} {g['read_cpu_s']:>6.2f} "
            f"{g['report_s']:>9.2f} {g['report_cpu_s']:>6.2f} {g['report_s'] / g['read_s']:>6.1f} "
            f"{g['report_cpu_s'] / g['read_cpu_s']:>9.1f} {g['report_rss_mb']:>7.0f}"
        )
    urls, cycles, g = rows[-1]
    print(
        f"summary: urls={urls} cycles={cycles} visits={g['visits']} read_s={g['read_s']:.2f} "
        f"report_s={g['report_s']:.2f} report_cpu_s={g['report_cpu_s']:.2f} "
        f"ratio={g['report_s'] / g['read_s']:.1f} cpu_ratio={g['report_cpu_s'] / g['read_cpu_s']:.1f}"
    )


if __name__ == "__main__":
    main()
