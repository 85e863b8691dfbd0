"""Loop-time baskets (paper 001) on the example site: the E distribution, and the
``basket`` scorer beside the others.

    .venv/bin/python bench/baskets.py                  # both parts, 2000 pages, seed 1
    .venv/bin/python bench/baskets.py --hours-per-day 24
    .venv/bin/python bench/baskets.py --save-history site_probes.npz   # for recrawl-baskets

**Time.** The site changes at most once per simulated day, so one site day is
the time unit: ``--hours-per-day H`` says how many hours of the probe offsets
and baskets one site day stands for. The default, 4, maps the shortest basket
(4 h) to one site day, the finest change the site can show; the baskets are
then 1, 3, 6, 18 and 42 site days and the probes at 4 ... 72 h are at
1 ... 18 site days. With ``--hours-per-day 24`` (one site day = one real day)
the probes end after 3 days and the two shortest baskets are empty on this site.

**Part 1: E.** Each truth page (status 200) is first fetched at a seeded time
``t0`` in site days (``t0`` uniform in [0, 1) plus a whole day in [0, 30)),
then "fetched" again at ``t0 + offset / H`` for every probe offset: the
version served is the site's content model at ``floor(t)``, rendered and
compared with the crawl's own change detector (the example project's
settings), against the first version and against the previous probe, exactly
the counts a live probe records. The true basket comes from the page's longer
history: daily visits over ``--history-days`` (84, the paper's 12 weeks) after
``t0``, Cho & Garcia-Molina's interval estimate, nearest basket (log scale).
80% of the pages train the random forest, 20% test it; E = predicted - true.

**Part 2: the ``basket`` scorer.** The site's change matrix (truth pages x
days) is replayed with the project's simulator (GP4C's setting: 2 warm-up
cycles fetching everything, then 5% of the pages per cycle; one cycle = one
site day) for ``basket`` and the other scorers. The replay starts after the
probes of every page ended (day 20), and the pages' baskets are the forest's
predictions from those probes (the model trained on a site with another seed),
so nothing of the replayed days is seen by the classifier. ``due`` needs each
page's basket interval (the scheduler's ``basket_seconds`` column); the
simulator keeps no such column, so it is added to the simulator's state here.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from example_project.site import SiteModel, page_path  # noqa: E402
from scrapy_recrawl.change import ChangeDetector  # noqa: E402
from scrapy_recrawl.commands.baskets import format_confusion, format_errors  # noqa: E402
from scrapy_recrawl.estimate.baskets import (  # noqa: E402
    DEFAULT_BASKETS,
    DEFAULT_OFFSETS,
    PAPER_E,
    BasketModel,
    confusion_matrix,
    empty_features,
    error_distribution,
    mean_change_interval,
    nearest_basket,
    relevance_share,
    set_probe,
    split_train_test,
)

#: The example project's detector settings (the ad slot is noise, not a change).
DETECTOR_SETTINGS = {"RECRAWL_IGNORE_XPATHS": ['//div[@class="ad"]']}


def site_dataset(
    pages: int = 2000,
    seed: int = 1,
    hours_per_day: float = 4.0,
    history_days: int = 84,
    offsets: tuple[float, ...] = DEFAULT_OFFSETS,
    baskets: tuple[float, ...] = DEFAULT_BASKETS,
    relevance: bool = False,
) -> dict[str, np.ndarray]:
    """Probe features and true baskets of every truth page of a site (module docstring)."""
    model = SiteModel(pages=pages, seed=seed)
    detector = ChangeDetector.from_settings(DETECTOR_SETTINGS)
    rng = np.random.default_rng(seed)
    ids, feats, intervals, klass, rel = [], [], [], [], []
    for i in range(pages):
        t0 = float(rng.integers(0, 30)) + float(rng.random())
        if not model.is_truth(i):
            continue
        url = "http://example.invalid" + page_path(i)
        cache: dict[int, object] = {}

        def sig(version: int, i: int = i, url: str = url, cache: dict = cache) -> object:
            if version not in cache:
                r = model.render_page(i, version)
                cache[version] = detector.signature(
                    r.head + r.middle + r.tail, url, "text/html; charset=utf-8"
                )
            return cache[version]

        first = sig(model.version(i, math.floor(t0)))
        prev = first
        row = empty_features(len(offsets))
        for j, off in enumerate(offsets):
            cur = sig(model.version(i, math.floor(t0 + off / hours_per_day)))
            a, b = detector.compare(first, cur), detector.compare(prev, cur)
            set_probe(
                row,
                j,
                (a.added, a.removed, a.modified, a.attributes),
                (b.added, b.removed, b.modified, b.attributes),
            )
            prev = cur
        d0 = math.floor(t0)
        versions = [model.version(i, d0 + k) for k in range(history_days + 1)]
        changed = np.diff(versions) > 0
        interval = mean_change_interval(hours_per_day, history_days, int(changed.sum()))
        if relevance:
            counts = np.zeros((4, history_days))
            for k in np.flatnonzero(changed):
                c = detector.compare(sig(versions[k]), sig(versions[k + 1]))
                counts[:, k] = (c.added, c.removed, c.modified, c.attributes)
            rel.append(relevance_share(*counts))
        ids.append(i)
        feats.append(row)
        intervals.append(interval)
        klass.append(model.specs[i].klass)
    out = {
        "page": np.asarray(ids),
        "features": np.vstack(feats),
        "interval_hours": np.asarray(intervals),
        "basket": nearest_basket(np.asarray(intervals), baskets),
        "klass": np.asarray(klass),
        "offsets": np.asarray(offsets, dtype=float),
        "baskets": np.asarray(baskets, dtype=float),
    }
    if relevance:
        out["relevance"] = np.asarray(rel)
    return out


def evaluate(
    data: dict[str, np.ndarray], *, test_share: float = 0.2, seed: int = 0, relevance: bool = False
) -> dict:
    """Train on 80% of the pages, test on 20%: E distribution and confusion matrix."""
    train, test = split_train_test(len(data["basket"]), test_share, seed)
    model = BasketModel.fit(
        data["features"][train],
        data["basket"][train],
        offsets=tuple(data["offsets"]),
        baskets=tuple(data["baskets"]),
        relevance=data["relevance"][train] if relevance else None,
        seed=seed,
    )
    pred = model.predict(data["features"][test])
    true = data["basket"][test]
    return {
        "model": model,
        "errors": error_distribution(pred, true),
        "confusion": confusion_matrix(pred, true, len(data["baskets"])),
        "test": test,
        "predicted": pred,
    }


# --------------------------------------------------------------------------- part 2


def site_changes(model: SiteModel, pages: np.ndarray, first: int, days: int) -> np.ndarray:
    rows = np.zeros((len(pages), days), dtype=np.uint8)
    for r, i in enumerate(pages):
        d = np.asarray(model.change_days(int(i), first + days - 1), dtype=np.int64)
        d = d[d >= first] - first
        rows[r, d] = 1
    return rows


def replay_scorers(
    pages: int,
    seed: int,
    train_seed: int,
    hours_per_day: float,
    scorers: list[str],
    start_day: int = 20,
    days: int = 60,
) -> dict[str, dict[str, float]]:
    import importlib

    # the module (scrapy_recrawl.learn re-exports a function of the same name)
    sim = importlib.import_module("scrapy_recrawl.core.simulate")

    train = site_dataset(pages, train_seed, hours_per_day)
    model = BasketModel.fit(train["features"], train["basket"], seed=0)
    # the replayed site: probed in its first 18 site days, replayed from start_day
    site = site_dataset(pages, seed, hours_per_day)
    predicted = model.predict(site["features"])
    changes = site_changes(SiteModel(pages=pages, seed=seed), site["page"], start_day, days)
    basket_s = np.asarray(DEFAULT_BASKETS)[predicted] * 3600.0
    true_s = np.asarray(DEFAULT_BASKETS)[site["basket"]] * 3600.0
    results = {}
    original = sim.new_state
    for name in [*scorers, "basket (true baskets)"]:
        column = true_s if name.startswith("basket (true") else basket_s
        policy = "basket" if name.startswith("basket") else name

        def with_baskets(n: int, column: np.ndarray = column) -> dict[str, np.ndarray]:
            # the simulator has no basket column; the scheduler adds it the same way
            return {**original(n), "basket_seconds": column.copy()}

        with mock.patch.object(sim, "new_state", with_baskets):
            r = sim.simulate(changes, policy, warmup=2, k=0.05, seed=0, cycle_hours=hours_per_day)
        results[name] = r.summary()
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hours-per-day", type=float, default=4.0)
    ap.add_argument("--history-days", type=int, default=84)
    ap.add_argument("--relevance", action="store_true", help="also report the relevance split")
    ap.add_argument("--save-history", help="write the site's probe features and true baskets")
    ap.add_argument("--part", choices=("e", "replay", "both"), default="both")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.part in ("e", "both"):
        data = site_dataset(
            args.pages, args.seed, args.hours_per_day, args.history_days, relevance=args.relevance
        )
        print(
            f"example site: {args.pages} pages, seed {args.seed}, {len(data['basket'])} truth "
            f"pages; one site day = {args.hours_per_day:g} h; labels from {args.history_days} "
            f"daily visits ({time.perf_counter() - t0:.1f}s)\n"
        )
        counts = np.bincount(data["basket"], minlength=len(DEFAULT_BASKETS))
        print("true baskets: " + ", ".join(f"{int(c)}" for c in counts), "\n")
        if args.save_history:
            np.savez_compressed(args.save_history, **data)
            print(f"saved {args.save_history}\n")
        variants = [False, True] if args.relevance else [False]
        for rel in variants:
            res = evaluate(data, relevance=rel)
            title = "with the relevance split" if rel else "random forest"
            print(f"## E = predicted - true basket ({title}), 20% test pages\n")
            print(format_errors(res["errors"], PAPER_E))
            print()
            print(format_confusion(res["confusion"], DEFAULT_BASKETS))
            print()
    if args.part in ("replay", "both"):
        scorers = ["basket", "aad+", "cg+", "age", "rand", "gp4c", "oracle"]
        res = replay_scorers(args.pages, args.seed, args.seed + 100, args.hours_per_day, scorers)
        print(
            f"## Replay of the site (seed {args.seed}, days 20-79), model trained on seed "
            f"{args.seed + 100}; W = 2, k = 5%\n"
        )
        print("| scorer | ChangeRate | NDCG | freshness |")
        print("|---|---:|---:|---:|")
        for name, m in res.items():
            print(f"| {name} | {m['change_rate']:.4f} | {m['ndcg']:.4f} | {m['freshness']:.4f} |")
    print(f"\n({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
