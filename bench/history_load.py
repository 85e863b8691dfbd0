"""How long the SQLite store takes to hand the scheduler a million URLs as numpy arrays.

    .venv/bin/python bench/history_load.py [--urls 1000000] [--visits 100000]

Builds a store of N URLs in a temporary directory (rows written in bulk, the
same schema the middleware writes), then times ``store.arrays()`` (target:
under 5 s for 1,000,000 URLs) against a baseline measured in the same run: a
bare ``SELECT`` of the same columns into Python tuples with ``fetchall()``.
Also times ``store.record()`` for V visits (batched writes), the middleware's
per-response cost.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time

import numpy as np

from scrapy_recrawl.history import sqlite_packed
from scrapy_recrawl.history.base import Visit
from scrapy_recrawl.history.sqlite import SqliteHistoryStore


def build(path: str, urls: int) -> None:
    with SqliteHistoryStore(path) as store:
        store.advance_cycle()
    rng = np.random.default_rng(1)
    n = rng.integers(0, 60, urls)
    x = (n * rng.random(urls) * 0.3).astype(np.int64)
    now = time.time()
    db = sqlite3.connect(path)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO urls (id, fingerprint, url, first_seen, first_cycle, visits, n, x, sad,"
        " aad_sum, gad, last_visit_cycle, last_visit_time, d, a, r, m) VALUES"
        " (?,?,?,?,0,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            (
                i + 1,
                i.to_bytes(20, "big"),
                f"https://example.com/page/{i}.html",
                now,
                int(n[i]) + 1,
                int(n[i]),
                int(x[i]),
                float(x[i] > 0),
                float(x[i]),
                float(x[i]) / max(1, int(n[i])),
                int(rng.integers(0, 60)),
                now,
                1.0,
                0.0,
                0.0,
                2.0,
            )
            for i in range(urls)
        ),
    )
    sqlite_packed.rebuild(db)  # the scorers' packed columns (schema 9), as the store keeps them
    db.execute("COMMIT")
    db.close()


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--visits", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "history.sqlite3")
        t0 = time.perf_counter()
        build(path, args.urls)
        print(f"built a store of {args.urls:,} URLs in {time.perf_counter() - t0:.1f} s")

        store = SqliteHistoryStore(path)
        store.open()
        cols = "id, n, x, sad, aad_sum, gad, last_visit_cycle, last_visit_time, d, a, r, m, gone"
        baseline = timed(
            lambda: store.db.execute(f"SELECT {cols} FROM urls").fetchall(), args.repeat
        )
        arrays = timed(store.arrays, args.repeat)
        assert len(store.arrays()) == args.urls
        store.close()

        vpath = os.path.join(tmp, "visits.sqlite3")
        vstore = SqliteHistoryStore(vpath)
        vstore.open()
        vstore.advance_cycle()
        urls = max(1, args.visits // 4)
        t0 = time.perf_counter()
        for i in range(args.visits):
            vstore.record(
                Visit(
                    fingerprint=(i % urls).to_bytes(20, "big"),
                    url=f"https://example.com/{i % urls}",
                    time=1.0e9 + i,
                    status=200,
                    changed=bool(i % 3 == 0) if i >= urls else None,
                    signature=b"s" * 64,
                    request={"url": f"https://example.com/{i % urls}", "callback": "parse"},
                    body=b"<html><body>hello</body></html>",
                    headers={"Content-Type": ["text/html"]},
                )
            )
        vstore.close()
        record_s = time.perf_counter() - t0

    med_a, med_b = statistics.median(arrays), statistics.median(baseline)
    print()
    print(f"| operation ({args.urls:,} URLs) | median s | min s |")
    print("|---|---:|---:|")
    print(f"| baseline: SELECT ... fetchall() into tuples | {med_b:.2f} | {min(baseline):.2f} |")
    print(f"| store.arrays() into numpy columns | {med_a:.2f} | {min(arrays):.2f} |")
    print()
    print(f"ratio arrays / baseline: {med_a / med_b:.2f}x")
    verdict = "PASS" if med_a < 5.0 else "FAIL"
    print(f"store.arrays() for {args.urls:,} URLs: {med_a:.2f} s (target < 5 s): {verdict}")
    print(
        f"store.record(): {args.visits:,} visits in {record_s:.2f} s "
        f"= {args.visits / record_s:,.0f} visits/s (batched, bodies kept)"
    )


if __name__ == "__main__":
    main()
