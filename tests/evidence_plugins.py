"""What the evidence crawl tests name by path in the crawl's settings: a terminal over
the ``importance`` column for the tests (the package's own ``w`` is defined elsewhere:
this one lets the tests score with the column whatever the core registry holds), and a
RECRAWL_IMPORTANCE callable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from scrapy_recrawl.scoring.registry import Terminal


def _w_test(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    if "importance" in state:
        return np.asarray(state["importance"], dtype=np.float64)
    return np.full(np.shape(state["n"]), np.nan)  # the evidence plug-in is off


class ImportanceForTests:
    """Adds the terminal ``w_test``; the evidence plug-in adds its column."""

    terminals: ClassVar[tuple[Terminal, ...]] = (
        Terminal("w_test", "the importance column (tests only)", _w_test),
    )
    api_version = "1"
    capabilities: ClassVar[frozenset[str]] = frozenset()  # it only names a column
    selects = False

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        return "w_test" in terminals_needed

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        pass

    @classmethod
    def from_crawler(cls, crawler: Any, store: Any, terminals_needed: frozenset[str]) -> Any:
        return cls()


def weigh(request: Any, response: Any) -> float | None:
    """RECRAWL_IMPORTANCE for the tests: a page's weight is the number after ``/w``
    in its path (``/w10-a`` weighs 10); other pages give none."""
    path = request.url.split("/", 3)[-1]
    if path.startswith("w") and "-" in path:
        return float(path[1 : path.index("-")])
    return None
