"""What one cycle costs the SQLite store's scheduler at 1M, 4M and 10M URLs: time and peak RSS.

    .venv/bin/python bench/sqlite_scale.py [--sizes 1000000,4000000,10000000] [--keep]
        [--dir /tmp/scrapy-recrawl-scale] [--cap 100] [--repeat 1] [--profile]

For each size a store is built in bulk (once: ``--keep`` reuses the file on the
next run) with the store's own schema and encodings: the ``urls`` rows
(counts, rates, cycles, validators, failures, a few gone), a random 20-byte
fingerprint per URL, URLs of realistic length over ``size / 200`` hosts of
skewed sizes, and each URL's request dict in the request codec; then the packed
copy of the scoring columns, by the store's own ``sqlite_packed.rebuild`` (what
the migration from schema 8 runs). Then, in a
fresh child process per size (so one size's memory does not count in the
next), the scheduler's work at the start of a cycle, step by step:

* open: ``SqliteHistoryStore.open()`` (lock, schema check, counters);
* arrays: ``store.arrays()``, the columns as numpy (the snapshot), read from the
  packed table (schema 9);
* score + top-k: ``select_recrawls`` with the default scorer (``aad+``), 5%
  budget, no cap: the backend-independent part (the target: 1M well under 1 s,
  10M under 10 s, flat per URL); run three times: the first call's time, and the
  best of the three (the first also pays the kernel for fresh pages);
* plan (cap): ``core.cycle.plan_cycle`` as the scheduler calls it, with
  ``RECRAWL_MAX_PER_DOMAIN = --cap`` (``urls_of = store.urls``);
* requests: ``store.requests()`` of the picked ids (decoded dicts);

and the peak RSS of that process (``ru_maxrss``). The baselines, in their own
child process on the same file: SQLite's bare ``SELECT`` of the same columns of
the ``urls`` table, each row read into a Python tuple and dropped (what the
``arrays()`` before schema 9 was bound by); and the packed read's own floor, each
block of the packed table read as bytes and dropped.
The last line is machine-readable: ``summary: urls=<N> cycle_s=<s> ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_recrawl.history import sqlite_packed  # noqa: E402
from scrapy_recrawl.history.request_codec import encode_stored  # noqa: E402
from scrapy_recrawl.history.sqlite import _ARRAY_COLUMNS, _URL_COLUMNS, SqliteHistoryStore  # noqa: E402

CYCLE = 40  # the store's cycle counter once built
CHUNK = 200_000  # rows per executemany


def _url_rows(start: int, stop: int, n_hosts: int, now: float, rng: np.random.Generator) -> list:
    size = stop - start
    ids = np.arange(start + 1, stop + 1)
    # a few big hosts, many small ones: P(host < h) = sqrt(h / n_hosts)
    host = (n_hosts * rng.random(size) ** 2).astype(np.int64)
    n = rng.integers(0, 60, size)
    p = rng.beta(0.3, 6.0, size)
    x = rng.binomial(n, p)
    sad = (rng.random(size) < p).astype(np.float64) * (n > 0)
    aad_sum = np.round(x * (n + 1) / 2 * rng.random(size), 3)
    gad = np.round(np.where(n > 0, rng.random(size) * p, 0.0), 4)
    last_cycle = rng.integers(0, CYCLE, size)
    last_time = now - (CYCLE - last_cycle) * 3600.0
    changed = x > 0
    last_change_cycle = np.where(changed, last_cycle - rng.integers(0, 5, size), -1)
    dist = np.where(changed, rng.integers(0, 40, size), 0)
    failures = np.where(rng.random(size) < 0.02, rng.integers(1, 4, size), 0)
    gone = rng.random(size) < 0.01
    fps = rng.bytes(20 * size)
    cols = [
        ids.tolist(),
        [fps[i * 20 : i * 20 + 20] for i in range(size)],
        [
            f"https://www.site{h}.example.com/{'news' if i % 3 else 'docs'}/{i % 97}/"
            f"page-{i}-about-some-topic.html"
            for i, h in zip(ids.tolist(), host.tolist(), strict=True)
        ],
        (last_time - 86400.0 * 30).tolist(),  # first_seen
        [0] * size,  # first_cycle
        (n + 1).tolist(),  # visits
        n.tolist(),
        x.tolist(),
        sad.tolist(),
        aad_sum.tolist(),
        gad.tolist(),
        last_cycle.tolist(),
        last_time.tolist(),
        last_change_cycle.tolist(),
        np.where(changed, last_time, np.nan).tolist(),
        dist.astype(np.float64).tolist(),  # d
        rng.integers(0, 5, size).astype(np.float64).tolist(),  # a
        rng.integers(0, 3, size).astype(np.float64).tolist(),  # r
        rng.integers(0, 8, size).astype(np.float64).tolist(),  # m
        np.where(failures > 0, 503, 200).tolist(),  # status
        gone.astype(np.int64).tolist(),
        [f'"{i:x}-5e1f"' if i % 2 else None for i in ids.tolist()],  # etag
        ["Tue, 24 Nov 2026 10:00:00 GMT" if i % 3 == 0 else None for i in ids.tolist()],
        [1] * size,  # has_body
        failures.tolist(),
        np.where(failures > 0, CYCLE - 1, -1).tolist(),
        [0] * size,  # cwin: no change window (bench/sqlite_retention.py measures it)
    ]
    # NaN (not recorded) is NULL in the table, as the store writes it
    rows = list(zip(*cols, strict=True))
    return [tuple(None if v != v else v for v in row) for row in rows]


def build(path: str, size: int) -> None:
    """A store of ``size`` URLs, written in bulk: the store's schema, its encodings."""
    with SqliteHistoryStore(path) as store:
        for _ in range(CYCLE):
            store.advance_cycle()
    rng = np.random.default_rng(19)
    now = time.time()
    n_hosts = max(100, size // 200)
    request = {
        "url": "",
        "callback": "parse",
        "errback": None,
        "headers": {},
        "body": b"",
        "cookies": {},
        "meta": {"depth": 2},
        "encoding": "utf-8",
        "flags": [],
        "cb_kwargs": {},
        "dont_filter": False,
        "method": "GET",
        "priority": 0,
    }
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-1000000")
    marks = ",".join("?" * len(_URL_COLUMNS))
    for start in range(0, size, CHUNK):
        rows = _url_rows(start, min(size, start + CHUNK), n_hosts, now, rng)
        blobs = []
        for row in rows:
            request["url"] = row[2]
            blobs.append((row[0], encode_stored(request)))
        db.execute("BEGIN")
        db.executemany(f"INSERT INTO urls ({', '.join(_URL_COLUMNS)}) VALUES ({marks})", rows)
        db.executemany("INSERT INTO requests VALUES (?, ?)", blobs)
        db.execute("COMMIT")
    db.execute("BEGIN")
    sqlite_packed.rebuild(db)  # the store's own build of the packed columns
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode=WAL")
    db.close()


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child_baseline(path: str) -> dict:
    sql = "SELECT id, " + ", ".join(expr for _, expr, _ in _ARRAY_COLUMNS) + " FROM urls"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0 = time.perf_counter()
    rows = 0
    for _ in db.execute(sql):
        rows += 1
    select_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    blocks = 0
    for _ in db.execute("SELECT data FROM packed ORDER BY block"):
        blocks += 1
    packed_s = time.perf_counter() - t0
    return {"select_s": select_s, "packed_s": packed_s, "rows": rows, "peak_mib": peak_rss_mib()}


def child_cycle(path: str, cap: int, profile: bool) -> dict:
    from scrapy_recrawl.core.budget import Share
    from scrapy_recrawl.core.cycle import CycleConfig, plan_cycle
    from scrapy_recrawl.core.selection import select_recrawls
    from scrapy_recrawl.scoring import Scorer

    scorer = Scorer.from_spec("aad+")
    out: dict = {"start_mib": rss_mib()}
    profiler = None
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.005)
        profiler.start()

    def step(name: str, fn):
        t, c = time.perf_counter(), time.process_time()
        value = fn()
        out[f"{name}_s"] = time.perf_counter() - t
        out[f"{name}_cpu"] = time.process_time() - c
        out[f"peak_{name}_mib"] = peak_rss_mib()
        out[f"rss_{name}_mib"] = rss_mib()  # what the step left held (the peak is its high mark)
        return value

    store = SqliteHistoryStore(path)
    step("open", store.open)
    arrays = step("arrays", store.arrays)
    out["arrays_mib"] = rss_mib()
    now = time.time()
    k = int(np.ceil(0.05 * len(arrays)))
    step("score_topk", lambda: select_recrawls(arrays, scorer, k, now=now))
    # again, twice: the first call also pays the kernel for fresh pages (80 MB of scores
    # at 10M URLs); the best of three is what the code itself costs
    first = out["score_topk_s"], out["score_topk_cpu"]
    best = first
    for _ in range(2):
        step("score_topk", lambda: select_recrawls(arrays, scorer, k, now=now))
        best = min(best[0], out["score_topk_s"]), min(best[1], out["score_topk_cpu"])
    (out["score_topk_s"], out["score_topk_cpu"]) = first
    (out["score_topk_best_s"], out["score_topk_best_cpu"]) = best
    config = CycleConfig(budget=Share(0.05), warmup_cycles=0, max_per_domain=cap)
    plan = step(
        "plan",
        lambda: plan_cycle(arrays, config, scorer, pending_new=0, now=now, urls_of=store.urls),
    )
    ids = plan.selection.ids
    requests = step("requests", lambda: store.requests(ids))
    if profiler is not None:
        profiler.stop()
        out["profile"] = profiler.output_text(unicode=False, color=False, show_all=False)
    assert all(r is not None for r in requests)
    out.update(urls=len(arrays), k=k, picks=len(ids), peak_mib=peak_rss_mib())
    for unit in ("s", "cpu"):
        out[f"cycle_{unit}"] = sum(
            out[f"{s}_{unit}"] for s in ("open", "arrays", "plan", "requests")
        )
    store.close()
    return out


