"""The visit log, read once, with the masks every report needs."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from scrapy_recrawl.history.state import gone_status, good_status


@dataclass
class VisitLog:
    """The store's visit log as columns (``HistoryStore.visit_log``), oldest first."""

    columns: dict[str, np.ndarray]

    @classmethod
    def read(cls, store: object) -> VisitLog:
        return cls(store.visit_log())  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return int(self.columns["url_id"].shape[0])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def good(self) -> np.ndarray:
        """A good fetch: 2xx or 304 (what a copy and an observation come from)."""
        return np.asarray(good_status(self["status"]))

    @property
    def observed(self) -> np.ndarray:
        """A change observation (``changed`` is 0 or 1)."""
        return self["changed"] >= 0

    @property
    def failed(self) -> np.ndarray:
        """No response at all (a download error)."""
        return self["status"] == 0

    @property
    def gone(self) -> np.ndarray:
        return np.asarray(gone_status(self["status"]))

    @property
    def errors(self) -> np.ndarray:
        """A response that is an error, not one saying the page is gone."""
        return (self["status"] >= 400) & ~self.gone

    @cached_property
    def by_url(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, row, first)``: the log's URL ids ascending, each visit's position among
        them, each id's first row. One sort of the log, shared by every section that
        groups by URL (the per-cycle estimates, the URL and host tables, the new URLs),
        which each sorted it again (at 7M visits, about a second a sort)."""
        ids, first, row = np.unique(self["url_id"], return_index=True, return_inverse=True)
        return ids, row.ravel(), first

    @property
    def first_of_url(self) -> np.ndarray:
        """Each URL's first row in the log (a new URL, when the log is not cut)."""
        first = np.zeros(len(self), dtype=bool)
        if len(self):
            first[self.by_url[2]] = True
        return first

    def cycles(self) -> np.ndarray:
        return np.unique(self["cycle"])
