"""Plug-ins as a third-party package would write them: nothing here is part of scrapy_recrawl,
and everything they import comes from its public API (scrapy_recrawl.api).

docs/architecture.md ("How to add a policy") points at this file; the tests in
test_plugins.py name them in RECRAWL_PLUGINS and crawl with them:
:class:`ShortestUrlsFirst` replaces the scorer's pick, :class:`UrlDepth` adds a
terminal (``depth``) that a scorer may then use. examples/plugin/ is the same as
an installable package, with a visit hook (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from scrapy_recrawl.api import Budget, HistoryArrays, Plugin, Selection, Terminal


class ShortestUrlsFirst(Plugin):
    """A Selector: each cycle recrawls the live URLs with the shortest URLs first.

    Switched on by ``SHORTEST_URLS_FIRST = True`` in the settings.
    """

    api_version = "1"  # the plug-in API it is written against
    capabilities = frozenset({"selector"})
    selects = True  # it replaces the scorer's top-k (at most one such plug-in)

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        return bool(settings.getbool("SHORTEST_URLS_FIRST"))

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


def _depth(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    """The ``depth`` terminal from the column UrlDepth adds; NaN (ranks last) without it."""
    if "url_slashes" not in state:
        return np.full(np.shape(state["n"]), np.nan)
    return np.asarray(state["url_slashes"], dtype=np.float64)


class UrlDepth(Plugin):
    """A ColumnProvider with a terminal of its own: ``depth``, the number of ``/`` in
    the URL's path (``/`` is 1, ``/a/b`` is 2).

    Named in RECRAWL_PLUGINS, ``depth`` joins the terminals a scorer may use
    (``RECRAWL_SCORER = "depth * t"``); the plug-in is on when the scorer uses it
    (:class:`~scrapy_recrawl.api.Plugin`'s ``enabled``).
    """

    api_version = "1"
    capabilities = frozenset({"columns"})
    terminals: tuple[Terminal, ...] = (
        Terminal("depth", "number of `/` in the URL's path (a third-party plug-in's)", _depth),
    )

    @classmethod
    def from_crawler(cls, crawler: Any, store: Any, terminals_needed: frozenset[str]) -> UrlDepth:
        return cls(store)

    def __init__(self, store: Any) -> None:
        self.store = store

    def columns(self, arrays: HistoryArrays, now: float) -> dict[str, np.ndarray]:
        urls = self.store.urls(arrays.ids)
        slashes = [urlsplit(u).path.count("/") for u in urls]
        return {"url_slashes": np.asarray(slashes, dtype=np.float64)}
