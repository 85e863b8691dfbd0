"""What a paper's policy plugs into: small protocols the crawl calls, and nothing more.

A plug-in is a class named in ``RECRAWL_PLUGINS_BASE`` (the built-in papers)
or ``RECRAWL_PLUGINS`` (yours), dicts of ``{"dotted.path": order}`` merged the
way Scrapy merges ``DOWNLOADER_MIDDLEWARES``; ``None`` switches one off. The
crawl loads them by path (:mod:`scrapy_recrawl.plugins`), so the schedulers,
the middleware and the change detector import no paper's code.

Every plug-in class offers :class:`RecrawlPlugin` (its terminals, whether this
crawl needs it, how to build it); an instance then offers any of the
capabilities below, and the crawl calls those it offers:

* :class:`ColumnProvider` -- adds per-URL columns before each cycle is scored
  (``due``'s basket interval, the ``C*``/``D*``/``Q`` columns);
* :class:`Selector` -- replaces the scored top-k with its own pick (the
  WebFountain plan); at most one per crawl;
* :class:`ProbeSource` -- asks for extra fetches of given URLs ahead of the
  cycle's recrawls, within a share of the budget (loop-time probes);
* :class:`BagKeeper` -- keeps each version's bag of words beside the store
  for the change test and the ``D*`` terminals.

What a plug-in keeps between cycles goes through the store's side storage
(:class:`~scrapy_recrawl.history.base.HistoryStore`), never its connection, so
every plug-in works on every backend.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..history.base import HistoryArrays
from ..scoring.registry import Terminal
from .budget import Budget
from .selection import Selection


def uses_terminals(plugin: Any, terminals_needed: Collection[str]) -> bool:
    """Whether the scorer uses one of the terminals ``plugin`` (a class) declares."""
    needed = frozenset(terminals_needed)
    return any(t.name in needed for t in getattr(plugin, "terminals", ()))


@runtime_checkable
class RecrawlPlugin(Protocol):
    """The class-level contract of every plug-in."""

    #: the terminals it adds (:class:`~scrapy_recrawl.scoring.registry.Terminal`, each
    #: computed from the columns its ColumnProvider adds): once the plug-in is listed,
    #: the scorer's parser accepts them and the crawl and the docs' table know them
    terminals: ClassVar[Sequence[Terminal]]

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        """Whether this crawl needs the plug-in: its settings, or the scorer using one of
        its terminals (:func:`uses_terminals`)."""
        ...

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        """Raise RecrawlSettingError naming a bad setting; called at start-up."""
        ...

    @classmethod
    def from_crawler(cls, crawler: Any, store: Any, terminals_needed: frozenset[str]) -> Any:
        """Build it for one crawl, beside the crawl's one open history store."""
        ...


@runtime_checkable
class ColumnProvider(Protocol):
    def columns(self, arrays: HistoryArrays, now: float) -> Mapping[str, np.ndarray]:
        """Columns aligned with ``arrays.ids``, added before the cycle is scored."""
        ...


@runtime_checkable
class Selector(Protocol):
    def select(
        self, arrays: HistoryArrays, budget: Budget, candidates: np.ndarray, new_waiting: int
    ) -> tuple[Selection, int]:
        """This cycle's recrawls (``candidates``: a mask over ``arrays.ids``) and how
        many of the ``new_waiting`` frontier URLs to take; replaces the scorer's top-k."""
        ...


@runtime_checkable
class ProbeSource(Protocol):
    def cap(self, budget_total: int | None) -> int | None:
        """Most probes a cycle with this budget may take (None: no cap)."""
        ...

    def has_due(self) -> bool: ...

    def pop_due(self) -> int | None:
        """The id of a URL due for a probe now, or None."""
        ...

    def next_due_time(self) -> float | None:
        """Wall time of the next probe coming due, to wake the engine then."""
        ...

    def dispatched(self, fingerprint: bytes, url_id: int) -> None:
        """The probe request for ``url_id`` went out with this fingerprint."""
        ...


@runtime_checkable
class BagKeeper(Protocol):
    def previous(self, url_id: int) -> list[Any]:
        """The URL's kept bags of words, newest first."""
        ...

    def keep(self, url_id: int, bag: Any, previous: list[Any]) -> None:
        """Keep ``bag`` as the URL's newest version."""
        ...
