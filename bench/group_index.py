"""What the pooled priors' ``group`` column costs a crawl: the first cycle reads every
URL once, later cycles only the new ones (core/groups.py: GroupIndex).

    .venv/bin/python bench/group_index.py [--size 1000000] [--dir /tmp/scrapy-recrawl-scale]

A SQLite store of ``--size`` URLs over ``size / 200`` hosts is built as
bench/sqlite_scale.py builds it (reused when that bench left one with ``--keep``).
Then, as the scheduler plans cycles with a pooled scorer: ``store.arrays()``;
``GroupIndex.codes`` the first time (every URL read: ``store.urls`` + the hosts);
then again with 1% new URLs (only those read); then with none. Each line gives the
seconds and, for comparison, ``store.arrays()``'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sqlite_scale import build  # noqa: E402

from scrapy_recrawl.core.groups import GroupIndex  # noqa: E402
from scrapy_recrawl.history import SqliteHistoryStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/scrapy-recrawl-scale")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, f"history-{args.size}.sqlite3")
    if not os.path.exists(path + ".built"):
        if os.path.exists(path):
            os.remove(path)
        build(path, args.size)
        Path(path + ".built").touch()
    store = SqliteHistoryStore(path, read_only=True)
    store.open()
    t0 = time.perf_counter()
    arrays = store.arrays()
    t_arrays = time.perf_counter() - t0
    ids = arrays.ids
    index = GroupIndex()
    # the first cycle: every URL; then 1% of the ids as if new (dropped, then asked again)
    t0 = time.perf_counter()
    codes = index.codes(ids, store.urls)
    t_first = time.perf_counter() - t0
    cut = len(ids) - len(ids) // 100
    warm = GroupIndex()
    warm.codes(ids[:cut], store.urls)
    t0 = time.perf_counter()
    again = warm.codes(ids, store.urls)
    t_new = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm.codes(ids, store.urls)
    t_none = time.perf_counter() - t0
    store.close()
    assert np.array_equal(codes, again) and warm.urls_read == len(ids)
    print(f"{len(ids):,} URLs, {int(codes.max()) + 1:,} hosts (SQLite)")
    print()
    print("| step | seconds | x store.arrays() |")
    print("|---|---:|---:|")
    for name, sec in (
        ("store.arrays()", t_arrays),
        ("group column, first cycle (every URL read)", t_first),
        ("group column, 1% new URLs", t_new),
        ("group column, no new URL", t_none),
    ):
        print(f"| {name} | {sec:.3f} | {sec / t_arrays:.2f} |")


if __name__ == "__main__":
    main()
