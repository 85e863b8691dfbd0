"""The shape issue 30 gave the package, held: rooms small enough to enter, and the store
reached only through its contract."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "scrapy_recrawl"
MODULE_LINES, CLASS_LINES = 600, 400


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyx", ".pxd"))


def test_no_module_over_600_lines_and_no_class_over_400():
    too_big = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MODULE_LINES:
            too_big.append(f"{path.relative_to(PACKAGE)}: {len(text.splitlines())} lines")
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    if size > CLASS_LINES:
                        too_big.append(f"{path.relative_to(PACKAGE)}: {node.name} {size} lines")
    assert too_big == []


#: a store's member looked up by name (getattr(store, ...), getattr(self.store, ...))
_PROBE = re.compile(r"getattr\(\s*(?:self\.|self\.host\.|host\.)?_?store\b")


def test_no_store_member_is_probed_outside_the_store_package():
    """Everything the crawl and the commands read of a store is in its contract
    (history/base.py HistoryStore, the declared capabilities), never probed by name."""
    probes = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in _sources()
        if path.parent.name != "history"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _PROBE.search(line)
    ]
    assert probes == []
