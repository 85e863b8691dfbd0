"""The Redis Lua scripts the stores and the distributed frontier run, as ``.lua`` files.

They ship as package data beside this module (setup.cfg, MANIFEST.in): a script is
read, not assembled in Python, so it can be read and linted as Lua, and each one is
loaded into a real Redis by a test (tests/test_lua_scripts.py).
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    """The source of script ``name`` (``scrapy_recrawl/lua/<name>.lua``)."""
    return resources.files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


def names() -> list[str]:
    """Every script shipped, by name, sorted."""
    return sorted(
        entry.name[: -len(".lua")]
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".lua")
    )
