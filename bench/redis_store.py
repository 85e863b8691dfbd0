"""The Redis history store at scale: bytes per URL, the time to open a cycle ("rescore")
at 1M, 4M and N URLs, and visits recorded per second from 1, 2 and 4 processes.

    .venv/bin/python bench/redis_store.py [--urls 10000000] [--visits 20000] [--k 0.05]

Starts its own ``redis-server`` (the tests' choice, tests/redis_server.py: the test
extra's Redis 6.2, or the binary ``RECRAWL_TEST_REDIS_SERVER`` names) on a free port,
with no persistence, and stops it afterwards.

* **bytes per URL**: ``INFO memory`` ``used_memory`` before and after writing N URLs in
  bulk (history/redis_bulk.py: ``write_bulk``, the writer the migration uses) -- what
  scheduling needs: the rows, the URL index, the URLs and their requests (blobs and the
  store's dictionaries). Realistic URLs: 2,000 sites, sections, two-word slugs and an
  id (their mean length is printed).
* **separately counted**: change signatures (1 KB each), validators, stored bodies and
  the visit log, per URL and per visit, from the 1-process record run
  (``MEMORY USAGE`` of those keys).
* **rescore**: what a process opening a cycle does: ``store.arrays()`` (the numpy
  snapshot), score every URL with ``RECRAWL_SCORER``'s default and take the top ``k``
  (``select_recrawls``), fetch the top-k request dicts and push them to a Redis list
  with the distributed frontier's serializer.
* **record**: ``store.record()`` of V realistic visits (a 1 KB change signature, the
  request dict, a 6 KB body kept for 304s, a change observation) then ``close()`` (its
  flush), from 1, 2 and 4 processes at once (each V visits, the throughput is the sum).
  Baseline measured in the same run: a bare ``PING`` round trip per visit.

Ends with one line a script can track::

    summary: urls=<N> bytes_per_url=<B> rescore_s=<s at N> rescore_1m_s=<s at 1M> \
visits_per_s_1p=<v> visits_per_s_4p=<v>
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.redis_server

from scrapy_recrawl.core.selection import select_recrawls  # noqa: E402
from scrapy_recrawl.frontier import serializer  # noqa: E402
from scrapy_recrawl.history.base import Visit  # noqa: E402
from scrapy_recrawl.history.redis import RedisHistoryStore  # noqa: E402
from scrapy_recrawl.history.redis_bulk import write_bulk  # noqa: E402
from scrapy_recrawl.history.redis_schema import (  # noqa: E402
    PRESENT,
    ROW_DTYPE,
    blob,
    host_of,
    shape_of,
    url_part,
)
from scrapy_recrawl.scoring import Scorer  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

SIGNATURE = bytes(range(256)) * 4
BODY = b"<html><body>" + b"<p>some words on a page, repeated</p>" * 160 + b"</body></html>"
WORDS = (
    "garden table blue chair light lamp red green house home office kitchen bath "
    "outdoor summer winter sale new best classic modern wood metal glass small large "
    "kids women men shoes shirt dress coat travel guide news sport music video photo"
).split()
SECTIONS = ["products", "category", "blog", "news", "p", "item", "articles", "shop"]


def url_of(i: int) -> str:
    """A realistic URL: one of 2,000 sites, a section, a two-word slug and an id."""
    site = f"www.{WORDS[i % 40]}{i % 2000}.com"
    a, b = WORDS[(i // 7) % 40], WORDS[(i // 311) % 40]
    return f"https://{site}/{SECTIONS[i % 8]}/{a}-{b}-{i}.html"


def visits(worker: int, count: int) -> list[Visit]:
    rng = np.random.default_rng(worker)
    urls = max(1, count // 2)
    out = []
    for i in range(count):
        u = int(rng.integers(urls))
        url = url_of(worker * 10_000_000 + u)
        out.append(
            Visit(
                fingerprint=worker.to_bytes(2, "big") + u.to_bytes(18, "big"),
                url=url,
                time=1000.0 + i,
                status=200,
                changed=bool(i % 3 == 0),
                signature=SIGNATURE,
                distance=i % 7,
                added=i % 3,
                size=len(BODY),
                etag=f'"{u}-{i}"',
                request={"url": url, "callback": "parse_page", "meta": {"depth": 2}},
                body=BODY,
                headers={"Content-Type": ["text/html; charset=utf-8"]},
            )
        )
    return out


def record_worker(url: str, worker: int, count: int, start, out) -> None:  # noqa: ANN001
    batch = visits(worker, count)
    store = RedisHistoryStore(url, key="bench:record")
    store.open()
    start.wait()
    t0 = time.perf_counter()
    for v in batch:
        store.record(v)
    store.close()  # the last flush
    out.put(time.perf_counter() - t0)


def bench_record(url: str, count: int, procs: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=record_worker, args=(url, w, count, start, out)) for w in range(procs)
    ]
    for p in workers:
        p.start()
    time.sleep(3.0)  # let every worker build its visits and connect
    t0 = time.perf_counter()
    start.set()
    times = [out.get() for _ in workers]
    wall = time.perf_counter() - t0
    for p in workers:
        p.join()
    return procs * count / max(wall, max(times))


def bench_ping(url: str, count: int) -> float:
    store = RedisHistoryStore(url)
    store.open()
    t0 = time.perf_counter()
    for _ in range(count):
        store.client.ping()
    dt = time.perf_counter() - t0
    store.close()
    return count / dt


def side_parts(server: RedisServer, store_key: str, shards: int) -> dict[str, int]:
    """Bytes (MEMORY USAGE) of the separately counted keys of every shard."""
    c = server.client()
    parts = {"signatures": ["sig"], "validators": ["etag", "lastmod"], "bodies": ["body"]}
    parts["visit log"] = ["log", "logstart"]
    out = {}
    for label, names in parts.items():
        total = 0
        for s in range(shards):
            for name in names:
                total += c.memory_usage(f"{{{store_key}#{s}}}:{name}", samples=0) or 0
        out[label] = total
    return out


def build(store: RedisHistoryStore, urls: int) -> float:
    """N URLs in bulk (write_bulk), each in its fingerprint's shard; the mean URL length."""
    rng = np.random.default_rng(1)
    layout = store.layout
    fps = [rng.bytes(20) for _ in range(urls)]
    shard = np.fromiter((layout.locate(f)[0] for f in fps), dtype=np.int64, count=urls)
    local = np.zeros(urls, dtype=np.int64)
    for s in range(layout.shards):
        mine = np.flatnonzero(shard == s)
        local[mine] = np.arange(len(mine))
    ids = local * layout.shards + shard + 1
    rows = np.zeros(urls, dtype=ROW_DTYPE)
    n = rng.integers(0, 30, urls)
    rows["n"] = n
    rows["X"] = rng.binomial(n, rng.beta(0.3, 2.0, urls))
    rows["visits"] = n + 1
    rows["status"] = 200
    rows["last_visit_cycle"] = rng.integers(1, 31, urls)
    rows["last_change_cycle"] = -1
    rows["first_cycle"] = 1
    rows["last_failure_cycle"] = -1  # never failed
    rows["flags"] = PRESENT
    rows["aad_sum"] = rows["X"] * (n + 1) / 2.0
    rows["gad"] = rng.random(urls)
    rows["last_visit_time"] = 1.7e9 + rng.random(urls) * 1e6
    rows["last_change_time"] = np.nan
    rows["first_seen"] = 1.7e9
    for col in ("D", "A", "R", "M"):
        rows[col] = rng.integers(0, 5, urls)
    hosts: dict[str, int] = {}
    shape = shape_of({"url": "u", "callback": "parse_page", "meta": {}}, "u")
    blobs, length = [], 0
    for i in range(urls):
        url = url_of(i)
        length += len(url)
        hid = hosts.setdefault(host_of(url)[0], len(hosts) + 1)
        blobs.append(blob(url_part(url, hid), 1, shape))
    write_bulk(
        store.client, layout, ids=ids, rows=rows, fingerprints=fps, blobs=blobs,
        shapes=[shape], hosts=list(hosts),
    )  # fmt: skip
    store.client.set(layout.store("cycle"), 31)
    return length / max(1, urls)


