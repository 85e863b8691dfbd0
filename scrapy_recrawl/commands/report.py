"""``scrapy recrawl-report``: what the crawl learned, read back from the spider's store.

Per cycle: fetched (recrawl / new / monitor / probe), changed, unchanged, 304s,
errors, gone, the budget used, the estimated freshness and the scorer; the top
changing URLs and hosts, the URLs the budget is wasted on, and the pages whose
changes look like boilerplate, with the ``RECRAWL_IGNORE_XPATHS`` line that would
silence them. ``--url URL``: one URL's visits and why it was (or was not) picked, and its
last change as a diff (the version before it, kept by the crawl: ``RECRAWL_KEEP_PREVIOUS``);
with ``--ignore XPATH`` / ``--watch XPATH`` (``--watch-css``), that change under those
rules too: would it still be one? And the page's items at their last change, field by
field, old -> new (kept by the item watch: ``insight/last_items.py``).
``--format csv|json`` for pipelines, ``--plot FILE.png|.svg``, and ``--export
FILE.npz|.csv``: the change matrix ``recrawl-evolve --history`` reads.

Reads any store (SQLite or Redis, ``RECRAWL_STORE``) read-only; the analysis is in
:mod:`scrapy_recrawl.insight`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from scrapy.exceptions import UsageError

from . import InputError, RecrawlCommand, check_output, int_at_least

_cycle = int_at_least(0, "a cycle number")
_count = int_at_least(1, "a count")


class Command(RecrawlCommand):
    reads_history = True

    def short_desc(self) -> str:
        return "Show what the crawl learned: per-cycle figures, top URLs, one URL's story"

    def long_desc(self) -> str:
        return (
            "Read a spider's history store (read-only) and show, per cycle, what was fetched, "
            "what changed, the budget used and the estimated freshness; the top changing URLs "
            "and hosts, the URLs fetched often that never changed, and the changes that look "
            "like boilerplate. --url URL shows one URL's visits and why it was picked or not; "
            "--export writes the change matrix recrawl-evolve --history reads."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        from scrapy_recrawl.insight.render import TABLES  # the report's tables, named once

        super().add_options(parser)
        g = parser.add_argument_group("Report")
        g.add_argument(
            "--url",
            metavar="URL",
            help="one URL's visit history, last score and last change (a diff)",
        )
        g.add_argument(
            "--ignore",
            action="append",
            metavar="XPATH",
            help="with --url: try the last change with this XPath added to "
            "RECRAWL_IGNORE_XPATHS (repeatable): would it still be a change?",
        )
        g.add_argument(
            "--watch",
            action="append",
            metavar="XPATH",
            help="with --url: try the last change watching only this element "
            "(RECRAWL_WATCH_XPATHS, repeatable)",
        )
        g.add_argument(
            "--watch-css",
            action="append",
            metavar="SELECTOR",
            help="with --url: the same as --watch, a CSS selector (RECRAWL_WATCH_CSS)",
        )
        g.add_argument(
            "--format",
            choices=("table", "csv", "json"),
            default="table",
            help="table (default), csv (one table: --table) or json (everything)",
        )
        g.add_argument(
            "--table",
            choices=TABLES,
            default="cycles",
            help="the table --format csv writes (default: cycles)",
        )
        g.add_argument(
            "--since", type=_cycle, default=0, metavar="CYCLE", help="cycles from this one on"
        )
        g.add_argument(
            "--top", type=_count, default=10, metavar="N", help="lines per top list (10)"
        )
        g.add_argument(
            "--plot",
            metavar="FILE.png",
            help="changes found, fetched and estimated freshness per cycle (.png or .svg; "
            "needs matplotlib)",
        )
        g = parser.add_argument_group("Export")
        g.add_argument(
            "--export",
            metavar="FILE.npz",
            help="write the change matrix recrawl-evolve --history reads (.npz or .csv): "
            "the RECRAWL_MONITOR_SHARE sample",
        )
        g.add_argument(
            "--all",
            action="store_true",
            help="with --export: every URL's observations, not only the monitoring sample "
            "(biased by the scorer's picks)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        self._check_options(opts)
        from scrapy_recrawl.history import HistoryStoreError
        from scrapy_recrawl.history.records import RecordError
        from scrapy_recrawl.settings import RecrawlSettingError

        store = self.open_history(opts)  # read-only: never created, migrated or changed
        try:
            if opts.export:
                self._export(store, opts)
            elif opts.url:
                self._story(store, opts)
            else:
                self._report(store, opts)
        except (HistoryStoreError, RecordError) as exc:
            raise InputError(f"{store.location}: {exc}") from None
        except RecrawlSettingError as exc:
            # --url scores the URL with the project's scorer settings, read only here:
            # one line and exit 1, as a crawl says it
            raise InputError(str(exc)) from None
        except BrokenPipeError:
            # `... | head`: the reader left; no traceback, and none at exit either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        finally:
            store.close()

    def _check_options(self, opts: argparse.Namespace) -> None:
        # where the results go is checked before any work
        if opts.plot:
            if not opts.plot.lower().endswith((".png", ".svg")):
                raise UsageError(f"--plot {opts.plot!r}: expected a .png or .svg file name")
            check_output(opts.plot, "--plot")
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
        if opts.export:
            if not opts.export.lower().endswith((".npz", ".csv")):
                raise UsageError(f"--export {opts.export!r}: expected a .npz or .csv file name")
            check_output(opts.export, "--export")
        elif opts.all:
            raise UsageError("--all goes with --export (it says what to export)")
        if opts.url and (opts.export or opts.plot):
            raise UsageError("--url shows one URL; it takes no --export or --plot")
        trial = opts.ignore or opts.watch or opts.watch_css
        if trial and not opts.url:
            raise UsageError("--ignore, --watch and --watch-css try a rule on one URL: add --url")
        if trial:
            opts.trial_watch = _trial_rules(opts)

    # -- the three things it does ---------------------------------------------------

    def _report(self, store: Any, opts: argparse.Namespace) -> None:
        from scrapy_recrawl.change import ChangeDetector
        from scrapy_recrawl.insight import boilerplate, render
        from scrapy_recrawl.insight.cycles import cycle_rows
        from scrapy_recrawl.insight.log import VisitLog
        from scrapy_recrawl.insight.plot import save
        from scrapy_recrawl.insight.story import record_of
        from scrapy_recrawl.insight.urls import UrlStats, top_changing, top_hosts, top_wasted

        log = VisitLog.read(store)
        rows = cycle_rows(store, log, opts.since)
        if opts.since and not rows and len(log["cycle"]):
            raise InputError(
                f"--since {opts.since}: no cycle from it on; the store's last cycle is "
                f"{int(log['cycle'].max())}"
            )
        since = log if not opts.since else VisitLog(_since(log, opts.since))
        stats = UrlStats.from_log(since, store)

        def body_of(url_id: int) -> bytes | None:
            rec = record_of(store, url_id)
            kept = store.body(rec.fingerprint) if rec is not None else None
            return kept.body if kept is not None else None

        from scrapy_recrawl.settings import get

        current = list(get(self.settings, "RECRAWL_IGNORE_XPATHS"))
        report = render.Report(
            source=store.location,
            spider=getattr(opts, "spider", None) or self._only_spider(),
            current_cycle=store.cycle,
            urls=len(store),
            cycles=rows,
            changing=top_changing(store, stats, opts.top),
            hosts=top_hosts(store, stats, opts.top),
            wasted=top_wasted(store, stats, opts.top),
            boilerplate=boilerplate.find(store, since, current, opts.top, body_of),
            learned=boilerplate.learned(
                store,
                ChangeDetector.from_settings(self.settings),
                _urls_by_id(store, log),
                body_of,
                current,
            ),
            notes=_notes(rows),
        )
        if opts.format == "json":
            render.write_json(report.as_dict())
        elif opts.format == "csv":
            render.write_csv(report.tables()[opts.table])
        else:
            render.print_report(report)
        if opts.plot:
            from scrapy_recrawl.settings import get

            scorer = next((r.scorer for r in reversed(rows) if r.scorer), None)
            if scorer is None:  # no recorded plan: the scorer the settings name
                scorer = f"{get(self.settings, 'RECRAWL_SCORER')} (settings)"
            # the store's short name (file name, Redis key): a whole location does not fit
            title = f"{store.label}, scorer {scorer}"
            save(rows, title, opts.plot)
            print(f"plot: {opts.plot}", file=sys.stderr)

    def _story(self, store: Any, opts: argparse.Namespace) -> None:
        from scrapy_recrawl.insight import render
        from scrapy_recrawl.insight.log import VisitLog
        from scrapy_recrawl.insight.story import find_url, record_of, story

        found = find_url(store, opts.url)
        if found is None:
            raise InputError(f"--url {opts.url}: not in the history store {store.location}")
        url_id, rec = found
        rec = rec if rec is not None else record_of(store, url_id)
        log = VisitLog(store.visit_log([url_id], since_cycle=opts.since or None))
        s = story(store, log, opts.url, url_id, rec, self.settings)
        change, missing = self._last_change(store, opts, url_id, rec)
        from scrapy_recrawl.insight.last_items import items_at_last_change, print_items

        items = items_at_last_change(store, url_id)  # its own record: no body needed
        if opts.format == "json":
            extra = {
                "last_change": change.as_dict() if change is not None else None,
                "items_at_last_change": items.as_dict() if items is not None else None,
            }
            render.write_json({**s.as_dict(), "why": render.why_lines(s), **extra})
        elif opts.format == "csv":
            if change is not None and change.trial is not None:  # the trial's lines
                render.write_csv([
                    {"section": sec.title, **line.as_dict()}
                    for sec in change.trial.sections for line in sec.lines
                ])  # fmt: skip
            else:
                render.write_csv([v.as_dict() for v in s.visits])
        else:
            from scrapy_recrawl.insight.last_change import print_last_change

            render.print_story(s)
            if change is not None:
                print_last_change(change)
            else:
                print(f"note: last change: {missing}")
            if items is not None:
                print_items(items)

    def _last_change(
        self, store: Any, opts: argparse.Namespace, url_id: int, rec: Any
    ) -> tuple[Any, str]:
        """The URL's last change (with the trial's rules), or None and why not; with a
        trial asked for, "no previous version" is an InputError (there is nothing to try)."""
        from scrapy_recrawl.change import ChangeDetector
        from scrapy_recrawl.insight.last_change import NoPrevious, last_change

        trial = getattr(opts, "trial_watch", None)
        try:
            change = last_change(
                store,
                url_id,
                opts.url,
                rec.fingerprint if rec is not None else None,
                ChangeDetector.from_settings(self.settings),
                ignore=opts.ignore,
                watch=trial,
            )
        except NoPrevious as exc:
            if opts.ignore or trial is not None:
                raise InputError(f"--url {opts.url}: {exc}: nothing to try the rules on") from None
            return None, str(exc)
        return change, ""

    def _export(self, store: Any, opts: argparse.Namespace) -> None:
        from scrapy_recrawl.insight import export
        from scrapy_recrawl.insight.log import VisitLog
        from scrapy_recrawl.learn.histories import HistoryError
        from scrapy_recrawl.settings import get

        if opts.all:
            print(f"warning: {export.BIAS_WARNING}", file=sys.stderr)
            matrix = export.whole_history(store, VisitLog.read(store))
        else:
            from scrapy_recrawl.learn.histories import MonitorSample

            # the sample each cycle's plan recorded; the settings' only for an older store
            share = get(self.settings, "RECRAWL_MONITOR_SHARE")
            seed = get(self.settings, "RECRAWL_SEED")
            if MonitorSample.of(store, share, seed).empty:
                raise InputError(
                    f"{store.location}: no monitoring sample to export (RECRAWL_MONITOR_SHARE "
                    "was 0 in its crawls): crawl with RECRAWL_MONITOR_SHARE = 0.05 for an "
                    "unbiased history, or export the whole one with --all (biased by the scorer)"
                )
            try:
                matrix = export.monitoring_sample(store, share, seed)
            except HistoryError as exc:
                raise InputError(str(exc)) from None
            if matrix.info:
                print(f"info: {matrix.info}", file=sys.stderr)
        if not matrix.urls:
            raise InputError(f"{store.location}: no URL with a good fetch to export")
        export.write(matrix, opts.export)
        print(f"{matrix.note}", file=sys.stderr)
        pages, cycles = matrix.changes.shape
        print(f"exported {pages} pages x {cycles} cycles to {opts.export}")


def _trial_rules(opts: argparse.Namespace) -> list[str] | None:
    """The trial's XPaths, each checked (a bad one is one line naming its option); the
    watch list the trial uses (None: the URL's own)."""
    from scrapy_recrawl.change.xpaths import compile_xpath, css_list
    from scrapy_recrawl.settings import RecrawlSettingError

    try:
        for x in opts.ignore or []:
            compile_xpath(x, "--ignore")
        watch = [*(opts.watch or []), *css_list(opts.watch_css or [], "--watch-css")]
        for x in opts.watch or []:
            compile_xpath(x, "--watch")
    except RecrawlSettingError as exc:
        raise InputError(str(exc)) from None
    return watch or None


def _urls_by_id(store: Any, log: Any, limit: int = 200_000) -> dict[int, str]:
    """The URLs of (at most ``limit`` of) the visit log's pages, by id: where a learned
    section finds a kept copy to name its parts from."""
    import numpy as np

    ids = np.unique(log["url_id"])[:limit].astype(np.int64)
    return dict(zip(ids.tolist(), store.urls(ids), strict=True)) if ids.size else {}


def _since(log: Any, since: int) -> dict[str, Any]:
    keep = log["cycle"] >= since
    return {k: v[keep] for k, v in log.columns.items()}


def _notes(rows: list[Any]) -> list[str]:
    if not rows:
        return ["the store has no visit yet: crawl first (scrapy crawl <spider>)"]
    notes = []
    bare = [r.cycle for r in rows if r.source == "log"]
    if bare:
        span = f"{bare[0]}..{bare[-1]}" if len(bare) > 1 else str(bare[0])
        notes.append(
            f"cycles {span}: no per-cycle record in the store (kept by crawls since issue "
            "17): their figures come from the visit log; fetched by kind (recrawl, monitor, "
            "probe), the budget and the scorer are not recorded"
        )
    notes.append(
        "est. freshness: an estimate, not a ground truth: the expected share of the known "
        "pages (fetched at least once, not gone) whose copy is current at the cycle's end, "
        "each page a Poisson process whose rate is learned from its own change "
        "observations and its host's (a page fetched once has its host's); in brackets "
        "its 90% interval, wide while few pages were observed more than once; a "
        "monitoring sample (RECRAWL_MONITOR_SHARE) narrows it; it is only as true as the "
        "change detection (docs/freshness.md)"
    )
    return notes
