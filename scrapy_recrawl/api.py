"""The public plug-in API: everything a plug-in or a backend outside the package imports.

One module to read, as pytest's hook specifications are (docs/plugins.md walks
through an example package built on it). Names imported from here keep their
meaning within one :data:`API_VERSION`; the modules they are defined in are the
package's own business and may move.

A **plug-in** is a class named in ``RECRAWL_PLUGINS``: it meets
:class:`RecrawlPlugin` (:class:`Plugin` gives the defaults), says the API version
it targets (``api_version = "1"``) and declares its capabilities
(``capabilities = frozenset({"columns", "visit_hook"})``), each a protocol of
:data:`PLUGIN_CAPABILITIES`: :class:`ColumnProvider` (``"columns"``: the columns its
:class:`Terminal`\\ s are computed from), :class:`Selector` (``"selector"``),
:class:`ProbeSource` (``"probes"``), :class:`BagKeeper` (``"bag_keeper"``) and
:class:`VisitHook` (``"visit_hook"``: every recorded visit and its change
signal). A listed plug-in's terminals reach a scorer through the registry built from
the settings (:func:`registry_from_settings`, :func:`scorer_from_settings`): the
scoring package alone knows only the core's. The crawl calls only what is declared (:func:`declared`), and checks a
class against its declaration when it loads it (:func:`plugin_problems`, one log
line each).

A **backend** is a class named in ``RECRAWL_STORE_CLASS`` that meets
:class:`HistoryStore` (:class:`SqliteHistoryStore`, the built-in one, to build on) and
declares its optional capabilities (:data:`STORE_CAPABILITIES`: :class:`FencedStore`,
:class:`FileStore`, :class:`ReadAheadStore`, reached through :func:`fenced`,
:func:`file_store` and :func:`read_ahead`);
:mod:`scrapy_recrawl.testing` holds the contract suite it should pass.
"""

from __future__ import annotations

from .core.budget import Budget
from .core.plugins import (
    API_VERSION,
    API_VERSIONS,
    PLUGIN_CAPABILITIES,
    BagKeeper,
    ColumnProvider,
    Plugin,
    ProbeSource,
    RecrawlPlugin,
    Selector,
    VisitHook,
    declared,
    plugin_problems,
    uses_terminals,
)
from .core.selection import Selection
from .history.base import (
    CAPABILITIES as STORE_CAPABILITIES,
)
from .history.base import (
    FencedStore,
    FileStore,
    FlushFailed,
    HistoryArrays,
    HistoryStore,
    HistoryStoreError,
    ReadAheadStore,
    StoredBody,
    UrlRecord,
    Visit,
    fenced,
    file_store,
    read_ahead,
)
from .history.sqlite import SqliteHistoryStore
from .plugin_terminals import registry_from_settings, scorer_from_settings
from .scoring.registry import Terminal, optional_column
from .settings import RecrawlSettingError

__all__ = [
    "API_VERSION",
    "API_VERSIONS",
    "PLUGIN_CAPABILITIES",
    "STORE_CAPABILITIES",
    "BagKeeper",
    "Budget",
    "ColumnProvider",
    "FencedStore",
    "FileStore",
    "FlushFailed",
    "HistoryArrays",
    "HistoryStore",
    "HistoryStoreError",
    "Plugin",
    "ProbeSource",
    "ReadAheadStore",
    "RecrawlPlugin",
    "RecrawlSettingError",
    "Selection",
    "Selector",
    "SqliteHistoryStore",
    "StoredBody",
    "Terminal",
    "UrlRecord",
    "Visit",
    "VisitHook",
    "declared",
    "fenced",
    "file_store",
    "optional_column",
    "plugin_problems",
    "read_ahead",
    "registry_from_settings",
    "scorer_from_settings",
    "uses_terminals",
]
