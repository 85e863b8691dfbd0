"""Every Lua script the package ships (scrapy_recrawl/lua/*.lua) compiles in a real
Redis, and none is left in Python source (issue 30, item 4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scrapy_recrawl import lua

PACKAGE = Path(lua.__file__).resolve().parent.parent


def test_the_package_ships_its_scripts():
    names = lua.names()
    assert "history_record" in names and "liveness_stamp" in names
    assert {"frontier_command", "frontier_fence", "frontier_fetched", "frontier_reserve"} <= set(
        names
    )
    for name in names:
        assert lua.load(name).strip(), name


@pytest.mark.parametrize("name", lua.names())
def test_each_script_loads_into_redis(redis_db, name):
    """SCRIPT LOAD compiles it: a syntax error is a ResponseError naming the line."""
    client = redis_db.client()
    source = lua.load(name)
    sha = client.script_load(source)
    assert client.script_exists(sha) == [True]
    client.close()


def test_the_scripts_the_history_store_runs_load_whole(redis_db):
    """As the store registers them: the epoch guard and the shared blob reading first."""
    from scrapy_recrawl.history import redis_scripts

    client = redis_db.client()
    for name in ("RECORD", "GET", "DICT", "PUSH_FRONTIER", "POP_FRONTIER", "SIDE_PUSH"):
        assert client.script_load(getattr(redis_scripts, name)), name
    client.close()


def test_a_script_disagreeing_with_the_python_constants_is_refused(monkeypatch):
    from scrapy_recrawl.history import redis_scripts

    source = lua.load("history_get").replace("local ROWSIZE = 87", "local ROWSIZE = 88")
    monkeypatch.setattr(lua, "load", lambda name: source)
    with pytest.raises(AssertionError, match=r"history_get\.lua: local ROWSIZE must be 87"):
        redis_scripts.script("history_get", ROWSIZE=87)


def _python_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize(
    "module",
    sorted([*(PACKAGE / "history").glob("*.py"), *(PACKAGE / "frontier").glob("*.py")]),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_no_python_module_holds_lua_source(module):
    """Lua lives in .lua files: no string of a history/ or frontier/ module calls Redis
    from Lua."""
    for text in _python_strings(module):
        assert "redis.call(" not in text and "redis.pcall(" not in text, module.name
        assert "redis.error_reply(" not in text, module.name
