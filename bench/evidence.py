"""What the evidence plug-in (docs/evidence.md) adds to a cycle's opening, at scale.

    .venv/bin/python bench/evidence.py [--urls 1000000] [--due 1000] [--store-urls 200000]
        [--dir /tmp/scrapy-recrawl-evidence] [--repeat 5]

Two figures, each as a ratio to what the cycle does anyway, in the same run:

* the cycle core's pick (``select_recrawls``, ``aad+``, a 5% budget) over ``--urls`` URLs
  with a ``due_now`` column marking ``--due`` of them, against the same pick without
  the column (what every crawl without the plug-in does): the core's due-first ranking;
* the plug-in's ``columns()`` on a SQLite store of ``--store-urls`` URLs (built in bulk
  as bench/sqlite_scale.py builds one, kept in ``--dir``) holding a sitemap record for
  every URL, a tenth of them pending, and a weight for one URL in a hundred, against
  the store's own ``arrays()`` (the columns every cycle reads).

Each time is the best of ``--repeat`` runs, interleaved (A, B, A, B, ...) so a load
that changes on a shared machine shifts both.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scrapy import Spider  # noqa: E402
from scrapy.settings import Settings  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402
from sqlite_scale import build  # noqa: E402

from scrapy_recrawl.core.selection import DUE_NOW, select_recrawls  # noqa: E402
from scrapy_recrawl.core.simulate import new_state  # noqa: E402
from scrapy_recrawl.evidence import announce, importance  # noqa: E402
from scrapy_recrawl.evidence.plugin import EvidencePlugin  # noqa: E402
from scrapy_recrawl.history import HistoryArrays, SqliteHistoryStore  # noqa: E402
from scrapy_recrawl.scoring import Scorer  # noqa: E402


def interleaved(
    a: Callable[[], object], b: Callable[[], object], repeat: int
) -> tuple[float, float]:
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, fn in enumerate((a, b)):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best[0], best[1]


def synthetic_arrays(size: int, rng: np.random.Generator) -> HistoryArrays:
    cols = new_state(size)
    cols["n"] = rng.integers(1, 50, size).astype(cols["n"].dtype)
    cols["X"] = (cols["n"] * rng.random(size)).astype(cols["X"].dtype)
    cols["aad_sum"] = cols["X"] * rng.random(size)
    cols["last_visit_cycle"] = rng.integers(0, 9, size).astype(cols["last_visit_cycle"].dtype)
    cols["last_visit_time"] = 1e9 + cols["last_visit_cycle"] * 3600.0
    cols["gone"] = np.zeros(size, dtype=bool)
    return HistoryArrays(np.arange(1, size + 1, dtype=np.int64), cols, 10)


def bench_selection(size: int, due: int, repeat: int) -> tuple[float, float]:
    rng = np.random.default_rng(18)
    arrays = synthetic_arrays(size, rng)
    scorer = Scorer.from_settings(Settings({"RECRAWL_SCORER": "aad+"}))
    k = size // 20
    marked = np.zeros(size, dtype=bool)
    marked[rng.choice(size, due, replace=False)] = True
    with_due = HistoryArrays(arrays.ids, {**arrays.columns, DUE_NOW: marked}, arrays.cycle)
    check = select_recrawls(with_due, scorer, k, now=1e9 + 40000)
    assert check.due == min(due, k) and marked[check.ids[: check.due] - 1].all()
    return interleaved(
        lambda: select_recrawls(arrays, scorer, k, now=1e9 + 40000),
        lambda: select_recrawls(with_due, scorer, k, now=1e9 + 40000),
        repeat,
    )


class _Spider(Spider):
    name = "bench"


def bench_columns(size: int, folder: Path, repeat: int) -> tuple[float, float, int]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"evidence-{size}.sqlite3"
    if not path.exists():
        build(str(path), size)
    store = SqliteHistoryStore(path)
    store.open()
    try:
        arrays = store.arrays()
        seen = float(np.nanmax(arrays.columns["last_visit_time"]))
        records = []
        for i, url_id in enumerate(arrays.ids.tolist()):
            rec = announce.empty_record()
            rec["period"] = 86400.0
            rec["lastmod"] = seen + 10 if i % 10 == 0 else seen - 86400
            rec["pending"] = 1 if i % 10 == 0 else 0
            rec["n0"] = 1 << 40  # never observed since: stays pending, no write
            records.append((url_id, announce.pack(rec)))
        store.side_put(announce.TABLE, records)
        weights = [(int(u), importance.pack(2.0)) for u in arrays.ids[::100].tolist()]
        store.side_put(importance.TABLE, weights)
        plugin = EvidencePlugin(get_crawler(_Spider, {"RECRAWL_EVIDENCE": True}), store)
        out: dict[str, np.ndarray] = {}
        base, cols = interleaved(
            store.arrays, lambda: out.update(plugin.columns(arrays, now=seen + 100)), repeat
        )
        return base, cols, int(out[DUE_NOW].sum())
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument("--store-urls", type=int, default=200_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/scrapy-recrawl-evidence"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    plain, due = bench_selection(args.urls, args.due, args.repeat)
    arrays_s, columns_s, due_now = bench_columns(args.store_urls, args.dir, args.repeat)
    print("| what | baseline | with evidence | ratio |")
    print("|---|---|---|---|")
    print(
        f"| select_recrawls, {args.urls:,} URLs, {args.due:,} due now "
        f"| {plain * 1e3:.1f} ms (no due_now column) | {due * 1e3:.1f} ms | {due / plain:.2f} |"
    )
    print(
        f"| columns(), SQLite, {args.store_urls:,} URLs with a sitemap record each "
        f"({due_now:,} due now) | {arrays_s * 1e3:.0f} ms (store.arrays()) "
        f"| {columns_s * 1e3:.0f} ms | {columns_s / arrays_s:.2f} |"
    )


if __name__ == "__main__":
    main()
