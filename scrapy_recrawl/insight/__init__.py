"""What the crawl learned, read back from a spider's own store (``scrapy recrawl-report``).

Offline, like ``learn/``: the running crawl never imports it (import-linter, setup.cfg).
Each module has one job: :mod:`.log` (the visit log as per-URL arrays), :mod:`.cycles`
(the per-cycle table), :mod:`.urls` (top URLs and hosts, one URL's story),
:mod:`.boilerplate` (changes that are a date or counter), :mod:`.export` (the change
matrix ``recrawl-evolve --history`` reads), :mod:`.render` (table, CSV, JSON) and
:mod:`.plot` (matplotlib).
"""
