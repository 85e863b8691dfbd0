"""``scrapy recrawl-evolve``: learn a recrawl scorer from complete change histories (GP4C).

Inside a Scrapy project it reads the project's history store (the URLs of
the ``RECRAWL_MONITOR_SHARE`` monitoring sample, the only complete and
unbiased histories a crawl has); anywhere, ``--history FILE`` reads a
``.npz`` (array ``changes``, pages x cycles) or a CSV (``url,cycle,changed``).
Every GP4C parameter is an option, the papers' value its default.

Before the run it warns (stderr) when the history is too small for the
settings asked (learn/preflight.py); ``--dry-run`` prints what would run and
how long it should take, and stops there. During the run, one progress bar
with its ETA (stderr; a log gets a line per quarter of the run). Then a table
of the winner and every preset on the test fold, the spread over seeds and
held-out folds with a warning when the winner is not better than the best
preset beyond noise (learn/noise.py), then the one scorer recommended, with the
numbers that decided it (learn/recommend.py: the learned expression only when it
beat the presets on validation and beyond noise on the held-out folds; else that
preset, the expression a runner-up), and ``expression: <...>``, the recommended one.
``--output FILE.json`` saves the recommended expression with its metrics and
parameters; ``RECRAWL_SCORER = "FILE.json"`` then uses it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

# the options' defaults and checks; the GP itself (learn/: its search, its process pool,
# its report) is imported by run(): Scrapy imports every command's module for any
# `scrapy` command, `scrapy crawl` included (tests/test_lazy_imports.py)
from scrapy_recrawl.learn.config import (
    FITNESS,
    SELECTION,
    VALIDATION,
    EvolveConfig,
    fitness_weights,
)

from . import InputError, RecrawlCommand, check_output, int_at_least

if TYPE_CHECKING:
    from scrapy_recrawl.learn.histories import History
    from scrapy_recrawl.scoring import TerminalRegistry

_DEFAULTS = EvolveConfig()


_positive_int = int_at_least(1)


def _budget(text: str) -> float:
    # the crawl's own rule (core/budget.py): pages, or a share such as "5%" (or 0.05)
    from scrapy_recrawl.core.budget import parse_budget
    from scrapy_recrawl.settings import RecrawlSettingError

    try:
        return parse_budget(text, "--budget")[0]
    except RecrawlSettingError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fitness(text: str) -> str:
    try:
        fitness_weights(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None
    return text.strip().lower()


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1), got {text!r}")
    return value


def _prior(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.replace("(", "").replace(")", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a,b (e.g. 0.5,100), got {text!r}") from None
    if not 0 <= a < b:
        raise argparse.ArgumentTypeError(f"expected 0 <= a < b, got {text!r}")
    return (a, b)


class Command(RecrawlCommand):
    reads_history = True

    def short_desc(self) -> str:
        return "Learn a recrawl scorer from complete change histories (GP4C)"

    def long_desc(self) -> str:
        return (
            "Evolve a RECRAWL_SCORER expression with genetic programming (GP4C, Santos et al. "
            "2013/2015) on complete change histories: the project's history store (its "
            "RECRAWL_MONITOR_SHARE sample) or --history FILE (.npz with 'changes', or CSV "
            "url,cycle,changed). Prints the winner and every preset on the test fold."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        d = _DEFAULTS
        g = parser.add_argument_group("History")
        g.add_argument(
            "--history",
            metavar="FILE",
            help="a .npz (array 'changes', pages x cycles) or .csv (url,cycle,changed); "
            "default: the project's history store",
        )
        g = parser.add_argument_group("GP4C (defaults: the papers' values)")
        g.add_argument("--population", type=_positive_int, default=d.population, metavar="N")
        g.add_argument("--generations", type=_positive_int, default=d.generations, metavar="N")
        g.add_argument(
            "--seeds",
            type=_positive_int,
            default=d.seeds,
            metavar="N",
            help="independent GP runs (random seeds)",
        )
        g.add_argument("--tournament", type=_positive_int, default=d.tournament, metavar="N")
        g.add_argument("--max-depth", type=_positive_int, default=d.max_depth, metavar="N")
        g.add_argument(
            "--crossover-depth",
            type=int,
            default=d.crossover_depth,
            metavar="N",
            help="deepest tree given to crossover",
        )
        g.add_argument(
            "--keep-best",
            type=_positive_int,
            default=d.keep_best,
            metavar="N",
            help="best individuals kept across all generations",
        )
        g.add_argument(
            "--terminals",
            default=d.terminals,
            metavar="SET",
            help="basic (n X t), all (+ CG NAD SAD AAD GAD and the smoothed "
            "CGp NADp SADp AADp GADp), window (all + C1..C3 D1..D3 + Q, paper 004; "
            "Q with the RECRAWL_EXPERTS* defaults) or a comma list of terminal names",
        )
        g.add_argument(
            "--fitness",
            type=_fitness,
            default=d.fitness,
            metavar="METRIC",
            help=f"{', '.join(FITNESS)}, or a weighted mix of them such as "
            "changerate:0.3,freshness:0.7 (weights scaled to sum to 1)",
        )
        g.add_argument(
            "--validation",
            choices=VALIDATION,
            default=d.validation,
            help="pages: validate on other pages over the same cycles (the papers'); time: "
            "also train on the earlier cycles only and validate on the later ones, the "
            "guard against a history whose first part does not look like its last",
        )
        g.add_argument(
            "--validation-cycles",
            type=_share,
            default=d.validation_cycles,
            metavar="SHARE",
            help="with --validation time: the share of the cycles (the latest) held out "
            "(default: a third)",
        )
        g.add_argument(
            "--preset-guard",
            action=argparse.BooleanOptionalAction,
            default=d.preset_guard,
            help="recommend (and save) the best preset when no learned scorer beats it on the "
            "validation data, or beyond noise on the held-out folds (every preset that "
            "needs only the store's columns; default: on)",
        )
        g.add_argument(
            "--selection",
            choices=SELECTION,
            default=d.selection,
            help="final pick: best validation fitness, Sum-sigma / Avg-sigma, or 1se: the "
            "smallest expression within one standard error of the best validation fitness",
        )
        g.add_argument(
            "--budget",
            type=_budget,
            default=d.budget,
            metavar="K",
            help="pages per cycle: a count, or a share of the pages such as 5%% (or 0.05)",
        )
        g.add_argument("--warmup", type=_positive_int, default=d.warmup, metavar="W")
        g.add_argument(
            "--folds",
            type=int,
            default=d.folds,
            metavar="F",
            help="folds over pages: 1 test, the others half training, half validation",
        )
        g.add_argument("--seed", type=int, default=d.seed)
        g.add_argument(
            "--prior",
            type=_prior,
            default=d.prior,
            metavar="A,B",
            help="pseudo-counts of the smoothed terminals (RECRAWL_PRIOR)",
        )
        g.add_argument(
            "--seed-presets",
            action=argparse.BooleanOptionalAction,
            default=d.seed_presets,
            help="start every seed's population with the presets over the terminal set "
            "(cg ... gad, age, gp4c, cg+ ... gad+; experts with Q), the rest ramped "
            "half-and-half (default: off, the papers' random start; helps small runs)",
        )
        g.add_argument(
            "--jobs",
            type=_positive_int,
            default=1,
            metavar="N",
            help="seeds run in parallel processes (results do not depend on it)",
        )
        g = parser.add_argument_group("Output")
        g.add_argument(
            "--output",
            "-o",
            metavar="FILE.json",
            help="save the expression, its metrics and the parameters",
        )
        g.add_argument(
            "--plot",
            metavar="FILE.png",
            help="fitness over generations per seed, and the winner against the presets "
            "per cycle on the test fold (.png or .svg; needs matplotlib)",
        )
        g.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
        g.add_argument(
            "--dry-run",
            action="store_true",
            help="print what would run (history, folds, seeds, evaluations) and how long it "
            "should take (one generation timed on this history), and run nothing",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from scrapy_recrawl.learn import gp
        from scrapy_recrawl.learn.evolve import evolve
        from scrapy_recrawl.learn.preflight import dry_run, size_warnings
        from scrapy_recrawl.learn.recommend import NOISE
        from scrapy_recrawl.learn.report import plot, save_json

        config = EvolveConfig(
            population=opts.population,
            generations=opts.generations,
            seeds=opts.seeds,
            tournament=opts.tournament,
            max_depth=opts.max_depth,
            crossover_depth=opts.crossover_depth,
            keep_best=opts.keep_best,
            terminals=opts.terminals,
            fitness=opts.fitness,
            selection=opts.selection,
            budget=opts.budget,
            warmup=opts.warmup,
            folds=opts.folds,
            seed=opts.seed,
            prior=opts.prior,
            jobs=opts.jobs,
            seed_presets=opts.seed_presets,
            validation=opts.validation,
            validation_cycles=opts.validation_cycles,
            preset_guard=opts.preset_guard,
        )
        if opts.output and not opts.output.lower().endswith(".json"):
            raise UsageError(f"--output {opts.output!r}: expected a .json file name")
        # where the results go is checked before the run, not after it
        for option, path in (("--output", opts.output), ("--plot", opts.plot)):
            if path:
                check_output(path, option, inputs=(opts.history,))
        if opts.plot:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
        registry = self._registry()
        try:
            config.check()
            gp.terminal_set(config.terminals, content=False, registry=registry)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        history = self._history(opts)
        try:  # the history's size against the folds and warm-up, before anything is said
            config.check(cycles=history.cycles, pages=history.pages)
        except ValueError as exc:
            raise InputError(f"{history.source}: {exc}") from None
        if not history.changes.any():
            raise InputError(
                f"{history.source}: no page changed in its {history.cycles} cycles: there is "
                "nothing to learn a scorer from"
            )
        if history.info:
            print(f"info: {history.info}", file=sys.stderr)
        if history.note:
            print(f"history: {history.note}", file=sys.stderr)
        print(
            f"history: {history.source}: {history.pages} pages x {history.cycles} cycles",
            file=sys.stderr,
        )
        for line in size_warnings(history.changes, config):
            print(f"warning: history too small: {line}", file=sys.stderr)
        if opts.dry_run:
            print(dry_run(history.changes, config, groups=history.groups, registry=registry).text())
            return
        try:
            result = evolve(
                history.changes,
                config,
                progress=not opts.quiet,
                source=history.source,
                groups=history.groups,
                registry=registry,
            )
        except ValueError as exc:
            raise InputError(str(exc)) from None
        print(result.table())
        rec = result.recommendation
        if rec.by == NOISE and result.noise is not None:
            # the learned pick passed the guard but not the noise rule: said loudly too
            print(f"warning: {result.noise.warning()}", file=sys.stderr)
        elif result.guard is None and result.noise is not None and not result.noise.better:
            # --no-preset-guard: the learned pick stays recommended, with this said
            print(f"warning: {rec.why}", file=sys.stderr)
        if opts.output:
            save_json(result, opts.output)
        # one answer: the table's verdicts come to this scorer, saved and printed last
        print("\n" + "\n".join(rec.lines(opts.output)))
        if opts.output:
            print(f"saved to {opts.output}")
        if opts.plot:
            plot(result, opts.plot)
            print(f"plot: {opts.plot}")
        print(f"\nexpression: {result.expression}")

    def _registry(self) -> TerminalRegistry | None:
        """The terminals of the project's settings (its RECRAWL_PLUGINS', its
        RECRAWL_NUTCH_* and RECRAWL_BURST_TAU), as its crawl has them; None for the
        defaults' (learn/ builds that one itself: nothing handed to --jobs' processes)."""
        from scrapy_recrawl.plugin_terminals import default_registry, registry_from_settings
        from scrapy_recrawl.settings import RecrawlSettingError

        try:
            registry = registry_from_settings(self.settings)
        except RecrawlSettingError as exc:
            raise UsageError(str(exc)) from None
        return None if registry is default_registry() else registry

    def _history(self, opts: argparse.Namespace) -> History:
        from scrapy_recrawl.learn.histories import HistoryError, load

        if opts.history:
            try:
                return load(opts.history)
            except HistoryError as exc:
                raise InputError(str(exc)) from None
        from scrapy.utils.project import inside_project

        if not inside_project():
            raise UsageError(
                "no history to learn from: pass --history FILE (.npz with 'changes', or CSV "
                "url,cycle,changed), or run inside a Scrapy project whose history store has "
                "a monitoring sample (RECRAWL_MONITOR_SHARE)"
            )
        return self._store_history(opts)

    def _store_history(self, opts: argparse.Namespace) -> History:
        from scrapy_recrawl.settings import get

        settings: Any = self.settings
        share = get(settings, "RECRAWL_MONITOR_SHARE")
        seed = get(settings, "RECRAWL_SEED")
        from scrapy_recrawl.history import HistoryStoreError
        from scrapy_recrawl.history.records import RecordError
        from scrapy_recrawl.learn.histories import HistoryError, from_store

        store = self.open_history(opts)  # read-only: never created, migrated or changed
        try:
            # the sample its crawls recorded; share and seed only for an older store
            return from_store(store, monitor_share=share, seed=seed)
        except (HistoryError, HistoryStoreError, RecordError) as exc:
            raise InputError(str(exc)) from None
        finally:
            store.close()
