"""Every Lua script the package ships (scrapy_recrawl/lua/*.lua) loads into a real
redis-server, and no Python module of the frontier holds Lua source of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scrapy_recrawl import lua

FRONTIER = Path(lua.__file__).resolve().parent.parent / "frontier"

#: what only Lua source has: a call into Redis from a script, a Lua local assigned
LUA_SOURCE = re.compile(r"redis\.call\(|redis\.error_reply\(|^\s*local \w+(?:, \w+)* = ", re.M)


@pytest.mark.parametrize("name", lua.names())
def test_script_loads(redis_db, name):
    client = redis_db.client()
    try:
        sha = client.script_load(lua.load(name))
        assert client.script_exists(sha) == [True]
    finally:
        client.close()


def test_frontier_scripts_are_lua_files():
    assert {"frontier_command", "frontier_fence", "frontier_fetched", "frontier_reserve"} <= set(
        lua.names()
    )
    holders = [p.name for p in FRONTIER.glob("*.py") if LUA_SOURCE.search(p.read_text())]
    assert holders == []
