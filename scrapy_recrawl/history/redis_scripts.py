"""The Redis history store's Lua scripts, read from their ``.lua`` files
(scrapy_recrawl/lua/history_*.lua) and checked against the encoding they share with
Python.

A script restates the numbers of :mod:`.redis_schema` it needs as ``local NAME = value``
lines (Lua has no import); :func:`script` refuses a file whose line disagrees with the
Python constant, so the two cannot drift apart unnoticed (checked when this module is
imported). Every script that writes is :func:`guarded` by the store's epoch.
"""

from __future__ import annotations

import re
from typing import Any

from .. import lua
from .redis_schema import BIG_BLOB, MAX_SHAPES, NO_COUNT, ROW_SIZE, VISIT_FORMAT_LUA


def script(name: str, **constants: Any) -> str:
    """The source of ``lua/<name>.lua``, each of ``constants`` checked: the file must
    declare ``local NAME = value`` with the value Python has (a string quoted)."""
    source = lua.load(name)
    for const, value in constants.items():
        want = f"'{value}'" if isinstance(value, str) else str(value)
        found = re.search(rf"^local {const} = (\S+)", source, re.M)
        if found is None or found.group(1) != want:
            raise AssertionError(
                f"lua/{name}.lua: local {const} must be {want} (history/redis_schema.py), "
                f"found {found.group(1) if found else 'no declaration'}"
            )
    return source


def guarded(source: str) -> str:
    """``source``, refusing to run unless the store's epoch is the caller's (its last key:
    the meta hash; its last argument: the epoch): lua/history_epoch_guard.lua first."""
    return EPOCH_GUARD + source


EPOCH_GUARD = script("history_epoch_guard")
_STORED_BLOB = script("history_stored_blob", BIG_BLOB=BIG_BLOB)

#: one shard's batch of visits folded into its rows and log (the flush)
RECORD = guarded(
    _STORED_BLOB
    + script(
        "history_record",
        NO_COUNT=NO_COUNT,
        BIG_BLOB=BIG_BLOB,
        VFMT=VISIT_FORMAT_LUA,
        ROWSIZE=ROW_SIZE,
    )
)
#: a URL's record in one round trip (read only)
GET = _STORED_BLOB + script("history_get", ROWSIZE=ROW_SIZE)
#: the host and request-shape dictionaries: each value's id, the new ones added
DICT = guarded(script("history_dict", MAX_SHAPES=MAX_SHAPES))
PUSH_FRONTIER = guarded(script("history_push_frontier"))
POP_FRONTIER = guarded(script("history_pop_frontier"))
SIDE_PUSH = guarded(script("history_side_push"))
SIDE_PUT = guarded(script("history_side_put"))
SIDE_DELETE = guarded(script("history_side_delete"))
RESERVE_IDS = guarded(script("history_reserve_ids"))
ADVANCE_CYCLE = guarded(script("history_advance_cycle"))
