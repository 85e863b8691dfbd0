"""The ``streak`` terminal: how many visits in a row saw the page changed.

A page that changed at every one of its last visits is probably visited less often
than it changes; ``RECRAWL_SCORER = "streak + NAD"`` puts those first. The count
is kept per URL in the store's side storage (every backend has it), updated by the
visit hook from each visit's change signal and read back as a column before each
cycle is scored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scrapy_recrawl.api import HistoryArrays, HistoryStore, Plugin, Terminal, UrlRecord, Visit

#: the side-storage table of the counts (lower case, digits, underscores)
TABLE = "change_streak"
#: the column the plug-in adds, and the terminal's name
COLUMN = "change_streak"


def _streak(state: Mapping[str, np.ndarray], *_: object) -> np.ndarray:
    # NaN (ranks last) where the column is missing: the plug-in is off in this crawl
    if COLUMN not in state:
        return np.full(np.shape(state["n"]), np.nan)
    return np.asarray(state[COLUMN], dtype=np.float64)


def _encode(count: int) -> bytes:
    return count.to_bytes(4, "big")  # plain bytes: nothing stored is ever unpickled


def _decode(raw: bytes | None) -> int:
    return 0 if raw is None else int.from_bytes(raw, "big")


class ChangeStreak(Plugin):
    """Adds the terminal ``streak``; on when the scorer uses it (Plugin.enabled)."""

    api_version = "1"
    capabilities = frozenset({"columns", "visit_hook"})
    terminals = (
        Terminal(
            "streak",
            "visits in a row that saw the page changed, up to the last one (an example plug-in's)",
            _streak,
        ),
    )

    @classmethod
    def from_crawler(
        cls, crawler: Any, store: HistoryStore, terminals_needed: frozenset[str]
    ) -> ChangeStreak:
        return cls(store)

    def __init__(self, store: HistoryStore) -> None:
        self.store = store

    # -- visit_hook ----------------------------------------------------------------

    def visited(self, visit: Visit, record: UrlRecord) -> None:
        if visit.changed is None:
            return  # no observation: a first fetch, a failure, a 304 with no copy
        if not visit.changed:
            self.store.side_delete(TABLE, [record.id])  # a streak of 0: nothing kept
            return
        before = _decode(self.store.side_get(TABLE, [record.id])[0])
        self.store.side_put(TABLE, [(record.id, _encode(before + 1))])

    # -- columns -------------------------------------------------------------------

    def columns(self, arrays: HistoryArrays, now: float) -> dict[str, np.ndarray]:
        raw = self.store.side_get(TABLE, [int(i) for i in arrays.ids])
        return {COLUMN: np.array([_decode(r) for r in raw], dtype=np.float64)}
