"""The items signal against the text signal on the reference shop: what the scheduler
finds, and what the crawl costs (issue 31).

    .venv/bin/python bench/items_signal.py [--cycles 15] [--repeat 5] [--seed 1]
        [--products 200] [--categories 14] [--budget 5%] [--keep DIR] [--quick] [--cost-only]

**ChangeRate**: for each signal (``RECRAWL_CHANGE_SIGNAL = "text"``, then ``"items"``),
``--cycles`` real ``scrapy crawl shop`` runs (example_project/reference/crawl.py: the
example spider and the add-on line; a SQLite store; default budget unless
``--budget``), the site's day moved on after each. True ChangeRate = the fetches of
cycles 2..N that found a real change (the page's version, by the site's truth, differs
from the one its previous fetch saw) / the fetches of those cycles. Both runs see the
same site (same seed, same days) and spend the same budget; the scorer is the default.
Precision and recall of the recorded verdicts (product and category pages, cycles 2..N)
are shown beside it.

**Cost**: the same two-cycle crawl (a full first crawl, then a second at 100% budget so
that every page is compared again), text then items, alternated ``--repeat`` times
(fresh store and a fresh site each time). The figure is CPU seconds of the crawl
processes (user + system, from ``getrusage(RUSAGE_CHILDREN)``): wall time on a loaded
machine is noise. ``cost ratio`` = text CPU / items CPU (>= 0.95: the items signal
costs at most ~5% more), the median of the per-repeat ratios.

``--quick``: 4 cycles, 60 products, 2 repeats (a smoke test). ``--cost-only``: the cost
part alone (no ChangeRate cycles), e.g. to compare two checkouts' costs.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from example_project.reference import (  # noqa: E402
    RunningReferenceSite,
    detection,
    visits_from_store,
)
from example_project.reference.crawl import crawl, make_project, run_cycles  # noqa: E402
from scrapy_recrawl.history import SqliteHistoryStore  # noqa: E402

SIGNALS = ("text", "items")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def settings_for(signal: str, budget: str | None) -> str:
    out = f'RECRAWL_CHANGE_SIGNAL = "{signal}"\n'
    if budget:
        out += f"RECRAWL_BUDGET = {budget!r}\n"
    return out


def change_rate(site, visits, first_day: int) -> tuple[int, int]:
    """(fetches from ``first_day`` on that found a real change, fetches from it)."""
    last: dict[str, int | None] = {}
    found = fetches = 0
    for v in sorted(visits, key=lambda v: v.day):
        if v.status not in (200, 304):
            continue
        path = urlsplit(v.url).path
        version = site.version(path, v.day)
        if version is None:
            continue
        if v.day >= first_day:
            fetches += 1
            if path in last and last[path] != version:
                found += 1
        last[path] = version
    return found, fetches


def rate_run(signal: str, args: argparse.Namespace, work: Path) -> dict:
    root = work / f"rate-{signal}"
    root.mkdir(parents=True)
    project = make_project(root / "project", settings_for(signal, args.budget))
    store = str(root / "history.sqlite3")
    shop = {"products": args.products, "categories": args.categories}
    with RunningReferenceSite(seed=args.seed, sites=["shop"], **shop) as running:
        stats = run_cycles(running.site, running.base_url, "shop", args.cycles, project, store)
        with SqliteHistoryStore(store, read_only=True) as s:
            visits = visits_from_store(s)
        found, fetches = change_rate(running.site, visits, first_day=1)
        d = detection(running.site.changes(), visits, from_day=1, kinds={"product", "category"})
    return {
        "signal": signal,
        "found": found,
        "fetches": fetches,
        "rate": found / fetches if fetches else float("nan"),
        "precision": d.precision,
        "recall": d.recall,
        "judged": sum(s.get("recrawl/items_signal/judged", 0) for s in stats),
        "fallback": sum(s.get("recrawl/items_signal/fallback", 0) for s in stats),
    }


def cost_run(signal: str, args: argparse.Namespace, work: Path, i: int) -> float:
    root = work / f"cost-{signal}-{i}"
    root.mkdir(parents=True)
    project = make_project(root / "project", settings_for(signal, None))
    store = str(root / "history.sqlite3")
    shop = {"products": args.products, "categories": args.categories}
    with RunningReferenceSite(seed=args.seed, sites=["shop"], **shop) as running:
        url = f"{running.base_url}/shop/"
        before = children_cpu()
        crawl(project, "shop", url, store)
        running.site.advance()
        crawl(project, "shop", url, store, {"RECRAWL_BUDGET": "100%"})
        return children_cpu() - before


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def rate_table(args: argparse.Namespace, work: Path) -> None:
    rows = [rate_run(signal, args, work) for signal in SIGNALS]
    print(
        "\n| signal | true ChangeRate | changes found / fetches | precision | recall | judged by items | text fallback |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['signal']} | {r['rate']:.4f} | {r['found']} / {r['fetches']} | "
            f"{fmt(r['precision'])} | {fmt(r['recall'])} | {r['judged']} | {r['fallback']} |"
        )
    diff = rows[1]["rate"] - rows[0]["rate"]
    print(f"\nChangeRate items - text: {diff:+.4f} (issue 31: >= -0.01)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--products", type=int, default=200)
    ap.add_argument("--categories", type=int, default=14)
    ap.add_argument("--budget", default=None, help="RECRAWL_BUDGET (default: the add-on's)")
    ap.add_argument("--keep", default=None, help="keep the projects and stores here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cost-only", action="store_true", help="only the cost part")
    args = ap.parse_args(argv)
    if args.quick:
        args.cycles, args.products, args.categories, args.repeat = 4, 60, 6, 2
    work = Path(args.keep or tempfile.mkdtemp(prefix="items-signal-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"reference shop: {args.products} products, {args.categories} categories, seed "
        f"{args.seed}; {args.cycles} cycles; budget {args.budget or 'default'}"
    )
    if not args.cost_only:
        rate_table(args, work)
    ratios = []
    print("\n| repeat | text CPU s | items CPU s | text / items |")
    print("|---|---|---|---|")
    for i in range(args.repeat):
        order = SIGNALS if i % 2 == 0 else SIGNALS[::-1]  # alternate A/B
        cpu = {signal: cost_run(signal, args, work, i) for signal in order}
        ratios.append(cpu["text"] / cpu["items"])
        print(f"| {i + 1} | {cpu['text']:.2f} | {cpu['items']:.2f} | {ratios[-1]:.3f} |")
    print(
        f"\ncost ratio text / items (median of {args.repeat}): {statistics.median(ratios):.3f} "
        "(issue 31: >= 0.95)"
    )
    print(f"work directory: {work}")


if __name__ == "__main__":
    main()
