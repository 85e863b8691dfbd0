"""What a long SQLite visit log costs a cycle with the C* terminals, and the store's size.

    .venv/bin/python bench/sqlite_retention.py [--urls 500000] [--cycles 40] [--keep]
        [--dir /tmp/scrapy-recrawl-retention]

A store of ``--urls`` URLs and a visit log of about ``urls * cycles / 2`` visits (10M
at the defaults) is built in bulk (``executemany`` straight into the store's own
schema, one transaction per cycle, the log's two indexes made after it: a crawl
would take days to write it; ``--keep`` reuses the file): each URL visited in each
cycle with its own chance (0.2 to 0.8), 2% failed downloads and 3% 304s, a first
fetch being no observation; each URL row's change window (``cwin``) folded from the
same visits by the rule of ``state.push_window`` (newest first, five kept). Then,
each in a fresh child process on the same file (seconds, and how far the RSS rose at its peak over the step:
Linux's VmHWM, reset before it):

* **window (now)**: the content columns a C*-terminal cycle adds
  (``ContentColumns.columns`` for ``C1..C3``: ``change_window()`` of every URL, which
  reads each URL's ``cwin``);
* **window (whole log)**: the same windows as ``change_window()`` computed them
  before schema version 7, from the whole log (``visit_log()`` then
  ``records.window_from_log``); the two results are checked equal;
* **last cycles**: ``visit_log(since_cycle=cycle - 10)`` (the ``Q`` terminal's
  read, its ``RECRAWL_EXPERTS_HISTORY`` cycles: through the index on cycle) against
  ``visit_log()`` of the whole log;
* **flush at the cap**: 500 visits recorded and flushed with the log at its cap
  (``log_maxlen`` = the log's length: 500 old visits dropped in the same transaction)
  and with no cap.

Sizes: the file with the URLs alone, then with the log and its indexes (bytes per
URL, bytes per visit, from SQLite's page counts). The last line is
machine-readable: ``summary: ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlite_scale import _url_rows  # noqa: E402 -- beside this script

from scrapy_recrawl.history import sqlite_packed  # noqa: E402
from scrapy_recrawl.history.records import pack_window, window_from_log  # noqa: E402
from scrapy_recrawl.history.sqlite import _URL_COLUMNS, SqliteHistoryStore  # noqa: E402
from scrapy_recrawl.history.state import WINDOW_KEPT  # noqa: E402

CHUNK = 200_000  # URL rows per executemany
_VISIT_SQL = (
    "INSERT INTO visits (url_id, cycle, time, status, changed, distance, added, removed,"
    " modified, attributes, bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)


def _pages(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA page_count").fetchone()[0]) * int(
        db.execute("PRAGMA page_size").fetchone()[0]
    )


def build(path: str, urls: int, cycles: int) -> dict:
    """The store (module docstring); returns its sizes and the build's time."""
    t0 = time.perf_counter()
    with SqliteHistoryStore(path, log_maxlen=0) as store:
        for _ in range(cycles):
            store.advance_cycle()
    rng = np.random.default_rng(29)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-1000000")
    # the window of each URL, newest first, folded cycle by cycle as the store folds it
    window = np.full((urls, WINDOW_KEPT), np.nan)
    seen = np.zeros(urls, dtype=bool)
    chance = rng.uniform(0.2, 0.8, urls)
    now = time.time()
    db.execute("DROP INDEX visits_by_url")
    db.execute("DROP INDEX visits_by_cycle")
    visits = 0
    for cycle in range(1, cycles + 1):
        idx = np.flatnonzero(rng.random(urls) < chance)
        roll = rng.random(len(idx))
        status = np.where(roll < 0.02, 0, np.where(roll < 0.05, 304, 200))
        good = status > 0
        changed = np.where(status == 304, 0, (rng.random(len(idx)) < 0.3).astype(np.int64))
        observed = good & seen[idx]
        obs_idx = idx[observed]
        window[obs_idx, 1:] = window[obs_idx, :-1]
        window[obs_idx, 0] = changed[observed]
        seen[idx[good]] = True
        size = np.where(status == 200, rng.integers(5_000, 80_000, len(idx)), 0)
        rows = zip(
            (idx + 1).tolist(),
            [cycle] * len(idx),
            (now - (cycles - cycle) * 3600.0 + rng.random(len(idx)) * 3000).tolist(),
            status.tolist(),
            [
                int(c) if o else None
                for c, o in zip(changed.tolist(), observed.tolist(), strict=True)
            ],
            np.where(observed & (changed > 0), rng.integers(1, 40, len(idx)), 0).tolist(),
            [0] * len(idx),
            [0] * len(idx),
            np.where(observed & (changed > 0), rng.integers(1, 9, len(idx)), 0).tolist(),
            [0] * len(idx),
            size.tolist(),
            strict=True,
        )
        db.execute("BEGIN")
        db.executemany(_VISIT_SQL, rows)
        db.execute("COMMIT")
        visits += len(idx)
    log_pages = _pages(db)
    cwin = pack_window(window).tolist()
    marks = ",".join("?" * len(_URL_COLUMNS))
    n_hosts = max(100, urls // 200)
    before_urls = _pages(db)
    for start in range(0, urls, CHUNK):
        rows = _url_rows(start, min(urls, start + CHUNK), n_hosts, now, rng)
        rows = [(*row[:-1], cwin[row[0] - 1]) for row in rows]  # the window as folded
        db.execute("BEGIN")
        db.executemany(f"INSERT INTO urls ({', '.join(_URL_COLUMNS)}) VALUES ({marks})", rows)
        db.execute("COMMIT")
    url_bytes = _pages(db) - before_urls
    db.execute("CREATE INDEX visits_by_url ON visits (url_id, cycle)")
    db.execute("CREATE INDEX visits_by_cycle ON visits (cycle)")
    log_bytes = log_pages + (_pages(db) - before_urls - url_bytes)  # rows + both indexes
    db.execute("BEGIN")
    sqlite_packed.rebuild(db)  # the scorers' packed columns (schema 9), as the store keeps them
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    return {
        "visits": visits,
        "urls": urls,
        "build_s": time.perf_counter() - t0,
        "url_bytes": url_bytes,
        "log_bytes": log_bytes,
        "file_bytes": os.path.getsize(path),
    }


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> float:
    """Start a new peak RSS (Linux: "5" to clear_refs resets VmHWM); returns the RSS now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_mib("VmRSS")


def peak_since(start: float) -> float:
    """How far the RSS rose above ``start`` at its peak since :func:`reset_peak`."""
    return _status_mib("VmHWM") - start


def _timed(fn) -> tuple[object, float]:
    t = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t


def child(path: str, what: str) -> dict:
    from scrapy_recrawl.content.store import ContentColumns, ContentSettings

    store = SqliteHistoryStore(path, read_only=True)
    store.open()
    # only what the content columns read of the snapshot (its ids, its cycle): the
    # snapshot's own peak is not this step's
    ids = np.fromiter((r[0] for r in store.db.execute("SELECT id FROM urls ORDER BY id")), np.int64)
    arrays = SimpleNamespace(ids=ids, cycle=store.cycle)
    start = reset_peak()
    out: dict = {"what": what}
    if what == "window_now":
        columns = ContentColumns(store, ContentSettings(window=3), {"C1", "C2", "C3"})
        cols, out["s"] = _timed(lambda: columns.columns(arrays))
        win, out["change_window_s"] = _timed(lambda: store.change_window(ids, 5))
        np.save(path + ".window_now.npy", win)
        out["finite"] = int(np.isfinite(win).sum())
    elif what == "window_log":

        def old() -> np.ndarray:
            log = store.visit_log()
            return window_from_log(ids, log["url_id"], log["changed"], 5)

        win, out["s"] = _timed(old)
        np.save(path + ".window_log.npy", win)
    elif what == "since":
        log, out["s"] = _timed(lambda: store.visit_log(since_cycle=store.cycle - 10))
        out["rows"] = len(log["url_id"])
    elif what == "whole":
        log, out["s"] = _timed(store.visit_log)
        out["rows"] = len(log["url_id"])
    out["extra_mib"] = peak_since(start)
    store.close()
    return out


def flush_at_cap(path: str, visits: int) -> dict:
    """500 new visits recorded and flushed with the log at its cap (500 old visits
    dropped in the same transaction), then with no cap; on a copy of the store (the
    file is the next run's too)."""
    from scrapy_recrawl.history import Visit

    out = {}
    copy = path + ".flush"
    for name, cap in (("capped", visits), ("uncapped", 0)):
        shutil.copy(path, copy)
        store = SqliteHistoryStore(copy, log_maxlen=cap, flush_every=10_000, flush_seconds=1e9)
        store.open()
        t = time.perf_counter()
        for i in range(500):
            fp = (i + 1).to_bytes(20, "big")
            store.record(Visit(fp, f"https://bench.example/{i}", time.time(), 200))
        store.flush()
        out[f"{name}_s"] = time.perf_counter() - t
        out[f"{name}_dropped"] = store.trimmed_visits
        store.close()
        for suffix in ("", "-wal", "-shm", ".lock"):
            if os.path.exists(copy + suffix):
                os.remove(copy + suffix)
    return out


def run_child(*args: str) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=500_000)
    ap.add_argument("--cycles", type=int, default=40)
    ap.add_argument("--dir", default="/tmp/scrapy-recrawl-retention")
    ap.add_argument("--keep", action="store_true", help="reuse a store built by an earlier run")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, f"retention-{args.urls}x{args.cycles}.sqlite3")
    meta_path = path + ".json"
    if args.keep and os.path.exists(path) and os.path.exists(meta_path):
        with open(meta_path) as fh:
            built = json.load(fh)
    else:
        for suffix in ("", "-wal", "-shm", ".json"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        built = build(path, args.urls, args.cycles)
        with open(meta_path, "w") as fh:
            json.dump(built, fh)
    visits, urls = built["visits"], built["urls"]
    print(
        f"store: {urls:,} URLs, {visits:,} visits over {args.cycles} cycles, "
        f"{built['file_bytes'] / 1e9:.2f} GB (built in bulk in {built['build_s']:.0f} s)"
    )
    print(
        f"size: {built['url_bytes'] / urls:.0f} bytes per URL row (urls table and its "
        f"fingerprint index), {built['log_bytes'] / visits:.1f} bytes per visit (log rows "
        "and both indexes)"
    )
    now = run_child(path, "window_now")
    log = run_child(path, "window_log")
    same = np.array_equal(
        np.load(path + ".window_now.npy"), np.load(path + ".window_log.npy"), equal_nan=True
    )
    since = run_child(path, "since")
    whole = run_child(path, "whole")
    flush = flush_at_cap(path, visits)
    rows = [
        ("C* columns (change_window, cwin)", now["s"], now["extra_mib"], "-"),
        ("windows from the whole log (before)", log["s"], log["extra_mib"], "-"),
        ("visit_log(since_cycle=cycle-10)", since["s"], since["extra_mib"], f"{since['rows']:,}"),
        ("visit_log() whole", whole["s"], whole["extra_mib"], f"{whole['rows']:,}"),
    ]
    print()
    print("| step | seconds | extra peak MiB | rows read |")
    print("|---|---:|---:|---:|")
    for name, s, mib, n in rows:
        print(f"| {name} | {s:.2f} | {mib:.0f} | {n} |")
    print()
    print(
        f"C* cycle: {now['s']:.2f} s and {now['extra_mib']:.0f} MiB against {log['s']:.2f} s "
        f"and {log['extra_mib']:.0f} MiB reading the whole log: {log['s'] / now['s']:.0f}x "
        f"less time; the same windows: {same}"
    )
    print(
        f"last 10 cycles: {since['s']:.2f} s for {since['rows']:,} visits against "
        f"{whole['s']:.2f} s for the whole log ({whole['s'] / since['s']:.1f}x)"
    )
    print(
        f"flush of 500 visits at the cap: {flush['capped_s'] * 1e3:.0f} ms "
        f"({flush['capped_dropped']} old visits dropped) against "
        f"{flush['uncapped_s'] * 1e3:.0f} ms with no cap"
    )
    if not same:
        sys.exit("the windows differ")
    print(
        "summary: "
        + json.dumps(
            {
                "urls": urls,
                "visits": visits,
                "window_now_s": round(now["s"], 3),
                "window_log_s": round(log["s"], 3),
                "ratio": round(log["s"] / now["s"], 1),
                "window_now_mib": round(now["extra_mib"]),
                "window_log_mib": round(log["extra_mib"]),
                "since_s": round(since["s"], 3),
                "whole_s": round(whole["s"], 3),
                "bytes_per_url": round(built["url_bytes"] / urls),
                "bytes_per_visit": round(built["log_bytes"] / visits, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
