"""A plug-in as a third-party package would write it: nothing here is part of scrapy_recrawl.

docs/architecture.md ("How to add a policy") walks through this file; the test
in test_plugins.py names it in RECRAWL_PLUGINS and crawls with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scrapy_recrawl.core.budget import Budget
from scrapy_recrawl.core.selection import Selection
from scrapy_recrawl.history.base import HistoryArrays


class ShortestUrlsFirst:
    """A Selector: each cycle recrawls the live URLs with the shortest URLs first.

    Switched on by ``SHORTEST_URLS_FIRST = True`` in the settings.
    """

    terminals: tuple[Any, ...] = ()  # it adds no terminal
    selects = True  # it replaces the scorer's top-k (at most one such plug-in)

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        return bool(settings.getbool("SHORTEST_URLS_FIRST"))

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        pass  # nothing of its own to check

    @classmethod
    def from_crawler(
        cls, crawler: Any, store: Any, terminals_needed: frozenset[str]
    ) -> ShortestUrlsFirst:
        return cls(store)

    def __init__(self, store: Any) -> None:
        self.store = store

    def select(
        self, arrays: HistoryArrays, budget: Budget, candidates: np.ndarray, new_waiting: int
    ) -> tuple[Selection, int]:
        ids = arrays.ids[candidates]
        lengths = np.array([len(u) for u in self.store.urls(ids)], dtype=np.float64)
        order = np.lexsort((ids, lengths))  # shortest first, then oldest id
        recrawls = (budget.recrawl or 0) + max(0, (budget.new or 0) - new_waiting)
        picked = order[:recrawls]
        selection = Selection(ids[picked], -lengths[picked], monitored=0, scored=len(ids))
        return selection, min(new_waiting, (budget.total or 0) - len(picked))
