"""The test kit for plug-in and backend authors (docs/plugins.md), as pytest ships
``pytester``: the contract and the way to test against it travel together.

* :class:`StoreContract` -- the store contract as a test class: a backend's test is a
  subclass whose ``make_store(tmp_path, request)`` returns an open, empty store;
* :func:`sqlite_store`, :func:`redis_store` -- fixtures of an open, empty store
  (the Redis one needs a redis-server: :mod:`scrapy_recrawl.testing.fixtures`);
* :func:`assert_plugin` -- a plug-in class meets what it declares.

Needs pytest, which the package itself does not: ``pip install 'scrapy-recrawl[testing]'``.
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "scrapy_recrawl.testing needs pytest: pip install 'scrapy-recrawl[testing]'"
    ) from exc

from typing import Any

from ..core.plugins import plugin_problems
from .fixtures import make_sqlite_store, redis_store, redis_store_at, sqlite_store
from .store_contract import StoreContract, fp

__all__ = [
    "StoreContract",
    "assert_plugin",
    "fp",
    "make_sqlite_store",
    "redis_store",
    "redis_store_at",
    "sqlite_store",
]


def assert_plugin(cls: Any) -> None:
    """Fail, listing each problem, unless the plug-in class ``cls`` meets what it
    declares (its API version, its capabilities' methods and their signatures, no
    near miss of a capability's method name): the check the crawl makes at start-up."""
    found = plugin_problems(cls)
    assert not found, "\n".join(found)