def rescore(store: RedisHistoryStore, scorer: Scorer, k: int) -> dict[str, float]:
    t = {}
    t0 = time.perf_counter()
    arrays = store.arrays()
    t["arrays"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    sel = select_recrawls(arrays, scorer, k, now=time.time())
    t["score"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    dicts = store.requests(sel.ids)
    # as the distributed frontier pushes them: its default queue serializer (data)
    blobs = [serializer.dumps(d) for d in dicts]
    c = store.client
    c.delete("bench:recrawls")
    pipe = c.pipeline(transaction=False)
    for start in range(0, len(blobs), 5000):
        pipe.lpush("bench:recrawls", *blobs[start : start + 5000])
    pipe.execute()
    t["push"] = time.perf_counter() - t2
    t["total"] = time.perf_counter() - t0
    assert len(sel.ids) == k and c.llen("bench:recrawls") == k and None not in dicts
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--visits", type=int, default=20_000)
    ap.add_argument("--k", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--procs", default="1,2,4")
    args = ap.parse_args()
    from scrapy_recrawl.settings import DEFAULTS

    scorer = Scorer.from_settings({"RECRAWL_SCORER": DEFAULTS["RECRAWL_SCORER"]})
    procs = [int(p) for p in args.procs.split(",")]
    with RedisServer() as server:
        ping = bench_ping(server.url, args.visits)
        rates: dict[int, float] = {}
        parts: dict[str, int] = {}
        distinct = visited = 0
        for p in procs:
            server.client().flushall()
            rates[p] = bench_record(server.url, args.visits, p)
            if p == 1:
                with RedisHistoryStore(server.url, key="bench:record") as s:
                    distinct, visited = len(s), len(s.visit_log()["url_id"])
                    parts = side_parts(server, s.key, s.shards)
        sizes = sorted({n for n in (1_000_000, 4_000_000, args.urls) if n <= args.urls})
        scale = {}
        for n in sizes:
            server.client().flushall()
            before = server.client().info("memory")["used_memory"]
            store = RedisHistoryStore(server.url, key="bench:history")
            store.open()
            t0 = time.perf_counter()
            mean_len = build(store, n)
            built = time.perf_counter() - t0
            used = server.client().info("memory")["used_memory"] - before
            k = int(n * args.k)
            runs = [rescore(store, scorer, k) for _ in range(args.repeat)]
            store.close()
            scale[n] = (used / n, mean_len, built, runs, k)

    print(f"| record: {args.visits:,} visits per process | visits/s |")
    print("|---|---:|")
    print(f"| baseline: one PING round trip per visit | {ping:,.0f} |")
    for p in procs:
        print(f"| store.record() + close(), {p} process{'es' if p > 1 else ''} | {rates[p]:,.0f} |")
    print()
    print(
        f"| separately counted (1-process run: {distinct:,} URLs, {visited:,} visits) "
        "| bytes/URL | bytes/visit |"
    )
    print("|---|---:|---:|")
    for label, total in parts.items():
        print(f"| {label} | {total / max(1, distinct):,.0f} | {total / max(1, visited):,.0f} |")
    print()
    print(
        f"| URLs (top {args.k:.0%}) | bytes/URL | mean URL length | built in s "
        "| arrays s | score + top-k s | requests + push s | open a cycle s | s per 1M |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, (per, mean_len, built, runs, _k) in scale.items():
        med = {step: statistics.median(r[step] for r in runs) for step in runs[0]}
        print(
            f"| {n:,} | {per:,.0f} | {mean_len:.0f} | {built:.0f} | {med['arrays']:.2f} "
            f"| {med['score']:.2f} | {med['push']:.2f} | {med['total']:.2f} "
            f"| {med['total'] / n * 1e6:.2f} |"
        )
    n = max(scale)
    total = statistics.median(r["total"] for r in scale[n][3])
    total_1m = statistics.median(r["total"] for r in scale[min(scale)][3])
    print()
    print(
        f"summary: urls={n} bytes_per_url={scale[n][0]:.0f} rescore_s={total:.2f} "
        f"rescore_1m_s={total_1m:.2f} visits_per_s_1p={rates.get(1, 0):.0f} "
        f"visits_per_s_4p={rates.get(4, 0):.0f}"
    )


if __name__ == "__main__":
    main()
