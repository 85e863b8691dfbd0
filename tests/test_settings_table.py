"""One declaration per setting (scrapy_recrawl/settings.py: SETTINGS): a read site names
the setting and nothing more, so a setting's check and its wording live in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scrapy_recrawl.settings import DEFAULTS, KINDS, SETTINGS, RecrawlSettingError, get

PACKAGE = Path(__file__).resolve().parent.parent / "scrapy_recrawl"
SCRAPY_GETTERS = {"getbool", "getint", "getfloat", "getlist", "getdict", "getwithbase"}


def _read_sites() -> list[tuple[str, int, str]]:
    """Every call of settings.get(...) with more than (settings, name), and every Scrapy
    typed getter of a RECRAWL_* name, outside settings.py."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            if isinstance(node.func, ast.Name) and node.func.id == "get":
                if len(node.args) > 2 or node.keywords:
                    found.append((where, node.lineno, "get() with a check at its read site"))
            elif isinstance(node.func, ast.Attribute) and node.func.attr in SCRAPY_GETTERS:
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and str(first.value).startswith("RECRAWL_"):
                    found.append((where, node.lineno, f"{node.func.attr}({first.value!r})"))
    return found


def test_no_read_site_checks_a_setting_of_its_own():
    assert _read_sites() == []


def test_the_views_are_the_table():
    assert set(DEFAULTS) == set(KINDS) == set(SETTINGS)
    for name, declared in SETTINGS.items():
        assert declared.name == name and declared.expect, name
        assert DEFAULTS[name] is declared.default


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_default_passes_its_own_declaration(name):
    get({}, name)  # a default the table refuses would stop every crawl


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("RECRAWL_FLUSH_EVERY", 0, "a positive number of visits"),
        ("RECRAWL_SIMHASH_DISTANCE", 65, "an int from 0 to 64"),
        ("RECRAWL_BASKETS", [4], "at least 2 increasing positive recrawl intervals"),
        ("RECRAWL_PROBE_OFFSETS", "4,3", "increasing positive numbers of hours"),
        ("RECRAWL_UNSTORED_HEADERS", [1], "a list of header names"),
        ("RECRAWL_WINDOW", 6, "an int from 1 to 5"),
    ],
)
def test_a_bad_value_is_refused_in_the_declarations_words(name, value, words):
    with pytest.raises(RecrawlSettingError, match=f"^{name}=.*: expected {words}"):
        get({name: value}, name)
