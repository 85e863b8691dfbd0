"""``scrapy recrawl-plan``: solve and print a WebFountain crawl plan, or replay it.

By default the plan is solved from the spider's own history store (opened
read-only, ``--spider`` as for every offline command): its live, fetched URLs
in change-rate buckets (``RECRAWL_BUCKETS``) with their rates and expected
obsolete copies, the frontier's waiting new URLs, ``RECRAWL_BUDGET`` pages per
period and ``RECRAWL_PLAN_PERIODS`` periods: the plan a crawl in plan mode
would solve now (planning/webfountain.py: ``current_buckets``,
``solve_from_buckets``). It is printed per period (crawled, obsolete: the
paper's Table 3 / Figure 4 quantities) and per bucket (pages to crawl each
period).

``--synthetic`` solves the paper's synthetic set-up instead
(:func:`scrapy_recrawl.planning.paper_instance`, scaled by ``--pages``).

With ``--history FILE.npz`` (a change matrix, as in ``../shared/data/changes``)
the planner is replayed in the simulator for each strategy, beside the
scorers (``--scorers``), and one table of ChangeRate, NDCG and freshness is
printed; ``--budget`` is then the share (or number) of pages per cycle.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np
from scrapy.exceptions import UsageError

from scrapy_recrawl.learn.tables import markdown_table

from . import InputError, RecrawlCommand

ALL = "all"


def format_plan(plan: Any, *, buckets: bool = True, out: TextIO | None = None) -> str:
    """The plan as Markdown tables: one row per period, then one row per bucket."""
    periods = markdown_table(
        ("period", "crawled old", "crawled new", "obsolete old", "new waiting",
         "obsolete total", "pages"),
        (
            (r["period"], *(f"{r[c]:.0f}" for c in (
                "crawled_old", "crawled_new", "obsolete_old", "new_waiting", "obsolete", "pages")))
            for r in plan.table()
        ),
        right=range(7),
    )  # fmt: skip
    parts = [
        f"strategy {plan.strategy}: objective {plan.objective:.6g}, "
        f"{plan.periods} periods x {plan.buckets} buckets, solver: {plan.status} "
        f"({plan.iterations} iterations, {plan.seconds:.1f} s)",
        periods,
    ]
    if buckets:
        T = plan.periods
        cpp = plan.crawls_per_page()
        parts += [
            "Pages to crawl per bucket and period (x_it), crawls per page per cycle:",
            markdown_table(
                ("bucket", "pages", "change/period", *(f"t{t + 1}" for t in range(T)),
                 "crawls/page"),
                (
                    (i, f"{plan.b0[i]:.0f}", f"{plan.change[0, i]:.4f}",
                     *(f"{plan.x[t, i]:.0f}" for t in range(T)), f"{cpp[i]:.2f}")
                    for i in range(plan.buckets)
                ),
                right=range(T + 4),
            ),
        ]  # fmt: skip
    text = "\n\n".join(parts) + "\n"
    if out is not None:
        out.write(text)
    return text


def format_comparison(plans: Sequence[Any], out: TextIO | None = None) -> str:
    """Strategies side by side: objective, pages and obsolete at the end, crawl shape,
    and the obsolete pages per period (Table 3 and Figure 4 of the paper)."""
    rows = []
    for p in plans:
        cpp = p.crawls_per_page()
        rows.append(
            (p.strategy, f"{p.objective:.4g}", f"{p.total_pages:.4g}", f"{p.obsolete[-1]:.4g}",
             f"{(cpp < 0.05).mean():.0%}", f"{(cpp > 1.1).mean():.0%}", f"{cpp.min():.2f}",
             f"{cpp.max():.2f}", f"{p.seconds:.1f}")
        )  # fmt: skip
    T = plans[0].periods if plans else 0
    text = "\n\n".join(
        [
            markdown_table(
                ("strategy", "objective", "total pages at end", "obsolete at end",
                 "buckets not crawled", "buckets crawled > 1x", "min crawls/page",
                 "max crawls/page", "solve s"),
                rows,
                right=range(1, 9),
            ),
            "Obsolete pages at the end of each period (old obsolete + new waiting):",
            markdown_table(
                ("period", *(p.strategy for p in plans)),
                ((t + 1, *(f"{p.obsolete[t]:.0f}" for p in plans)) for t in range(T)),
                right=range(len(plans) + 1),
            ),
        ]
    ) + "\n"  # fmt: skip
    if out is not None:
        out.write(text)
    return text


def format_replays(
    rows: Sequence[tuple[str, str, dict[str, float]]], out: TextIO | None = None
) -> str:
    """``(dataset, policy, summary)`` rows as one Markdown table."""
    text = (
        markdown_table(
            ("dataset", "policy", "ChangeRate", "NDCG", "freshness"),
            (
                (
                    data,
                    policy,
                    f"{s['change_rate']:.4f}",
                    f"{s['ndcg']:.4f}",
                    f"{s['freshness']:.4f}",
                )
                for data, policy, s in rows
            ),
            right=(2, 3, 4),
        )
        + "\n"
    )
    if out is not None:
        out.write(text)
    return text


def _budget(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget {value!r}: expected a number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"--budget {value!r}: expected a number > 0")
    return v


class Command(RecrawlCommand):
    """``scrapy recrawl-plan``."""

    reads_history = True

    def short_desc(self) -> str:
        return (
            "Solve the WebFountain crawl plan (paper 003) of the spider's store and print it, "
            "or replay it on a change history"
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        g = parser.add_argument_group("Plan options")
        g.add_argument(
            "--strategy",
            default=ALL,
            help="strategy1, strategy2, strategy3 or all (default: all)",
        )
        g.add_argument(
            "--periods",
            type=int,
            default=None,
            help="periods T (default: RECRAWL_PLAN_PERIODS, 14)",
        )
        g.add_argument(
            "--buckets",
            type=int,
            default=None,
            help="change-rate buckets, 1..256 (default: RECRAWL_BUCKETS, 64)",
        )
        g.add_argument(
            "--budget",
            type=_budget,
            default=None,
            help="pages per period; below 1, a share of the pages (default: RECRAWL_BUDGET "
            "on the store, 1.5 crawls per page per cycle with --synthetic, 0.05 with --history)",
        )
        g.add_argument(
            "--synthetic",
            action="store_true",
            help="solve the paper's synthetic set-up (scaled by --pages), not the spider's store",
        )
        g.add_argument(
            "--pages",
            type=float,
            default=500_000.0,
            help="pages of the --synthetic set-up (the paper's 500M, scaled; default 500000)",
        )
        g.add_argument(
            "--no-buckets", action="store_true", help="omit the per-bucket table of the plan"
        )
        g.add_argument("--history", metavar="FILE.npz", help="replay on this change matrix")
        g.add_argument(
            "--scorers",
            default="aad+,age,rand,oracle",
            help="scorers to replay beside the planner (default: aad+,age,rand,oracle)",
        )
        g.add_argument("--warmup", type=int, default=2, help="warm-up cycles (default 2)")
        g.add_argument(
            "--plan-every", type=int, default=7, help="re-plan every N cycles (default 7)"
        )
        g.add_argument(
            "--max-seconds", type=float, default=120.0, help="solver time limit per plan"
        )

    def strategies(self, opts: argparse.Namespace) -> list[str]:
        from scrapy_recrawl.planning import STRATEGIES

        name = str(opts.strategy).strip().lower()
        if name == ALL:
            return list(STRATEGIES)
        if name not in STRATEGIES:
            raise UsageError(
                f"--strategy {opts.strategy!r}: expected one of {', '.join(STRATEGIES)} or all",
                print_help=False,
            )
        return [name]

    def run(self, args: list[str], opts: argparse.Namespace, out: TextIO | None = None) -> None:
        out = out or sys.stdout
        try:
            import scipy  # noqa: F401
        except ImportError:
            raise UsageError(
                "recrawl-plan needs scipy: pip install 'scrapy-recrawl[planning]'",
                print_help=False,
            ) from None
        from scrapy_recrawl.planning import PlanError
        from scrapy_recrawl.settings import RecrawlSettingError, get

        if opts.history and opts.synthetic:
            raise UsageError("--history and --synthetic: choose one", print_help=False)
        settings: Any = self.settings
        try:  # the crawl's plan-mode settings, unless the options say otherwise
            if opts.periods is None:
                opts.periods = get(settings, "RECRAWL_PLAN_PERIODS", int)
            if opts.buckets is None:
                opts.buckets = get(settings, "RECRAWL_BUCKETS", int)
        except RecrawlSettingError as exc:
            raise UsageError(str(exc), print_help=False) from None
        if not 1 <= opts.buckets <= 256:
            raise UsageError(f"--buckets {opts.buckets}: expected 1..256", print_help=False)
        if opts.periods < 1:
            raise UsageError(f"--periods {opts.periods}: expected >= 1", print_help=False)
        try:
            if opts.history:
                self._replay(opts, out)
            elif opts.synthetic:
                self._synthetic(opts, out)
            else:
                self._store(opts, out)
        except PlanError as exc:
            raise UsageError(str(exc), print_help=False) from None

    def _synthetic(self, opts: argparse.Namespace, out: TextIO) -> None:
        from scrapy_recrawl.planning import paper_instance, solve_plan

        inst = paper_instance(opts.buckets, opts.periods, opts.pages)
        if opts.budget is not None:
            inst["budget"] = opts.budget * opts.pages if opts.budget < 1 else opts.budget
        out.write(
            f"Synthetic set-up of the paper, scaled to {opts.pages:.0f} pages: "
            f"{opts.buckets} buckets, T = {opts.periods}, budget {inst['budget']:.0f} pages "
            "per period\n\n"
        )
        plans = []
        for s in self.strategies(opts):
            plan = solve_plan(**inst, weights=s, max_seconds=opts.max_seconds)
            plans.append(plan)
            format_plan(plan, buckets=not opts.no_buckets, out=out)
            out.write("\n")
        if len(plans) > 1:
            format_comparison(plans, out=out)

    def _store(self, opts: argparse.Namespace, out: TextIO) -> None:
        """The plan a crawl in plan mode would solve now, from the spider's own store."""
        from scrapy_recrawl.core.budget import budget_pages
        from scrapy_recrawl.core.groups import group_codes
        from scrapy_recrawl.core.selection import candidate_mask
        from scrapy_recrawl.last_modified import prior_ages
        from scrapy_recrawl.planning import PlanError
        from scrapy_recrawl.planning.webfountain import current_buckets, solve_from_buckets
        from scrapy_recrawl.scoring.freshness import unchanged_probability
        from scrapy_recrawl.scoring.terminals import prior_from_settings
        from scrapy_recrawl.settings import RecrawlSettingError, get

        settings: Any = self.settings
        store = self.open_history(opts)  # read-only: never created, migrated or changed
        try:
            arrays = store.arrays()
            waiting = int(store.frontier_size())
            urls = [str(u) for u in store.urls(arrays.ids)]
            hosts = group_codes(urls)  # the priors' groups
            # the Last-Modified ages the crawl's estimate reads too (last_modified.py)
            ages = prior_ages(store, arrays.ids, urls, arrays.cycle)
            where = store.location
        finally:
            store.close()
        cols = arrays.columns
        known = candidate_mask(arrays)[0] & (np.asarray(cols["last_visit_cycle"]) >= 0)
        if not known.any():
            raise InputError(
                f"{where}: no live page fetched yet, so no bucket to plan for: crawl first, "
                "or pass --synthetic for the paper's set-up"
            )
        try:
            prior = prior_from_settings(settings)
            if opts.budget is None:
                k = budget_pages(
                    get(settings, "RECRAWL_BUDGET"),
                    int(known.sum()),
                    get(settings, "RECRAWL_BUDGET_MAX", int, lambda v: v >= 0, "pages >= 0"),
                )
            else:
                k = (
                    budget_pages(opts.budget, int(known.sum()))
                    if opts.budget < 1
                    else int(opts.budget)
                )
        except RecrawlSettingError as exc:
            raise UsageError(str(exc), print_help=False) from None
        # the stale copies now: the freshness estimate's (scoring/freshness.py), the figure
        # recrawl-report and the crawl's stats give; the buckets' rates plan the periods
        fresh = unchanged_probability(
            cols["n"], cols["X"], cols["first_cycle"], cols["last_visit_cycle"],
            arrays.cycle, known=known, group=hosts, prior_age=ages,
        ) if "first_cycle" in cols else None  # fmt: skip
        stale = None if fresh is None else np.clip(1.0 - fresh, 0.0, 1.0)
        _, stats = current_buckets(
            cols, arrays.cycle, opts.buckets, known, prior=prior, stale=stale
        )
        rates = stats.rate
        out.write(
            f"{where}: cycle {arrays.cycle}, {int(known.sum())} live pages fetched before in "
            f"{stats.buckets.size} non-empty buckets of {opts.buckets} (change rates "
            f"{rates.min():.3g}..{rates.max():.3g} per cycle), {waiting} new URLs waiting, "
            f"budget {k} pages per period, T = {opts.periods}\n\n"
        )
        plans = []
        for s in self.strategies(opts):
            try:
                plan = solve_from_buckets(
                    stats, opts.periods, k, strategy=s, new_waiting=waiting,
                    max_seconds=opts.max_seconds,
                )  # fmt: skip
            except PlanError as exc:
                raise InputError(f"{where}: {s}: {exc}") from None
            plans.append(plan)
            format_plan(plan, buckets=not opts.no_buckets, out=out)
            out.write("\n")
        if len(plans) > 1:
            format_comparison(plans, out=out)

    def _replay(self, opts: argparse.Namespace, out: TextIO) -> None:
        from pathlib import Path

        from scrapy_recrawl.core.simulate import simulate
        from scrapy_recrawl.learn.histories import HistoryError, load
        from scrapy_recrawl.planning.replay import replay_plan

        path = Path(opts.history)
        try:
            # the one loader of change histories: shapes, 0/1 values, corrupt files
            changes = load(str(path)).changes
        except HistoryError as exc:
            raise InputError(str(exc)) from None
        k = 0.05 if opts.budget is None else opts.budget
        k = int(k) if k >= 1 else k
        rows: list[tuple[str, str, dict[str, float]]] = []
        first_plans = []
        if not 1 <= opts.warmup < changes.shape[1]:
            raise InputError(
                f"--warmup {opts.warmup}: expected 1..{changes.shape[1] - 1} ({path} has "
                f"{changes.shape[1]} cycles)"
            )
        for s in self.strategies(opts):
            res, planner = replay_plan(
                changes,
                s,
                warmup=opts.warmup,
                k=k,
                periods=opts.periods,
                plan_every=opts.plan_every,
                n_buckets=opts.buckets,
                max_seconds=opts.max_seconds,
            )
            rows.append((path.stem, res.policy, res.summary()))
            if planner.plan is not None:
                first_plans.append(planner.plan)
        from scrapy_recrawl.plugin_terminals import registry_from_settings
        from scrapy_recrawl.settings import RecrawlSettingError

        try:
            # the project's plug-ins' terminals too (`due`, `Q`, ...), as its crawl knows them
            registry = registry_from_settings(self.settings)
        except RecrawlSettingError as exc:
            raise UsageError(str(exc), print_help=False) from None
        for scorer in [p.strip() for p in str(opts.scorers).split(",") if p.strip()]:
            try:
                res = simulate(changes, scorer, warmup=opts.warmup, k=k, registry=registry)
            except RecrawlSettingError as exc:
                raise UsageError(f"--scorers {scorer!r}: {exc}", print_help=False) from None
            rows.append((path.stem, res.policy, res.summary()))
        out.write(
            f"{path.name}: {changes.shape[0]} pages x {changes.shape[1]} cycles, "
            f"warm-up {opts.warmup}, k = {k}, re-plan every {opts.plan_every} cycles, "
            f"T = {opts.periods}, {opts.buckets} buckets\n\n"
        )
        format_replays(rows, out=out)
        if first_plans:
            out.write("\nThe last plan of each strategy (non-empty buckets only):\n\n")
            for plan in first_plans:
                format_plan(plan, buckets=not opts.no_buckets, out=out)
                out.write("\n")
