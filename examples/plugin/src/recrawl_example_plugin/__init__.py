"""An example plug-in package for scrapy-recrawl (docs/plugins.md walks through it).

* :class:`ChangeStreak` -- a plug-in: the ``streak`` terminal (how many visits in a
  row saw the page changed), the column it is computed from, and the visit hook
  that keeps the count from each visit's change signal;
* :class:`PerSpiderSqliteStore` -- a backend (``RECRAWL_STORE_CLASS``): one SQLite
  file per spider in ``EXAMPLE_STORE_DIR``.

Both are written against :mod:`scrapy_recrawl.api` only, and tested with
:mod:`scrapy_recrawl.testing`.
"""

from .store import PerSpiderSqliteStore
from .streak import ChangeStreak

__all__ = ["ChangeStreak", "PerSpiderSqliteStore"]
