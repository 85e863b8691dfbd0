"""A crawl's terminal registry: the core's terminals plus those of its listed plug-ins.

The plug-ins are the classes whose dotted paths ``RECRAWL_PLUGINS_BASE`` (the
built-in papers) and ``RECRAWL_PLUGINS`` (yours) list; this module loads them by
path and registers the terminals each declares (its ``terminals`` attribute,
:class:`scrapy_recrawl.core.plugins.RecrawlPlugin`) on a copy of the core's
registry (:func:`scrapy_recrawl.scoring.registry.core_registry`), stamped with
the path it was listed under. It sits above ``scoring/`` and the cycle core, which
load no class by path: the crawl's plug-in loading (:mod:`scrapy_recrawl.plugins`),
the GP (``learn/``), ``recrawl-report``'s story (``insight/``) and ``recrawl-evolve``
build their registry here, and hand it to the scorer
(:meth:`~scrapy_recrawl.scoring.Scorer.from_spec`'s ``registry``).

The docs' table of terminals (docs/scorers.md) is
``python -m scrapy_recrawl.plugin_terminals``: the core's and the built-in plug-ins'.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from .scoring import Scorer
from .scoring.policies import BURST_TAU, NUTCH_DEFAULTS, burst_tau, nutch_parameters
from .scoring.registry import Terminal, TerminalRegistry, core_registry
from .settings import DEFAULTS, RecrawlSettingError, convert

__all__ = [
    "default_registry",
    "load_plugin",
    "path_of",
    "plugin_paths",
    "registry_for",
    "registry_from_settings",
    "scorer_from_settings",
]


def plugin_paths(settings: Any) -> list[Any]:
    """RECRAWL_PLUGINS_BASE + RECRAWL_PLUGINS merged like Scrapy's DOWNLOADER_MIDDLEWARES:
    the listed paths (or classes) by order, switched-off (None) ones left out.
    ``settings`` None: the defaults."""
    from scrapy.utils.conf import build_component_list

    merged: dict[Any, Any] = {}
    for name in ("RECRAWL_PLUGINS_BASE", "RECRAWL_PLUGINS"):
        value = DEFAULTS[name] if settings is None else settings.get(name, DEFAULTS[name])
        # a JSON object from the command line (-s), as Settings.getdict() reads one
        value = convert(name, value, "a dict {'path.Class': order}")
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise RecrawlSettingError(f"{name}={value!r}: expected a dict {{'path.Class': order}}")
        merged.update(value)
    try:
        return build_component_list(merged)
    except ValueError as exc:
        raise RecrawlSettingError(f"RECRAWL_PLUGINS: {exc}") from None


def load_plugin(path: Any) -> Any:
    """The plug-in class at ``path`` (a class is taken as it is); RecrawlSettingError naming
    the path if it cannot be loaded."""
    from scrapy.utils.misc import load_object

    if not isinstance(path, str):
        return path
    try:
        return load_object(path)
    except (ImportError, ValueError, NameError, AttributeError) as exc:
        raise RecrawlSettingError(
            f"RECRAWL_PLUGINS: cannot load the plug-in {path!r}: {exc}"
        ) from None


def path_of(entry: Any) -> str:
    """The dotted path of a RECRAWL_PLUGINS entry (a path, or a class)."""
    if isinstance(entry, str):
        return entry
    return f"{entry.__module__}.{entry.__qualname__}"


def registry_for(
    paths: Iterable[Any],
    nutch: Mapping[str, float] | None = None,
    burst: float | None = None,
) -> TerminalRegistry:
    """The core terminals plus those of the plug-ins at ``paths`` (each stamped with the
    path it was listed under as its ``provider``); ``nutch``: RECRAWL_NUTCH_*'s numbers
    for ``nutch_interval`` (None: Nutch's defaults); ``burst``: RECRAWL_BURST_TAU for
    ``burst`` (None: its default)."""
    registry = core_registry(nutch, burst).copy()
    for entry in paths:
        path = path_of(entry)
        declared = tuple(getattr(load_plugin(entry), "terminals", ()))
        for terminal in declared:
            if not isinstance(terminal, Terminal):
                raise RecrawlSettingError(
                    f"RECRAWL_PLUGINS: {path}.terminals holds {terminal!r}; expected "
                    "scrapy_recrawl.scoring.registry.Terminal objects"
                )
        try:
            registry.register_plugin(path, declared)
        except ValueError as exc:
            raise RecrawlSettingError(f"RECRAWL_PLUGINS: {path}: {exc}") from None
    return registry


@functools.lru_cache(maxsize=1)
def default_registry() -> TerminalRegistry:
    """The core terminals and the built-in plug-ins' (RECRAWL_PLUGINS_BASE's defaults).

    Treat it as read-only: it is shared (cached)."""
    return registry_for(plugin_paths(None))


def registry_from_settings(settings: Any) -> TerminalRegistry:
    """The registry a crawl with these settings uses (its listed plug-ins' terminals, its
    RECRAWL_NUTCH_* numbers, its RECRAWL_BURST_TAU; each checked, RecrawlSettingError
    naming the setting)."""
    paths = plugin_paths(settings)
    # checked whatever the scorer: start-up fails early
    nutch, tau = nutch_parameters(settings), burst_tau(settings)
    if paths == plugin_paths(None) and nutch == NUTCH_DEFAULTS and tau == BURST_TAU:
        return default_registry()
    return registry_for(paths, nutch, tau)


def scorer_from_settings(settings: Any) -> Scorer:
    """A crawl's scorer: RECRAWL_SCORER, RECRAWL_PRIOR and RECRAWL_SEED
    (:meth:`Scorer.from_settings <scrapy_recrawl.scoring.Scorer.from_settings>`) over
    :func:`registry_from_settings`'s terminals, which it then computes its own with."""
    return Scorer.from_settings(settings, registry=registry_from_settings(settings))


if __name__ == "__main__":  # the docs' table: python -m scrapy_recrawl.plugin_terminals
    # through the imported module (run as __main__, this file is a second copy of it)
    from scrapy_recrawl.plugin_terminals import default_registry as _registry

    print(_registry().markdown_table(), end="")
