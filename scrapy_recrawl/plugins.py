"""Load the plug-ins a crawl needs, once per crawler, by the paths in the settings.

``RECRAWL_PLUGINS_BASE`` (the built-in papers) and ``RECRAWL_PLUGINS`` (yours)
are dicts ``{"dotted.path.Class": order}``, merged and ordered the way Scrapy
merges ``DOWNLOADER_MIDDLEWARES`` (``None`` switches one off). A listed class
is built only when the crawl needs it (:meth:`RecrawlPlugin.enabled`: its
settings, or the scorer using one of its terminals). The schedulers and the
middleware see plug-ins only through the capabilities of
:mod:`scrapy_recrawl.core.plugins`.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from .core.plugins import BagKeeper, ColumnProvider, ProbeSource, Selector
from .scoring import Scorer
from .settings import RecrawlSettingError, get


def plugin_classes(settings: Any) -> list[Any]:
    """The listed plug-in classes, in order (a bad path: RecrawlSettingError naming it)."""
    # a JSON object from the command line, as Settings.getdict() reads one
    expect = "a dict {'path.Class': order}"
    base = get(settings, "RECRAWL_PLUGINS_BASE", dict, expect=expect)
    mine = get(settings, "RECRAWL_PLUGINS", dict, expect=expect)
    classes: list[Any] = []
    for path in build_component_list({**(base or {}), **(mine or {})}):
        try:
            cls = load_object(path) if isinstance(path, str) else path
        except (ImportError, ValueError, NameError, AttributeError) as exc:
            raise RecrawlSettingError(
                f"RECRAWL_PLUGINS: cannot load the plug-in {path!r}: {exc}"
            ) from None
        classes.append(cls)
    return classes


@dataclass
class Plugins:
    """The plug-ins built for one crawl, sorted by what they offer."""

    instances: list[Any] = field(default_factory=list)

    @property
    def column_providers(self) -> list[ColumnProvider]:
        return [p for p in self.instances if isinstance(p, ColumnProvider)]

    @property
    def selector(self) -> Selector | None:
        found = [p for p in self.instances if isinstance(p, Selector)]
        return found[0] if found else None

    @property
    def probe_source(self) -> ProbeSource | None:
        found = [p for p in self.instances if isinstance(p, ProbeSource)]
        return found[0] if found else None

    @property
    def bag_keeper(self) -> BagKeeper | None:
        found = [p for p in self.instances if isinstance(p, BagKeeper)]
        return found[0] if found else None


def check_plugins(settings: Any, terminals_needed: Collection[str]) -> list[Any]:
    """Start-up check: load the listed classes, check the settings of those this
    crawl needs, refuse two selectors; returns the needed classes."""
    needed = frozenset(terminals_needed)
    wanted = [cls for cls in plugin_classes(settings) if cls.enabled(settings, needed)]
    for cls in wanted:
        cls.check_settings(settings)
    selectors = [cls.__name__ for cls in wanted if getattr(cls, "selects", False)]
    if len(selectors) > 1:
        raise RecrawlSettingError(
            f"RECRAWL_PLUGINS: two plug-ins replace the scorer's pick ({', '.join(selectors)}); "
            "turn one off"
        )
    return wanted


_PLUGINS: weakref.WeakKeyDictionary[Any, Plugins] = weakref.WeakKeyDictionary()
_SCORERS: weakref.WeakKeyDictionary[Any, Scorer] = weakref.WeakKeyDictionary()


def scorer_for_crawler(crawler: Any) -> Scorer:
    """RECRAWL_SCORER parsed once per crawler, for the scheduler and the middleware."""
    scorer = _SCORERS.get(crawler)
    if scorer is None:
        scorer = _SCORERS[crawler] = Scorer.from_settings(crawler.settings)
    return scorer


def plugins_for_crawler(crawler: Any, store: Any, terminals_needed: Collection[str]) -> Plugins:
    """The one set of plug-ins shared by this crawler's scheduler and middleware."""
    plugins = _PLUGINS.get(crawler)
    if plugins is None:
        needed = frozenset(terminals_needed)
        classes = check_plugins(crawler.settings, needed)
        plugins = Plugins([cls.from_crawler(crawler, store, needed) for cls in classes])
        _PLUGINS[crawler] = plugins
    return plugins
