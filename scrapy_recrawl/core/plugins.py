"""What a paper's policy plugs into: small protocols the crawl calls, and nothing more.

A plug-in is a class named in ``RECRAWL_PLUGINS_BASE`` (the built-in papers)
or ``RECRAWL_PLUGINS`` (yours), dicts of ``{"dotted.path": order}`` merged the
way Scrapy merges ``DOWNLOADER_MIDDLEWARES``; ``None`` switches one off. The
crawl loads them by path (:mod:`scrapy_recrawl.plugins`), so the schedulers,
the middleware and the change detector import no paper's code. A plug-in
author imports these names from :mod:`scrapy_recrawl.api` (docs/plugins.md).

Every plug-in class offers :class:`RecrawlPlugin` (its terminals, whether this
crawl needs it, how to build it), says which plug-in API version it targets
(``api_version``, :data:`API_VERSION`) and *declares* the capabilities it
offers (``capabilities``, names of :data:`PLUGIN_CAPABILITIES`); the crawl calls an
instance only through the capabilities it declares (:func:`declared`):

* ``"columns"``, :class:`ColumnProvider` -- adds per-URL columns before each
  cycle is scored (``due``'s basket interval, the ``C*``/``D*``/``Q`` columns);
* ``"selector"``, :class:`Selector` -- replaces the scored top-k with its own pick
  (the WebFountain plan); at most one per crawl;
* ``"probes"``, :class:`ProbeSource` -- asks for extra fetches of given URLs ahead
  of the cycle's recrawls, within a share of the budget (loop-time probes);
* ``"bag_keeper"``, :class:`BagKeeper` -- keeps each version's bag of words
  beside the store for the change test and the ``D*`` terminals;
* ``"visit_hook"``, :class:`VisitHook` -- told of every visit the middleware
  records, with its change signal (``Visit.changed``).

At load, :func:`plugin_problems` checks a class against what it declares (a
declared method missing or with the wrong signature, a near miss of a
capability's method name, an API version this package does not speak) and
:func:`warn_problems` says each in one log line (core/capabilities.py).

What a plug-in keeps between cycles goes through the store's side storage
(:class:`~scrapy_recrawl.history.base.HistoryStore`), never its connection, so
every plug-in works on every backend.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..history.base import HistoryArrays, UrlRecord, Visit
from ..scoring.registry import Terminal
from . import capabilities as _check
from .budget import Budget
from .selection import Selection

logger = logging.getLogger("scrapy_recrawl.plugins")

#: The plug-in API version this package implements; a plug-in class says which one it
#: targets (``api_version = "1"``). A later version that changes a protocol's call
#: adds its number here and keeps speaking the older ones it still can.
API_VERSION = "1"

#: every plug-in API version this package speaks
API_VERSIONS: frozenset[str] = frozenset({API_VERSION})


def uses_terminals(plugin: Any, terminals_needed: Collection[str]) -> bool:
    """Whether the scorer uses one of the terminals ``plugin`` (a class) declares."""
    needed = frozenset(terminals_needed)
    return any(t.name in needed for t in getattr(plugin, "terminals", ()))


@runtime_checkable
class RecrawlPlugin(Protocol):
    """The class-level contract of every plug-in (:class:`Plugin` gives the defaults)."""

    #: the plug-in API version it targets (one of :data:`API_VERSIONS`)
    api_version: ClassVar[str]
    #: the capabilities its instances offer (names of :data:`PLUGIN_CAPABILITIES`); the crawl
    #: calls only these. An instance may narrow them for one crawl by setting its own
    #: ``capabilities`` (a subset), as the content plug-in drops ``"bag_keeper"`` when
    #: no bag of words is needed
    capabilities: Collection[str]
    #: the terminals it adds (:class:`~scrapy_recrawl.scoring.registry.Terminal`, each
    #: computed from the columns its ColumnProvider adds): once the plug-in is listed,
    #: the scorer's parser accepts them and the crawl and the docs' table know them
    terminals: ClassVar[Sequence[Terminal]]
    #: True exactly when it declares ``"selector"``: it replaces the scorer's pick, and
    #: two such plug-ins on in one crawl are refused at start-up
    selects: ClassVar[bool]
    #: its own ``RECRAWL_*`` settings (``RECRAWL_MY_THING``), which the start-up check of
    #: unknown ``RECRAWL_*`` names then knows (docs/project-settings.md)
    setting_names: ClassVar[Collection[str]]

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


@runtime_checkable
class VisitHook(Protocol):
    def visited(self, visit: Visit, record: UrlRecord) -> None:
        """The middleware just handed the store ``visit`` (a response, or a failed
        download: ``status`` 0) and ``record`` is the URL's record after it.
        ``visit.changed`` is the change signal: True / False for an observation, None
        for a first fetch, a failure or a 304 with no copy to compare. Called in the
        crawl's thread for every recorded visit, held ones included: keep it cheap."""
        ...


#: capability name -> the protocol an instance declaring it offers
PLUGIN_CAPABILITIES: Mapping[str, type] = {
    "columns": ColumnProvider,
    "selector": Selector,
    "probes": ProbeSource,
    "bag_keeper": BagKeeper,
    "visit_hook": VisitHook,
}


class Plugin:
    """A base class with the defaults of :class:`RecrawlPlugin`: no terminals, no
    settings of its own, on when the scorer uses one of its terminals, built with no
    arguments. A subclass sets ``api_version`` and ``capabilities`` itself: what it
    targets and offers is said where it is written."""

    terminals: ClassVar[Sequence[Terminal]] = ()
    selects: ClassVar[bool] = False
    setting_names: ClassVar[Collection[str]] = ()

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        return uses_terminals(cls, terminals_needed)

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        return None

    @classmethod
    def from_crawler(cls, crawler: Any, store: Any, terminals_needed: frozenset[str]) -> Any:
        return cls()


def declared(plugin: Any, capability: str) -> bool:
    """Whether ``plugin`` (a class or an instance) declares ``capability``: the one way
    the crawl decides which capabilities of a plug-in it calls. An unknown name is a
    ValueError (a typo in the package's own call sites, caught by its tests)."""
    if capability not in PLUGIN_CAPABILITIES:
        raise ValueError(f"unknown plug-in capability {capability!r}")
    return capability in getattr(plugin, "capabilities", ())


def offering(plugins: Iterable[Any], capability: str) -> list[Any]:
    """The plug-ins (instances, in order) that declare ``capability``."""
    return [p for p in plugins if declared(p, capability)]


def plugin_problems(cls: Any) -> list[str]:
    """What is wrong with the plug-in class ``cls`` against the protocols above, one
    line each naming the class and the method or capability (empty: nothing).
    Pure: it imports nothing and builds nothing (core/capabilities.py)."""
    return _check.problems(
        cls,
        RecrawlPlugin,
        PLUGIN_CAPABILITIES,
        API_VERSIONS,
        attributes=("terminals",),
        selector="selector",
    )


def warn_problems(classes: Iterable[Any]) -> list[str]:
    """Say each problem of the plug-in classes in one warning line, at start-up;
    returns them. Helper methods of other names are fine: only near misses of a
    capability's method names are said."""
    found = _check.check_all(list(classes), plugin_problems)
    for line in found:
        logger.warning("recrawl: %s", line)
    return found
