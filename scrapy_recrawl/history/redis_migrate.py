"""The Redis store's schema versions: which it opens, and the steps that upgrade it.

The first release (v0.1.0) is the baseline (:data:`~.base.BASELINE_SCHEMA_VERSION`):
a store written before it (schema 1 to 7, every one of them pre-release) is refused in
one line (:func:`~.base.pre_release_store`: ``scrapy recrawl-reset`` empties it), one
written by a newer scrapy-recrawl too. Between the two, :data:`STEPS` upgrades a store
one version at a time: the step from version ``v`` is ``STEPS[v]``, called with the
client, the store's key layout and its location; it writes ``schema_version`` ``v + 1``
itself, together with its change (all of it or none: a step interrupted runs again at
the next open), and checks the version it starts from, so that two processes opening
the store at once run it once. ``STEPS[8]`` only records version 9: schema 9 changed
the SQLite store (history/sqlite_packed.py), and the one version sequence is shared by
both backends; the Redis format is unchanged (tests/test_store_v8_fixtures.py upgrades
a store made by v0.1.0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import BASELINE_SCHEMA_VERSION, SCHEMA_VERSION, HistoryStoreError, pre_release_store
from .redis_schema import Layout

#: One upgrade step: ``(client, layout, location)``; it sets ``schema_version`` to one more.
Step = Callable[[Any, Layout, str], None]


def _record_version_9(client: Any, layout: Layout, location: str) -> None:
    """8 -> 9: nothing of the Redis store changes (9 packed the SQLite store's scoring
    columns); only the version is written, if the store is still at 8 (another
    process opening it at once may have written it already: the same value)."""
    meta = layout.store("meta")
    if int(client.hget(meta, "schema_version") or 0) == 8:
        client.hset(meta, "schema_version", 9)


#: The step from each version to the next, by the version it starts from.
STEPS: dict[int, Step] = {8: _record_version_9}

#: The version this build writes (a test may raise it together with :data:`STEPS`).
TARGET = SCHEMA_VERSION


def check_version(version: int, where: str) -> None:
    """Refuse a store this build cannot upgrade (``where``: the store, for the message):
    one older than the release baseline, or one newer than this build."""
    if version < BASELINE_SCHEMA_VERSION:
        raise pre_release_store(where, version)
    if version > TARGET:
        raise HistoryStoreError(
            f"{where} has schema version {version}, newer than this scrapy-recrawl "
            f"understands ({TARGET}): upgrade scrapy-recrawl or point RECRAWL_STORE elsewhere"
        )


def migrate(client: Any, layout: Layout, location: str, version: int) -> None:
    """Run the steps from ``version`` up to :data:`TARGET`, in order."""
    for step in range(version, TARGET):
        run = STEPS.get(step)
        if run is None:
            raise HistoryStoreError(
                f"history store {location}: no upgrade from schema version {step} to "
                f"{step + 1} in this build"
            )
        run(client, layout, location)
