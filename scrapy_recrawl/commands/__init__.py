"""``scrapy recrawl-*`` commands: one module per command, each a ``ScrapyCommand``
subclass named ``Command``, registered through the ``scrapy.commands`` entry point
(setup.cfg), e.g. ``recrawl-evolve`` = :mod:`scrapy_recrawl.commands.evolve`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.settings import Settings


class InputError(UsageError):
    """A path, file or store the command cannot use: said in one line on stderr, and
    the command exits with status 1 (not Scrapy's usage text and status 2: the
    options were right, the input is wrong)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, print_help=False)


def check_output(path: str, option: str, *, inputs: tuple[str | None, ...] = ()) -> None:
    """Refuse an output path that cannot be written, before any work is done: its
    folder must exist and be writable, and it must be neither a folder nor an input."""
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise InputError(f"{option} {path}: the folder {folder} does not exist")
    if os.path.isdir(full):
        raise InputError(f"{option} {path}: is a folder, expected a file name")
    if not os.access(folder, os.W_OK | os.X_OK) or (
        os.path.exists(full) and not os.access(full, os.W_OK)
    ):
        raise InputError(f"{option} {path}: not writable")
    for source in inputs:
        if (
            source
            and os.path.exists(source)
            and os.path.exists(full)
            and os.path.samefile(source, full)
        ):
            raise InputError(f"{option} {path}: is the input itself; choose another file")


def int_at_least(minimum: int, what: str = "an integer") -> Callable[[str], int]:
    """An option's ``type``: an integer ``>= minimum``, or argparse's one-line error
    ("expected <what>, got ..." / "expected <what> >= <minimum>, got ...")."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"expected {what} >= {minimum}, got {v}")
        return v

    return parse


def spider_settings(settings: Settings, name: str) -> Settings:
    """The settings ``scrapy crawl NAME`` crawls with: a copy of ``settings`` (the
    project's, with the command line's ``-s``) to which the spider class applies its
    ``custom_settings`` through its own ``update_settings`` (Scrapy's priorities: ``-s``
    outranks the spider, the spider the project). A name no spider has is Scrapy's
    "Spider not found" usage error."""
    from scrapy.spiderloader import get_spider_loader

    try:
        spidercls = get_spider_loader(settings).load(name)
    except KeyError:
        raise UsageError(f"Spider not found: {name}", print_help=False) from None
    out = settings.copy()
    spidercls.update_settings(out)
    return out


class RecrawlCommand(ScrapyCommand):
    """What every ``recrawl-*`` command shares: offline, no crawler, quiet logs.

    They run inside a project (reading its store) or outside one (``--history``).
    """

    requires_project = False
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options]"

    #: the command reads the project's history store (and takes --spider)
    reads_history = False
    #: the command takes positional arguments (else any is refused before it runs)
    takes_args = False

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)  # -s options first: they outrank the spider's
        if args and not self.takes_args:
            raise UsageError(f"unexpected arguments: {' '.join(args)}")
        if self.reads_history:
            # what the command reads (RECRAWL_STORE, RECRAWL_MONITOR_SHARE, the scorer,
            # RECRAWL_IGNORE_XPATHS ...) is what `scrapy crawl SPIDER` crawls with
            name = getattr(opts, "spider", None) or self._only_spider()
            if name:
                assert self.settings is not None
                self.settings = spider_settings(self.settings, name)

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        _one_line_input_errors(parser, self.command_name)
        if not self.reads_history:
            return
        parser.add_argument(
            "--spider",
            metavar="NAME",
            help="whose history store to read (each spider has its own; default: the "
            "project's only spider)",
        )

    @property
    def command_name(self) -> str:
        return "recrawl-" + type(self).__module__.rsplit(".", 1)[-1]

    def history_store(self, opts: argparse.Namespace, *, read_only: bool = True) -> Any:
        """The project's history store of ``--spider`` (or of its only spider), built
        as a crawl of that spider builds it; not opened, and never claimed.

        ``read_only`` (the default): a SQLite store is opened without a lock and never
        created, migrated or changed (history/sqlite_readonly.py)."""
        from scrapy_recrawl.settings import RecrawlSettingError
        from scrapy_recrawl.startup import unknown_setting_messages
        from scrapy_recrawl.stores import open_store

        # a misspelled RECRAWL_STORE would read the default store without a word
        for message in unknown_setting_messages(self.settings):
            print(f"warning: {message}", file=sys.stderr)
        spider = getattr(opts, "spider", None) or self._only_spider()
        try:
            return open_store(self.settings, spider, read_only=read_only)
        except RecrawlSettingError as exc:
            raise UsageError(str(exc)) from None

    def open_history(self, opts: argparse.Namespace, *, read_only: bool = True) -> Any:
        """:meth:`history_store`, opened; a store that cannot be opened is an
        :class:`InputError` (the store names itself in the message)."""
        from scrapy_recrawl.history import HistoryStoreError

        store = self.history_store(opts, read_only=read_only)
        try:
            store.open()
        except HistoryStoreError as exc:
            raise InputError(str(exc)) from None
        return store

    def _only_spider(self) -> str | None:
        from scrapy.spiderloader import get_spider_loader

        assert self.settings is not None
        try:
            names = get_spider_loader(self.settings).list()
        except Exception:  # noqa: BLE001 -- no project, or spiders that fail to import
            return None
        return names[0] if len(names) == 1 else None


def _one_line_input_errors(parser: argparse.ArgumentParser, name: str) -> None:
    """Scrapy turns a UsageError into ``parser.error(message)``: usage text and exit
    status 2. An :class:`InputError` (being handled when it is called) is one line
    and status 1 instead; every other error stays Scrapy's."""
    usage_error = parser.error

    def error(message: str) -> NoReturn:
        if isinstance(sys.exc_info()[1], InputError):
            line = " ".join(message.split())  # one line, whatever the message holds
            sys.stderr.write(f"scrapy {name}: error: {line}\n")
            sys.exit(1)
        usage_error(message)

    parser.error = error  # type: ignore[method-assign]
