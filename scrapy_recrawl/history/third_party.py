"""A backend of one's own (``RECRAWL_STORE_CLASS``): built and checked against the contract.

As ``HTTPCACHE_STORAGE`` names a cache storage, ``RECRAWL_STORE_CLASS`` names a class
with ``from_settings(settings, *, spider, read_only)``; what it builds must offer the
whole store contract (history/base.py: HistoryStore) and the members of each
capability it declares. Anything less is one RecrawlSettingError line naming the
setting, at start-up, before the store is opened.
"""

from __future__ import annotations

from typing import Any

from ..settings import RecrawlSettingError
from .base import HistoryStore, capability_gaps
from .class_path import load_class


def build_store(path: str, settings: Any, *, spider: str | None, read_only: bool) -> HistoryStore:
    """RECRAWL_STORE_CLASS: a backend of your own, as HTTPCACHE_STORAGE names one.

    Built with ``cls.from_settings(settings, spider=spider, read_only=read_only)``: the
    spider whose history it is (None: not known) and whether it is opened for reading
    only (the offline commands: never created, migrated, claimed or written). It must
    offer the whole store contract (base.HistoryStore) and the members of each
    capability it declares (base.capability_gaps); else one RecrawlSettingError line.
    """
    where = f"RECRAWL_STORE_CLASS={path!r}"
    try:
        cls = load_class(path)
    except (ImportError, ValueError, AttributeError) as exc:
        raise RecrawlSettingError(f"{where}: cannot load it: {exc}") from None
    # its methods, before it is built; its attributes (set by its constructor) after
    methods = [n for n in dir(HistoryStore) if callable(getattr(HistoryStore, n, None))]
    _refuse_lacking(where, cls, ["from_settings", *methods])
    store = cls.from_settings(settings, spider=spider, read_only=read_only)
    _refuse_lacking(where, store, [*dir(HistoryStore), *HistoryStore.__annotations__])
    gaps = capability_gaps(store)
    if gaps:
        raise RecrawlSettingError(f"{where}: {'; '.join(gaps)} (scrapy_recrawl.history.base)")
    return store


def _refuse_lacking(where: str, obj: Any, names: list[str]) -> None:
    missing = sorted({n for n in names if not n.startswith("_") and not hasattr(obj, n)})
    if missing:
        raise RecrawlSettingError(
            f"{where} is not a history store: it lacks {', '.join(missing)} "
            "(scrapy_recrawl.history.base.HistoryStore; from_settings(settings, *, spider, "
            "read_only) builds it)"
        )
