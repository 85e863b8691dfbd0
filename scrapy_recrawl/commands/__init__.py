"""``scrapy recrawl-*`` commands: one module per command, each a ``ScrapyCommand``
subclass named ``Command``, registered through the ``scrapy.commands`` entry point
(setup.cfg), e.g. ``recrawl-evolve`` = :mod:`scrapy_recrawl.commands.evolve`.
"""

from __future__ import annotations

import argparse
from typing import Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError


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

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        if not self.reads_history:
            return
        parser.add_argument(
            "--spider",
            metavar="NAME",
            help="whose history store to read (each spider has its own; default: the "
            "project's only spider)",
        )

    def history_store(self, opts: argparse.Namespace) -> Any:
        """The project's history store of ``--spider`` (or of its only spider), built
        as a crawl of that spider builds it; not opened, and never claimed."""
        from scrapy_recrawl.history import open_store
        from scrapy_recrawl.settings import RecrawlSettingError

        spider = getattr(opts, "spider", None) or self._only_spider()
        try:
            return open_store(self.settings, spider)
        except RecrawlSettingError as exc:
            raise UsageError(str(exc)) from None

    def _only_spider(self) -> str | None:
        from scrapy.spiderloader import get_spider_loader

        assert self.settings is not None
        try:
            names = get_spider_loader(self.settings).list()
        except Exception:  # noqa: BLE001 -- no project, or spiders that fail to import
            return None
        return names[0] if len(names) == 1 else None
