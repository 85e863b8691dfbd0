"""The change matrix, exported in the format ``scrapy recrawl-evolve --history`` reads
(``learn/histories.py``): a ``.npz`` with ``changes`` (uint8, pages x cycles) and
``pages`` (the URLs), or a CSV ``url,cycle,changed``.

By default the monitoring sample (:func:`scrapy_recrawl.learn.histories.from_store`,
exactly what ``recrawl-evolve`` reads from the store): the only complete histories
unbiased by the scorer. ``whole=True`` exports every URL's observations instead:
biased (the scorer chose which pages to fetch when), and incomplete -- in the
``.npz`` an unobserved cycle is a 0 and the array ``observed`` says which cells
were; in the CSV only fetched cycles have a row, and evolve's reader keeps only the
URLs with a row in every cycle.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np

from scrapy_recrawl.history.base import HistoryStore
from scrapy_recrawl.learn.histories import History, from_store

from .log import VisitLog

BIAS_WARNING = (
    "the whole history carries the scorer's bias: the pages it liked were fetched often, "
    "the others rarely, so a scorer learned from it learns that bias (only the "
    "RECRAWL_MONITOR_SHARE sample is unbiased)"
)


@dataclass
class Matrix:
    changes: np.ndarray  # uint8 [pages, cycles]
    urls: list[str]
    cycles: np.ndarray  # the cycle number of each column
    observed: np.ndarray | None  # bool [pages, cycles]; None: every cell observed
    note: str
    #: how the sample was found, when the user should know (History.info)
    info: str = ""


def monitoring_sample(store: HistoryStore, monitor_share: float, seed: int) -> Matrix:
    """What recrawl-evolve reads from the store (the sample its crawls recorded;
    ``monitor_share`` and ``seed`` for a store that records none); HistoryError when
    there is none."""
    h: History = from_store(store, monitor_share=monitor_share, seed=seed)
    cycles = np.arange(1, h.cycles + 1)
    return Matrix(h.changes, list(h.names or []), cycles, None, h.note, h.info)


def whole_history(store: object, log: VisitLog) -> Matrix:
    """Every URL with a good fetch: its observations per cycle (see the module doc)."""
    good = log.good
    url, cyc, obs = log["url_id"][good], log["cycle"][good], log["changed"][good]
    ids, row = np.unique(url, return_inverse=True)
    cycles, col = np.unique(cyc, return_inverse=True)
    changes = np.zeros((ids.size, cycles.size), dtype=np.uint8)
    observed = np.zeros((ids.size, cycles.size), dtype=bool)
    observed[row, col] = True
    np.maximum.at(changes, (row, col), (obs == 1).astype(np.uint8))
    urls = store.urls(ids) if ids.size else []  # type: ignore[attr-defined]
    note = f"whole history: {ids.size} URLs x {cycles.size} cycles, {int(observed.mean() * 100) if observed.size else 0}% of the cells fetched"  # noqa: E501
    return Matrix(changes, urls, cycles, observed, note)


def write(matrix: Matrix, path: str) -> None:
    """``.npz`` or ``.csv`` by the name's ending (checked by the caller)."""
    if path.lower().endswith(".npz"):
        arrays = {"changes": matrix.changes, "pages": np.array(matrix.urls, dtype=str)}
        arrays["cycles"] = matrix.cycles
        if matrix.observed is not None:
            arrays["observed"] = matrix.observed
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
        return
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["url", "cycle", "changed"])
        for r, url in enumerate(matrix.urls):
            for c, cycle in enumerate(matrix.cycles.tolist()):
                if matrix.observed is None or matrix.observed[r, c]:
                    out.writerow([url, cycle, int(matrix.changes[r, c])])
