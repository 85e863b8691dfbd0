"""``scrapy recrawl-*`` commands: one module per command, each a ``ScrapyCommand``
subclass named ``Command``, registered through the ``scrapy.commands`` entry point
(setup.cfg), e.g. ``recrawl-evolve`` = :mod:`scrapy_recrawl.commands.evolve`.
"""

from __future__ import annotations

from scrapy.commands import ScrapyCommand


class RecrawlCommand(ScrapyCommand):
    """What every ``recrawl-*`` command shares: offline, no crawler, quiet logs.

    They run inside a project (reading its store) or outside one (``--history``).
    """

    requires_project = False
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options]"