def run_child(*args: str) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,4000000,10000000")
    ap.add_argument("--dir", default="/tmp/scrapy-recrawl-scale")
    ap.add_argument("--keep", action="store_true", help="reuse a store built by an earlier run")
    ap.add_argument("--cap", type=int, default=100, help="RECRAWL_MAX_PER_DOMAIN")
    ap.add_argument("--repeat", type=int, default=1, help="cycle runs per size (min taken)")
    ap.add_argument("--profile", action="store_true", help="pyinstrument of the largest size")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, path, *rest = args.child
        if kind == "build":
            t = time.perf_counter()
            build(path, int(rest[0]))
            result = {"build_s": time.perf_counter() - t}
        elif kind == "baseline":
            result = child_baseline(path)
        else:
            result = child_cycle(path, int(rest[0]), rest[1] == "1")
        print(json.dumps(result))
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    os.makedirs(args.dir, exist_ok=True)
    rows = []
    for size in sizes:
        path = os.path.join(args.dir, f"history-{size}.sqlite3")
        done = path + ".built"
        if not (args.keep and os.path.exists(done)):
            for p in (path, done, path + "-wal", path + "-shm"):
                if os.path.exists(p):
                    os.remove(p)
            built = run_child("build", path, str(size))
            Path(done).write_text(json.dumps(built))
            print(f"built {size:,} URLs in {built['build_s']:.0f} s: {path}", flush=True)
        base = run_child("baseline", path)
        runs = []
        for r in range(args.repeat):
            last = r == args.repeat - 1 and size == max(sizes) and args.profile
            runs.append(run_child("cycle", path, str(args.cap), "1" if last else "0"))
        best = {k: min(run[k] for run in runs) for k in runs[0] if k.endswith(("_s", "_cpu"))}
        best.update({k: max(run[k] for run in runs) for k in runs[0] if k.endswith("_mib")})
        best.update(
            urls=size, picks=runs[-1]["picks"], select_s=base["select_s"], packed_s=base["packed_s"]
        )
        rows.append(best)
        if "profile" in runs[-1]:
            print(runs[-1]["profile"])
        print(json.dumps(best), flush=True)

    print()
    print(
        f"aad+, budget 5%, at most {args.cap} per host; best of {args.repeat}; "
        "wall s (CPU s of the process); baselines: a bare SELECT of the same columns of "
        "urls, a bare read of the packed table's blocks"
    )
    print()
    head = (
        "| URLs | open | arrays | score + top-k | plan (cap) | requests | cycle "
        "| cycle µs/URL | score + top-k µs/URL (CPU) | best of 3 (CPU) "
        "| bare SELECT | arrays / SELECT | packed bare read | arrays µs/URL "
        "| requests µs/pick |"
    )
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))

    def both(r: dict, step: str) -> str:
        return f"{r[step + '_s']:.2f} ({r[step + '_cpu']:.2f})"

    for r in rows:
        n = r["urls"]
        print(
            f"| {n:,} | {both(r, 'open')} | {both(r, 'arrays')} | {both(r, 'score_topk')} "
            f"| {both(r, 'plan')} | {both(r, 'requests')} | {both(r, 'cycle')} "
            f"| {r['cycle_s'] / n * 1e6:.2f} "
            f"| {r['score_topk_s'] / n * 1e6:.3f} ({r['score_topk_cpu'] / n * 1e6:.3f}) "
            f"| {r['score_topk_best_s'] / n * 1e6:.3f} ({r['score_topk_best_cpu'] / n * 1e6:.3f}) "
            f"| {r['select_s']:.2f} | {r['arrays_s'] / r['select_s']:.2f}x "
            f"| {r['packed_s']:.2f} | {r['arrays_s'] / n * 1e6:.2f} "
            f"| {r['requests_s'] / max(1, r['picks']) * 1e6:.1f} |"
        )
    print()
    head = (
        "| URLs | columns MiB | peak RSS after arrays / score / plan / requests MiB "
        "| peak RSS B/URL |"
    )
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for r in rows:
        n = r["urls"]
        peaks = " / ".join(
            f"{r[f'peak_{s}_mib']:,.0f}" for s in ("arrays", "score_topk", "plan", "requests")
        )
        print(
            f"| {n:,} | {r['arrays_mib'] - r['start_mib']:,.0f} | {peaks} "
            f"| {(r['peak_mib'] - r['start_mib']) * 2**20 / n:.0f} |"
        )
    first, last = rows[0], rows[-1]
    print(
        f"summary: urls={last['urls']} cycle_s={last['cycle_s']:.2f} "
        f"score_topk_s={last['score_topk_s']:.2f} peak_rss_mib={last['peak_mib']:.0f} "
        f"cycle_us_per_url_first={first['cycle_s'] / first['urls'] * 1e6:.2f} "
        f"cycle_us_per_url_last={last['cycle_s'] / last['urls'] * 1e6:.2f}"
    )


if __name__ == "__main__":
    main()
