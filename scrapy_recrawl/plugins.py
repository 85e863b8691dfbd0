"""Load the plug-ins a crawl needs, once per crawler, by the paths in the settings.

``RECRAWL_PLUGINS_BASE`` (the built-in papers) and ``RECRAWL_PLUGINS`` (yours)
are dicts ``{"dotted.path.Class": order}``, merged and ordered the way Scrapy
merges ``DOWNLOADER_MIDDLEWARES`` (``None`` switches one off). A listed class
is built only when the crawl needs it (:meth:`RecrawlPlugin.enabled`: its
settings, or the scorer using one of its terminals). The terminals the listed
plug-ins declare join the core's in the crawl's terminal registry
(:func:`~scrapy_recrawl.plugin_terminals.registry_from_settings`), which the
scorer is parsed against once per crawler. The schedulers and the middleware
see plug-ins only through the capabilities of :mod:`scrapy_recrawl.core.plugins`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from .core.plugins import (
    BagKeeper,
    ColumnProvider,
    ProbeSource,
    Selector,
    VisitHook,
    declared,
    offering,
)
from .plugin_terminals import (
    load_plugin,
    path_of,
    plugin_paths,
    registry_from_settings,
    scorer_from_settings,
)
from .runtime import CrawlerRuntime
from .scoring import Scorer
from .settings import RecrawlSettingError

logger = logging.getLogger(__name__)


def plugin_classes(settings: Any) -> list[Any]:
    """The listed plug-in classes, in order (a bad path: RecrawlSettingError naming it);
    the same list, read the same way, as the terminal registry's."""
    return [load_plugin(path) for path in plugin_paths(settings)]


@dataclass
class Plugins:
    """The plug-ins built for one crawl, sorted by what they offer."""

    instances: list[Any] = field(default_factory=list)

    @property
    def column_providers(self) -> list[ColumnProvider]:
        return offering(self.instances, "columns")

    @property
    def selector(self) -> Selector | None:
        found = offering(self.instances, "selector")
        return found[0] if found else None

    @property
    def probe_source(self) -> ProbeSource | None:
        found = offering(self.instances, "probes")
        return found[0] if found else None

    @property
    def bag_keeper(self) -> BagKeeper | None:
        found = offering(self.instances, "bag_keeper")
        return found[0] if found else None

    @property
    def visit_hooks(self) -> list[VisitHook]:
        return offering(self.instances, "visit_hook")


def check_plugins(settings: Any, terminals_needed: Collection[str]) -> list[Any]:
    """Start-up check: load the listed classes, check the settings of those this
    crawl needs, refuse two selectors; returns the needed classes."""
    needed = frozenset(terminals_needed)
    listed = [(path_of(path), load_plugin(path)) for path in plugin_paths(settings)]
    wanted = [cls for _, cls in listed if cls.enabled(settings, needed)]
    for cls in wanted:
        cls.check_settings(settings)
    selectors = [cls.__name__ for cls in wanted if declared(cls, "selector")]
    if len(selectors) > 1:
        raise RecrawlSettingError(
            f"RECRAWL_PLUGINS: two plug-ins replace the scorer's pick ({', '.join(selectors)}); "
            "turn one off"
        )
    # the registry says which listed plug-in adds each terminal the scorer uses
    on = {path for path, cls in listed if cls in wanted}
    for name, provider in sorted(registry_from_settings(settings).providers(needed).items()):
        if provider not in on:
            logger.warning(
                "RECRAWL_SCORER uses the terminal %r, but its plug-in %s is off in this "
                "crawl (its settings): %r is NaN, which ranks last",
                name,
                provider,
                name,
            )
    return wanted


def scorer_for_crawler(crawler: Any) -> Scorer:
    """RECRAWL_SCORER parsed once per crawler, for the scheduler and the middleware,
    against the crawl's terminal registry (the core's and the listed plug-ins'
    terminals), which it then computes its terminals with (the crawler's runtime keeps
    it: runtime.py)."""
    return CrawlerRuntime.of(crawler).part(Scorer, lambda: scorer_from_settings(crawler.settings))


def plugins_for_crawler(crawler: Any, store: Any, terminals_needed: Collection[str]) -> Plugins:
    """The one set of plug-ins shared by this crawler's scheduler and middleware, built
    by the first that asks and kept by the crawler's runtime (runtime.py)."""

    def build() -> Plugins:
        needed = frozenset(terminals_needed)
        classes = check_plugins(crawler.settings, needed)
        return Plugins([cls.from_crawler(crawler, store, needed) for cls in classes])

    return CrawlerRuntime.of(crawler).part(Plugins, build)
