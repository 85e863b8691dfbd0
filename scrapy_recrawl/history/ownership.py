"""One history per spider: where a spider's store is by default, and whose a store is.

Scrapy keeps per-spider state apart by the spider's name (HttpCacheMiddleware: one
folder per spider; scrapy-redis: ``%(spider)s`` in its keys), and so does this
package: the default SQLite file is ``.scrapy/recrawl/<spider>/history.sqlite3``,
the default Redis prefix ``<spider>:history``, and ``%(spider)s`` may be used in
``RECRAWL_STORE`` and the key settings. A store remembers the spider that first
opened it for a crawl (schema version 3); another spider is refused, unless
``RECRAWL_SHARED_STORE`` says the sharing is meant (docs/project.md).
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings
from configparser import ConfigParser
from pathlib import Path
from typing import Any

from ..settings import RecrawlSettingError, get
from .base import HistoryStore, HistoryStoreError, fenced

logger = logging.getLogger("scrapy_recrawl.history")


class StoreRefused(HistoryStoreError):
    """The store belongs to another spider (and RECRAWL_SHARED_STORE is off)."""


#: What every spider of a project shared before stores were per spider (pre-release
#: builds): the file in the project's recrawl data dir.
OLD_DEFAULT = "history.sqlite3"


def for_spider(value: str, setting: str, spider: str | None) -> str:
    """``value`` with ``%(spider)s`` replaced by the spider's name (as scrapy-redis's keys)."""
    if "%(" not in value:
        return value
    if spider is None:
        raise RecrawlSettingError(
            f"{setting}={value!r} names the spider (%(spider)s), but no spider is known "
            "here: run it for a spider (a crawl, or the command's --spider NAME)"
        )
    try:
        return value % {"spider": spider}
    except (KeyError, ValueError, TypeError) as exc:
        raise RecrawlSettingError(
            f"{setting}={value!r}: only %(spider)s may be filled in ({exc})"
        ) from None


def recrawl_dir() -> str:
    """``recrawl`` in the project's data directory, as Scrapy's ``data_path("recrawl")``
    gives it (HttpCacheMiddleware's ``.scrapy/httpcache`` is its neighbour): in a
    project, beside its ``scrapy.cfg`` (or where a ``[datadir]`` section of Scrapy's
    config files says), else ``.scrapy/recrawl`` in the working directory.

    Found the way Scrapy finds it (scrapy.utils.project, scrapy.utils.conf), without
    importing Scrapy: history/ is plain Python. tests/test_ownership_paths.py pins the
    two to the same answer."""
    if _inside_project():
        return os.path.join(_project_data_dir(), "recrawl")
    return os.path.join(".scrapy", "recrawl")


#: Scrapy's names (scrapy.utils.project): its settings module's variable, the section
#: of scrapy.cfg that may set the project's data directory
_SETTINGS_ENVVAR = "SCRAPY_SETTINGS_MODULE"
_DATADIR_SECTION = "datadir"


def _inside_project() -> bool:
    module = os.environ.get(_SETTINGS_ENVVAR)
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            warnings.warn(f"Cannot import scrapy settings module {module}: {exc}", stacklevel=2)
        else:
            return True
    return bool(_closest_scrapy_cfg())


def _closest_scrapy_cfg() -> str:
    """The ``scrapy.cfg`` of the working directory or its nearest parent ("": none)."""
    path = Path.cwd().resolve()
    while True:
        cfg = path / "scrapy.cfg"
        if cfg.exists():
            return str(cfg)
        if path.parent == path:
            return ""
        path = path.parent


def _project_data_dir() -> str:
    xdg = os.environ.get("XDG_CONFIG_HOME") or Path("~/.config").expanduser()
    closest = _closest_scrapy_cfg()
    cfg = ConfigParser()
    cfg.read(
        [
            "/etc/scrapy.cfg",
            r"c:\scrapy\scrapy.cfg",
            str(Path(xdg) / "scrapy.cfg"),
            str(Path("~/.scrapy.cfg").expanduser()),
            closest,
        ]
    )
    if cfg.has_option(_DATADIR_SECTION, "default"):
        folder = Path(cfg.get(_DATADIR_SECTION, "default"))
    elif closest:
        folder = (Path(closest).parent / ".scrapy").resolve()
    else:
        raise RecrawlSettingError(
            f"RECRAWL_STORE is not set and {_SETTINGS_ENVVAR} names a project, but no "
            "scrapy.cfg is found to keep its history beside: run it from the project's "
            "folder, or set RECRAWL_STORE"
        )
    if not folder.exists():
        folder.mkdir(parents=True)
    return str(folder)


def default_sqlite_path(spider: str | None) -> str:
    """``.scrapy/recrawl/<spider>/history.sqlite3``: one folder per spider, as HttpCache."""
    if spider is None:
        raise RecrawlSettingError(
            "RECRAWL_STORE is not set and the history is kept per spider by default: "
            "name the spider (a crawl, or the command's --spider NAME) or set RECRAWL_STORE"
        )
    return os.path.join(recrawl_dir(), spider, "history.sqlite3")


def describe(store: HistoryStore) -> str:
    """The store as messages name it: its location, and its key prefix on a shared server."""
    if fenced(store) is not None:  # a shared server: the label is the key prefix
        return f"{store.location} (key prefix {store.label!r})"
    return store.location


def claim_store(store: HistoryStore, spider: str, settings: Any) -> None:
    """Record ``spider`` as the owner of the open ``store``, or refuse another spider's.

    A store nobody owns is adopted: silently when it is empty (a new store), with one
    log line when it holds a history (written by an earlier release, which did not
    record its spider). A store of another spider raises :class:`StoreRefused`
    (logged first, one line) unless ``RECRAWL_SHARED_STORE`` is on.
    """
    shared = get(settings, "RECRAWL_SHARED_STORE")
    before = store.owner()
    if before is None:
        fresh = len(store) == 0 and store.cycle == 0
        owner = store.claim(spider)
        if owner == spider and not fresh:
            logger.warning(
                "recrawl: the history store %s was written before stores knew their spider; "
                "the spider %r adopts it (another spider that opens it will be refused "
                "unless RECRAWL_SHARED_STORE = True)",
                describe(store),
                spider,
            )
    else:
        owner = before
    if owner == spider:
        return
    if shared:
        logger.info(
            "recrawl: the spider %r shares the history store %s of the spider %r "
            "(RECRAWL_SHARED_STORE)",
            spider,
            describe(store),
            owner,
        )
        return
    message = (
        f"the history store {describe(store)} belongs to the spider {owner!r}, not {spider!r}: "
        "give this spider its own (leave RECRAWL_STORE and RECRAWL_REDIS_KEY unset, or put "
        "%(spider)s in them), or set RECRAWL_SHARED_STORE = True if the spiders share one "
        "history on purpose"
    )
    logger.error("recrawl: %s", message)
    raise StoreRefused(message)


def warn_old_default(store: HistoryStore, spider: str, settings: Any) -> None:
    """Point out the file every spider of a project shared before stores were per
    spider (``.scrapy/recrawl/history.sqlite3``): a pre-release build wrote it, so this
    release cannot read it (history/base.py: BASELINE_SCHEMA_VERSION). Only when this
    spider uses the default SQLite store; the file is never moved, deleted or written
    (it may hold several spiders' pages). Said on every run while it is there."""
    from .sqlite import SqliteHistoryStore

    if get(settings, "RECRAWL_STORE_CLASS") or get(settings, "RECRAWL_STORE") is not None:
        return
    if not isinstance(store, SqliteHistoryStore):
        return
    old = os.path.join(recrawl_dir(), OLD_DEFAULT)
    if not os.path.isfile(old):
        return
    logger.warning(
        "recrawl: %s holds the history a pre-release scrapy-recrawl kept for every spider "
        "of the project; this release cannot read it, and the spider %r keeps its own in "
        "%s. Delete the old file once you no longer need it (it is left as it is)",
        os.path.relpath(old),
        spider,
        os.path.relpath(store.path),
    )
