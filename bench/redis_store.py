"""The Redis history store: visits recorded per second (one process and three), and
the time to rescore a million URLs held in Redis.

    .venv/bin/python bench/redis_store.py [--urls 1000000] [--visits 20000] [--k 0.05]

Starts its own ``redis-server`` (the tests' choice, tests/redis_server.py: the test
extra's Redis 6.2, or the binary ``RECRAWL_TEST_REDIS_SERVER`` names) on a free port,
with no persistence, and stops it afterwards.

* **record**: ``store.record()`` of V realistic visits (a 1 KB change signature, the
  request dict, a 6 KB body kept for 304s, a change observation), one process; then
  three processes at once on the same store (each V visits, the throughput is the
  sum). Baseline measured in the same run: a bare ``PING`` round trip per visit,
  the floor of any store that writes each visit when it arrives. With bags: what the
  middleware adds under ``RECRAWL_CHANGE_TEST = "chi2"`` and a ``D*`` terminal (paper
  004): read the URL's bags, then keep the new one (256 terms, the last 3 kept) and its
  distances (content/store.py's ``BagStore`` on Redis), one process.
* **rescore**: N URLs written in bulk with the store's own encoding (rows,
  fingerprints, URLs, request dicts), then what a process opening a cycle does:
  ``store.arrays()`` (the numpy snapshot), score every URL with ``RECRAWL_SCORER``'s
  default (``aad+``) and take the top ``k`` (``select_recrawls``), then fetch the
  top-k request dicts and push them to the shared recrawl queue. Target: under
  30 s for 1,000,000 URLs.
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
from scrapy_recrawl.history.redis_schema import ROW_DTYPE  # noqa: E402
from scrapy_recrawl.history.request_codec import encode_request  # noqa: E402
from scrapy_recrawl.scoring import Scorer  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

SIGNATURE = bytes(range(256)) * 4
BODY = b"<html><body>" + b"<p>some words on a page, repeated</p>" * 160 + b"</body></html>"


def visits(worker: int, count: int) -> list[Visit]:
    rng = np.random.default_rng(worker)
    urls = max(1, count // 2)
    out = []
    for i in range(count):
        u = int(rng.integers(urls))
        url = f"https://w{worker}.example.com/page/{u}.html"
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


def record_worker(url: str, worker: int, count: int, start, out, bags: bool = False) -> None:  # noqa: ANN001
    from scrapy_recrawl.change.bow import bag_from_hashes
    from scrapy_recrawl.content.store import BagStore

    batch = visits(worker, count)
    store = RedisHistoryStore(url)
    store.open()
    bag_store = BagStore(store, keep=3, window=3) if bags else None
    rng = np.random.default_rng(worker)
    words = [bag_from_hashes(rng.integers(0, 2000, 600)) for _ in range(16)]
    start.wait()
    t0 = time.perf_counter()
    for i, v in enumerate(batch):
        if bag_store is None:
            store.record(v)
            continue
        known = store.get(v.fingerprint, signature=False)
        old = bag_store.bags(known.id) if known is not None else []
        rec = store.record(v)
        bag_store.update(rec.id, words[i % 16], old)
    out.put(time.perf_counter() - t0)
    store.close()


def bench_record(url: str, count: int, procs: int, bags: bool = False) -> float:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=record_worker, args=(url, w, count, start, out, bags))
        for w in range(procs)
    ]
    for p in workers:
        p.start()
    time.sleep(2.0)  # let every worker build its visits and connect
    t0 = time.perf_counter()
    start.set()
    for p in workers:
        p.join()
    wall = time.perf_counter() - t0
    times = [out.get() for _ in workers]
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


def build(store: RedisHistoryStore, urls: int) -> None:
    """N URLs in bulk, in the encoding record() writes (as bench/history_load.py does)."""
    rng = np.random.default_rng(1)
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
    rows["present"] = 1
    rows["sad"] = rng.integers(0, 2, urls)
    rows["aad_sum"] = rows["X"] * (n + 1) / 2.0
    rows["gad"] = rng.random(urls)
    rows["last_visit_time"] = 1.7e9 + rng.random(urls) * 1e6
    rows["last_change_time"] = np.nan
    rows["first_seen"] = 1.7e9
    for col in ("D", "A", "R", "M"):
        rows[col] = rng.integers(0, 5, urls)
    c = store.client
    rps = store._rps
    raw = rows.tobytes()
    size = ROW_DTYPE.itemsize
    for shard in range(0, (urls + rps - 1) // rps):
        part = raw[shard * rps * size : min(urls, (shard + 1) * rps) * size]
        for start in range(0, len(part), 8 << 20):
            c.setrange(f"{store.key}:rows:{shard}", start, part[start : start + 8 << 20])
    step = 20_000
    for start in range(0, urls, step):
        ids = range(start + 1, min(urls, start + step) + 1)
        pipe = c.pipeline(transaction=False)
        pipe.hset(f"{store.key}:ids", mapping={i.to_bytes(20, "big"): i for i in ids})
        urlmap = {i: f"https://host{i % 997}.example.com/page/{i}.html" for i in ids}
        pipe.hset(f"{store.key}:urls", mapping=urlmap)
        pipe.hset(
            f"{store.key}:req",
            mapping={
                i: encode_request({"url": u, "callback": "parse_page", "meta": {}})
                for i, u in urlmap.items()
            },
        )
        pipe.execute()
    c.set(f"{store.key}:next_id", urls)
    c.set(f"{store.key}:cycle", 31)


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
    assert len(sel.ids) == k and c.llen("bench:recrawls") == k
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--visits", type=int, default=20_000)
    ap.add_argument("--k", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with RedisServer() as server:
        ping = bench_ping(server.url, args.visits)
        one = bench_record(server.url, args.visits, 1)
        server.client().flushall()
        three = bench_record(server.url, args.visits, 3)
        server.client().flushall()
        with_bags = bench_record(server.url, args.visits, 1, bags=True)
        from scrapy_recrawl.history.records import unpack_list

        # the bags live in the store's side storage (the plug-in's table, content/store.py)
        bags_key = f"{RedisHistoryStore(server.url).key}:side:content_bags"
        bag_bytes = server.client().memory_usage(bags_key) or 0
        kept = [len(unpack_list(b)) for b in server.client().hvals(bags_key)]
        server.client().flushall()

        store = RedisHistoryStore(server.url)
        store.open()
        t0 = time.perf_counter()
        build(store, args.urls)
        built = time.perf_counter() - t0
        used = server.client().info("memory")["used_memory"] / 2**20
        k = int(args.urls * args.k)
        from scrapy_recrawl.settings import DEFAULTS

        scorer = Scorer.from_settings({"RECRAWL_SCORER": DEFAULTS["RECRAWL_SCORER"]})
        runs = [rescore(store, scorer, k) for _ in range(args.repeat)]
        store.close()

    print(f"built a store of {args.urls:,} URLs in {built:.1f} s; Redis holds {used:,.0f} MiB")
    print()
    print("| record (visits/s) | visits/s |")
    print("|---|---:|")
    print(f"| baseline: one PING round trip per visit | {ping:,.0f} |")
    print(f"| store.record(), 1 process | {one:,.0f} |")
    print(f"| store.record(), 3 processes (sum) | {three:,.0f} |")
    print(f"| get + bags + store.record() + BagStore.update(), 1 process | {with_bags:,.0f} |")
    print()
    print(
        f"bags of words on Redis: {bag_bytes / max(1, len(kept)):,.0f} bytes per URL with "
        f"{np.mean(kept):.2f} bags of 256 terms on average (at most 3), "
        f"{bag_bytes / max(1, sum(kept)):,.0f} bytes per bag with Redis's hash overhead"
    )
    print()
    print(f"| rescore {args.urls:,} URLs, top {k:,} ({scorer}) | median s | min s |")
    print("|---|---:|---:|")
    for step, label in (
        ("arrays", "store.arrays(): numpy snapshot from Redis"),
        ("score", "score every URL + top-k (select_recrawls)"),
        ("push", "top-k request dicts to the shared recrawl queue"),
        ("total", "total"),
    ):
        vals = [r[step] for r in runs]
        print(f"| {label} | {statistics.median(vals):.2f} | {min(vals):.2f} |")
    med = statistics.median(r["total"] for r in runs)
    print()
    print(
        f"rescoring {args.urls:,} URLs: {med:.2f} s (target < 30 s): "
        f"{'met' if med < 30 else 'NOT MET'}; record: 1 process {one / ping:.2f}x the bare "
        f"PING rate, 3 processes {three / one:.2f}x one process"
    )


if __name__ == "__main__":
    main()
