"""Real crawls of the reference shop and news site, scored against the site's own truth.

    .venv/bin/python bench/reference_site.py [--cycles 15] [--sites shop,news]
        [--scorers aad+,nutch,chogm,age,learned] [--seed 1] [--products 200]
        [--categories 14] [--monitor-share 0] [--train-seed S]
        [--train-monitor-share 0.2] [--set 'NAME = VALUE'] [--no-full]
        [--keep DIR] [--quick]

For each site and each scorer: ``--cycles`` real ``scrapy crawl shop`` (or ``news``)
in a project whose settings are the example spiders, the add-on line and
``RECRAWL_SCORER`` (a SQLite store; example_project/reference/crawl.py), the site's
day moved on after each cycle (cycle ``c`` sees day ``c - 1``). Beside them, the
**full recrawl**: the same spider *without the add-on* (no store, no budget, Scrapy's
own dupefilter per run), what a plain Scrapy cron job does: every page every cycle.
It is the baseline of the ratio.

The learned scorer, as a user gets one (docs/evolve.md): a **training crawl** of the
same kind of site with another seed (``--train-seed``, default seed + 1: other
products, other rates, the same days), ``--cycles`` cycles with a monitoring sample
(``--train-monitor-share``, default 0.2: the complete histories evolve learns from)
and the aad+ scorer; ``scrapy recrawl-evolve`` (small settings: population 30, 5
generations, one seed) on its store; then the scored crawl of this site with default
settings and the ``--output`` JSON it wrote as ``RECRAWL_SCORER``. The training
crawl's requests are not in any row. If evolve refuses or runs over 300 s, the bench
says why and crawls with the ``gp4c`` preset instead, labelled ``gp4c (for learned)``.
``--monitor-share S`` sets ``RECRAWL_MONITOR_SHARE`` in every scored add-on run (not
the default user's crawl any more; the sample is outside the budget and counted in
"requests").

Per cycle (one table per site and policy):

* **true**: the true freshness of the known pages at the cycle's end (pages fetched at
  least once and live that day; ``score.freshness_by_day``), **known**: how many, and
  **live**: how many pages the site had that day (the summary's ``known / live``: new
  pages never fetched are not in the freshness figure, they show here and in the
  new pages' columns);
* **estimate**: the crawl's ``recrawl/freshness_estimate``, which the *next* cycle's
  crawl computes when it opens, for the cycle before (``recrawl/freshness_estimate_cycle``,
  docs/freshness.md); the last cycle's from ``recrawl-report``'s computation on the
  store (``insight.cycles.estimate_by_cycle``; a ``*`` marks it). The two are checked
  against each other on every other cycle (the summary says if they ever differ);
* **floor**: the chance floor of any estimate (``score.expected_freshness_by_day``): the
  share an estimator that knew each page's change process exactly (the site's model)
  would give for the same fetches; its distance from **true** is chance alone, what no
  estimate from the crawl's observations is expected to beat (the summary's "chance
  floor" column: its MAE, as the estimate's);
* **P / R**: precision and recall of the ``changed`` verdict in that cycle
  (``score.detection``: product and category pages of the shop; articles, the index
  and the listings of the news site);
* **new pages**: pages created after day 0 up to that day: mean and max fetch latency
  in days (first fetch day - creation day) and how many were never fetched;
* **requests**: what the site served in the cycle (its served log: every request, the
  start page, pair fetches and the monitoring sample included), of which **pairs**
  (``recrawl/boilerplate/pair_fetches``); the crawl's ``downloader/request_count``
  is compared with it (the summary says if they differ);
* **req/fresh**: requests / (true freshness x known pages): requests spent per page
  kept fresh in that cycle.

The summary (one row per site and policy; cycles 3..N, the budgeted ones):
mean true freshness, MAE (and largest error) of the estimate and of the chance floor, precision/recall from
cycle 3 on, new pages' latency over the run, requests per cycle, requests per page kept
fresh, and that figure as a share of the full recrawl's (the figure users compare:
below 1, the policy keeps a page fresh for fewer requests than refetching everything).
Read it with the freshness column: a policy that fetches nothing spends nothing per
page it happens to keep fresh.

``--quick``: 4 cycles, a 60-product shop, aad+ and the full recrawl (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from example_project.reference import (  # noqa: E402
    RunningReferenceSite,
    Visit,
    detection,
    expected_freshness_by_day,
    freshness_by_day,
    new_page_latency,
    page_path,
    visits_from_served,
    visits_from_store,
)
from example_project.reference.crawl import crawl, make_project  # noqa: E402
from example_project.reference.score import FETCH_STATUSES  # noqa: E402
from scrapy_recrawl.cycle_summary import FRESHNESS_CYCLE_STAT, FRESHNESS_STAT  # noqa: E402
from scrapy_recrawl.history.sqlite import SqliteHistoryStore  # noqa: E402
from scrapy_recrawl.insight.cycles import estimate_by_cycle  # noqa: E402
from scrapy_recrawl.insight.log import VisitLog  # noqa: E402

#: the first cycle of the means: the first budgeted one (2 warm-up cycles)
FIRST_SCORED = 3
#: the pages whose verdicts are scored, per site
DETECT_KINDS = {"shop": {"product", "category"}, "news": {"article", "index", "listing"}}
FULL = "full"  # the baseline's label
LEARNED = "learned"
PAIR_STAT = "recrawl/boilerplate/pair_fetches"
#: recrawl-evolve's settings here: a minute at most on this history
EVOLVE_ARGS = ["--population", "30", "--generations", "5", "--seeds", "1"]

PLAIN_SETTINGS = """\
# A plain Scrapy project: the example spiders, no add-on (a cron job's full recrawl).
SPIDER_MODULES = ["example_project.recrawl_demo.spiders"]
"""


@dataclass
class CycleRow:
    cycle: int
    true: float | None
    known: int
    live: int  # pages live on the site that day (the known ones are a part)
    estimate: float | None
    estimate_from: str  # "stat", "report" or ""
    floor: float | None  # the chance floor's figure (score.expected_freshness_by_day)
    low: float | None
    high: float | None
    det: tuple[int, int, int, int]  # tp fp fn tn in this cycle
    lat_mean: float | None
    lat_max: int | None
    never: int
    requests: int
    pairs: int
    request_count: int | None  # downloader/request_count

    @property
    def precision(self) -> float | None:
        tp, fp, _, _ = self.det
        return tp / (tp + fp) if tp + fp else None

    @property
    def recall(self) -> float | None:
        tp, _, fn, _ = self.det
        return tp / (tp + fn) if tp + fn else None

    @property
    def per_fresh(self) -> float | None:
        if not self.true or not self.known:
            return None
        return self.requests / (self.true * self.known)


@dataclass
class Run:
    site: str
    policy: str  # the row's label
    scorer: str | None  # RECRAWL_SCORER (None: the full recrawl without the add-on)
    rows: list[CycleRow] = field(default_factory=list)
    precision: float | None = None
    recall: float | None = None
    compared: int = 0
    lat_mean: float | None = None
    lat_max: int | None = None
    new_pages: int = 0
    never: int = 0
    stat_vs_report: float = 0.0  # the largest |stat - report| over the cycles with both
    count_mismatch: int = 0  # cycles where downloader/request_count != served
    seconds: float = 0.0
    note: str = ""


def fmt(x: float | int | None, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def known_by_day(truth, visits: list[Visit], days: list[int]) -> dict[int, int]:
    """The known pages at the end of each day: fetched (200/304, live) by then, live on it."""
    first: dict[str, int] = {}
    for v in visits:
        if v.status not in FETCH_STATUSES:
            continue
        path = page_path(v.url)
        t = truth.get(path)
        if t is not None and t.version(v.day) is not None:
            first[path] = min(first.get(path, v.day), v.day)
    return {
        d: sum(1 for p, f in first.items() if f <= d and truth[p].version(d) is not None)
        for d in days
    }


def site_kwargs(name: str, args: argparse.Namespace, seed: int | None = None) -> dict:
    kw: dict = {"seed": args.seed if seed is None else seed, "sites": [name]}
    if name == "shop":
        kw.update(products=args.products, categories=args.categories)
    return kw


def crawl_run(
    name: str,
    label: str,
    scorer: str | None,
    args: argparse.Namespace,
    work: Path,
    *,
    seed: int | None = None,
    monitor: float | None = None,
) -> tuple[Run, Path, Path]:
    """The crawls of one policy on a fresh site; scored. Returns the run, its project
    directory and its store (for recrawl-evolve). ``seed``: another site than
    ``--seed``'s; ``monitor``: this run's RECRAWL_MONITOR_SHARE (default
    ``--monitor-share``)."""
    out = work / name / label.replace("+", "p").replace(" ", "_")
    share = args.monitor_share if monitor is None else monitor
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    settings = ""
    if scorer is not None:
        settings = f"RECRAWL_SCORER = {scorer!r}\n"
        if share:
            settings += f"RECRAWL_MONITOR_SHARE = {share!r}\n"
        for assignment in args.set:
            settings += assignment + "\n"
        project = make_project(out / "project", settings)
    else:
        project = make_project(out / "project")
        (project / "refproj" / "settings.py").write_text(PLAIN_SETTINGS)
    store = out / "history.sqlite3"
    run = Run(name, label, scorer)
    t0 = time.monotonic()
    stats: list[dict] = []
    served: list[list] = []
    with RunningReferenceSite(**site_kwargs(name, args, seed)) as running:
        site = running.site
        for _ in range(args.cycles):
            k = len(site.served())
            stats.append(crawl(project, name, f"{running.base_url}/{name}/", str(store)))
            served.append(site.served(k))
            site.advance()
        truth = site.changes()
        all_served = site.served()
    run.seconds = time.monotonic() - t0
    cycles = list(range(1, args.cycles + 1))
    days = [c - 1 for c in cycles]
    report: dict[int, object] = {}
    if scorer is not None:
        with SqliteHistoryStore(str(store), read_only=True) as s:
            visits = visits_from_store(s)
            log = VisitLog.read(s)
            report = estimate_by_cycle(s, log, np.asarray(cycles))
    else:
        visits = visits_from_served(all_served)
    kinds = DETECT_KINDS[name]
    fresh = freshness_by_day(truth, visits, days)
    floor = expected_freshness_by_day(site.unchanged_chance, truth, visits, days)
    known = known_by_day(truth, visits, days)
    stat_at: dict[int, tuple[float, float | None, float | None]] = {}
    for st in stats:
        if FRESHNESS_STAT in st and FRESHNESS_CYCLE_STAT in st:
            stat_at[int(st[FRESHNESS_CYCLE_STAT])] = (
                float(st[FRESHNESS_STAT]),
                st.get(FRESHNESS_STAT + "_low"),
                st.get(FRESHNESS_STAT + "_high"),
            )
    for c, d in zip(cycles, days, strict=True):
        upto = [v for v in visits if v.day <= d]
        det = detection(truth, upto, from_day=d, kinds=kinds)
        lat = new_page_latency(truth, visits, up_to=d)
        est: float | None = None
        low = high = None
        src = ""
        rep = report.get(c)
        if c in stat_at:
            est, low, high = stat_at[c]
            src = "stat"
            if rep is not None:
                run.stat_vs_report = max(run.stat_vs_report, abs(est - rep.share))  # type: ignore[attr-defined]
        elif rep is not None:
            est, low, high = rep.share, rep.low, rep.high  # type: ignore[attr-defined]
            src = "report"
        st = stats[c - 1]
        rc = st.get("downloader/request_count")
        row = CycleRow(
            cycle=c,
            true=fresh[d],
            known=known[d],
            live=sum(1 for t in truth.values() if t.version(d) is not None),
            estimate=est,
            estimate_from=src,
            floor=floor[d],
            low=low,
            high=high,
            det=(det.tp, det.fp, det.fn, det.tn),
            lat_mean=lat.mean,
            lat_max=lat.max,
            never=len(lat.never),
            requests=len(served[c - 1]),
            pairs=int(st.get(PAIR_STAT, 0)),
            request_count=None if rc is None else int(rc),
        )
        if row.request_count is not None and row.request_count != row.requests:
            run.count_mismatch += 1
        run.rows.append(row)
    if scorer is not None:
        total = detection(truth, visits, from_day=FIRST_SCORED - 1, kinds=kinds)
        run.precision, run.recall, run.compared = total.precision, total.recall, total.compared
    lat = new_page_latency(truth, visits, up_to=days[-1])
    run.lat_mean, run.lat_max, run.never = lat.mean, lat.max, len(lat.never)
    run.new_pages = len(lat.latency) + len(lat.never)
    return run, project, store


def evolve(name: str, project: Path, store: Path, work: Path, share: float) -> tuple[str, str]:
    """``scrapy recrawl-evolve`` on the training crawl's store; returns (RECRAWL_SCORER,
    label)."""
    output = work / name / "learned.json"
    cmd = [sys.executable, "-m", "scrapy", "recrawl-evolve", "--spider", name, *EVOLVE_ARGS,
           "--output", str(output), "-q", "-s", f"RECRAWL_STORE={store}",
           "-s", f"RECRAWL_MONITOR_SHARE={share}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(project)])}
    t0 = time.monotonic()
    try:
        out = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        print(f"  {name}: recrawl-evolve ran over 300 s: gp4c instead", file=sys.stderr)
        return "gp4c", "gp4c (for learned)"
    took = time.monotonic() - t0
    if out.returncode != 0 or not output.exists():
        why = (out.stderr.strip().splitlines() or ["no output"])[-1]
        print(
            f"\n{name}: `scrapy recrawl-evolve` on the training crawl's store refused "
            f"(exit {out.returncode}, {took:.1f}s):\n  {why}\n"
            f"  -> the learned scorer is replaced by the gp4c preset, labelled "
            f"'gp4c (for learned)'.",
            flush=True,
        )
        return "gp4c", "gp4c (for learned)"
    doc = json.loads(output.read_text())
    preset = doc.get("returned_preset")
    label = f"learned (= {preset})" if preset else LEARNED
    print(
        f"\n{name}: `scrapy recrawl-evolve` ({took:.1f}s) recommends "
        f"{doc.get('expression')!r}" + (f" (the preset guard returned {preset})" if preset else ""),
        flush=True,
    )
    return str(output), label


def print_run(run: Run) -> None:
    print(f"\n### {run.site}: {run.policy}" + (f" ({run.note})" if run.note else ""))
    print()
    print(
        "| cycle | true | known | live | estimate | 90% interval | floor | P | R | tp/fp/fn | "
        "new: mean | max | never | requests | pairs | req/fresh |"
    )
    print("|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in run.rows:
        star = "*" if r.estimate_from == "report" else ""
        band = f"{fmt(r.low)}-{fmt(r.high)}" if r.low is not None else "-"
        tp, fp, fn, _ = r.det
        tri = f"{tp}/{fp}/{fn}" if run.scorer is not None else "-"
        print(
            f"| {r.cycle} | {fmt(r.true)} | {r.known} | {r.live} | {fmt(r.estimate)}{star} "
            f"| {band} | {fmt(r.floor)} "
            f"| {fmt(r.precision, '.2f')} | {fmt(r.recall, '.2f')} | {tri} "
            f"| {fmt(r.lat_mean, '.2f')} | {fmt(r.lat_max, 'd')} | {r.never} "
            f"| {r.requests} | {r.pairs} | {fmt(r.per_fresh)} |"
        )


def summarize(run: Run) -> dict[str, float | None]:
    scored = [r for r in run.rows if r.cycle >= FIRST_SCORED] or run.rows
    trues = [r.true for r in scored if r.true is not None]
    errs = [abs(r.estimate - r.true) for r in scored if r.estimate is not None and r.true]
    chance = [abs(r.floor - r.true) for r in scored if r.floor is not None and r.true]
    per = [r.per_fresh for r in scored if r.per_fresh is not None]
    return {
        "fresh": float(np.mean(trues)) if trues else None,
        "coverage": float(np.mean([r.known / r.live for r in scored if r.live])),
        "mae": float(np.mean(errs)) if errs else None,
        "worst": float(np.max(errs)) if errs else None,
        "floor_mae": float(np.mean(chance)) if chance else None,
        "floor_worst": float(np.max(chance)) if chance else None,
        "requests": float(np.mean([r.requests for r in scored])),
        "pairs": float(sum(r.pairs for r in run.rows)),
        "per_fresh": float(np.mean(per)) if per else None,
    }


def print_summary(runs: list[Run], cycles: int) -> None:
    last = FIRST_SCORED if cycles >= FIRST_SCORED else 1
    print(f"\n## Summary: cycles {last}-{cycles} (the budgeted ones)\n")
    print(
        "| site | policy | true freshness | known / live | estimate MAE (max) "
        "| chance floor MAE (max) | precision | recall "
        "| new pages: mean / max latency, never | requests/cycle | req. per fresh page "
        "| vs full recrawl |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    base: dict[str, float | None] = {}
    sums = {id(r): summarize(r) for r in runs}
    for r in runs:
        if r.scorer is None:
            base[r.site] = sums[id(r)]["per_fresh"]
    for r in runs:
        s = sums[id(r)]
        b = base.get(r.site)
        ratio = s["per_fresh"] / b if s["per_fresh"] is not None and b else None
        mae = "-" if s["mae"] is None else f"{s['mae']:.3f} ({s['worst']:.3f})"
        chance = "-" if s["floor_mae"] is None else f"{s['floor_mae']:.3f} ({s['floor_worst']:.3f})"
        lat = (
            f"{fmt(r.lat_mean, '.2f')} / {fmt(r.lat_max, 'd')}, {r.never} of {r.new_pages}"
            if r.new_pages
            else "none new"
        )
        print(
            f"| {r.site} | {r.policy} | {fmt(s['fresh'])} | {fmt(s['coverage'], '.2f')} "
            f"| {mae} | {chance} | {fmt(r.precision)} "
            f"| {fmt(r.recall)} | {lat} | {s['requests']:.1f} | {fmt(s['per_fresh'])} "
            f"| {fmt(ratio, '.3f')} |"
        )
    notes = []
    for r in runs:
        if r.stat_vs_report > 5e-4:
            notes.append(
                f"{r.site} {r.policy}: the crawl's stat and recrawl-report's figure differ "
                f"by up to {r.stat_vs_report:.4f}"
            )
        if r.count_mismatch:
            notes.append(
                f"{r.site} {r.policy}: downloader/request_count differs from the served "
                f"log in {r.count_mismatch} cycle(s)"
            )
    pairs = {f"{r.site} {r.policy}": int(sums[id(r)]["pairs"] or 0) for r in runs if r.scorer}
    print(
        "\nrequests: everything the site served in the cycle (start page, pair fetches, "
        "monitoring sample included); pair fetches over the run: "
        + ", ".join(f"{k} {v}" for k, v in pairs.items())
    )
    print(
        "req. per fresh page: requests / (true freshness x known pages), mean over the "
        "cycles; 'vs full recrawl': that figure / the full recrawl's on the same site "
        "(the spider without the add-on, every page every cycle), measured in this run"
    )
    for n in notes:
        print("note: " + n)
    print("crawl time: " + ", ".join(f"{r.site} {r.policy} {r.seconds:.0f}s" for r in runs))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--sites", default="shop,news")
    ap.add_argument("--scorers", default="aad+,nutch,chogm,age,learned")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--products", type=int, default=200, help="the shop's products")
    ap.add_argument("--categories", type=int, default=14, help="the shop's categories")
    ap.add_argument(
        "--monitor-share",
        type=float,
        default=0.0,
        help="RECRAWL_MONITOR_SHARE in every add-on run (0: the user's default)",
    )
    ap.add_argument(
        "--train-seed",
        type=int,
        default=None,
        help="the learned scorer's training site (default: --seed + 1)",
    )
    ap.add_argument(
        "--train-monitor-share",
        type=float,
        default=0.2,
        help="RECRAWL_MONITOR_SHARE of the learned scorer's training crawl",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a line added to every add-on run's settings.py (Python), e.g. "
        "'RECRAWL_LEARN_BOILERPLATE = False'",
    )
    ap.add_argument("--no-full", action="store_true", help="skip the full recrawl baseline")
    ap.add_argument("--keep", type=Path, help="keep the projects, stores and stats here")
    ap.add_argument("--quick", action="store_true", help="4 cycles, small shop, aad+ only")
    args = ap.parse_args(argv)
    if args.quick:
        args.cycles, args.products, args.categories = 4, 60, 6
        args.scorers = "aad+"
    if args.cycles < 1:
        ap.error("--cycles must be >= 1")
    sites = [s.strip() for s in args.sites.split(",") if s.strip()]
    bad = sorted(set(sites) - set(DETECT_KINDS))
    if bad or not sites:
        ap.error(f"--sites: one or more of shop, news (got {args.sites!r})")
    scorers = [s.strip() for s in args.scorers.split(",") if s.strip()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="recrawl-refbench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"reference site, seed {args.seed}, {args.cycles} cycles, shop {args.products} "
        f"products in {args.categories} categories; policies: {', '.join(scorers)}"
        + ("" if args.no_full else f", {FULL} (the spider without the add-on)")
        + (f"; RECRAWL_MONITOR_SHARE = {args.monitor_share}" if args.monitor_share else "")
        + "".join(f"; {line}" for line in args.set),
        flush=True,
    )
    runs: list[Run] = []
    t0 = time.monotonic()
    try:
        for name in sites:
            for scorer in scorers:
                if scorer == LEARNED:
                    seed = args.seed + 1 if args.train_seed is None else args.train_seed
                    train, project, store = crawl_run(
                        name, "training", "aad+", args, work,
                        seed=seed, monitor=args.train_monitor_share,
                    )  # fmt: skip
                    print(
                        f"  {name} training crawl (seed {seed}, RECRAWL_MONITOR_SHARE = "
                        f"{args.train_monitor_share}): {train.seconds:.0f}s",
                        file=sys.stderr,
                        flush=True,
                    )
                    spec, label = evolve(name, project, store, work, args.train_monitor_share)
                else:
                    spec, label = scorer, scorer
                run, project, store = crawl_run(name, label, spec, args, work)
                print(f"  {name} {label}: {run.seconds:.0f}s", file=sys.stderr, flush=True)
                runs.append(run)
            if not args.no_full:
                run, _, _ = crawl_run(name, FULL, None, args, work)
                print(f"  {name} {FULL}: {run.seconds:.0f}s", file=sys.stderr, flush=True)
                runs.append(run)
        for run in runs:
            print_run(run)
        print_summary(runs, args.cycles)
        print(f"\ntotal {time.monotonic() - t0:.0f}s")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
