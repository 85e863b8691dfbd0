"""``scrapy recrawl-*`` commands: one module per command, each a ``ScrapyCommand``
subclass named ``Command``, registered through the ``scrapy.commands`` entry point
(setup.cfg), e.g. ``recrawl-evolve`` = :mod:`scrapy_recrawl.commands.evolve`.
"""
