"""The history store interface: what every backend keeps per URL and per visit.

A backend keeps, per URL (keyed by Scrapy's request fingerprint), the O(1)
estimator state of :mod:`scrapy_recrawl.history.state`, the last change
signature, the HTTP validators, the serialized request and (optionally) the
last body; and a visit log with one row per response received. The scheduler
reads the per-URL numbers back as numpy columns (:meth:`HistoryStore.arrays`)
so scoring a million URLs is a few vector operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: Schema version written by this release; backends migrate older ones up.
SCHEMA_VERSION = 1


class HistoryStoreError(RuntimeError):
    """The store cannot be opened, read or written; the message names it."""


@dataclass(frozen=True)
class Visit:
    """One response (or download error) for one URL, as the middleware saw it.

    ``changed`` is the change observation: ``True``/``False`` when the visit
    is a comparison against a previous good copy, ``None`` when it is not an
    observation at all (first fetch, 5xx, network error, redirect, gone).
    """

    fingerprint: bytes
    url: str
    time: float
    status: int  # HTTP status; 0 for a download error (no response)
    changed: bool | None = None
    signature: bytes | None = None  # serialized change.Signature of this body
    distance: int = 0
    added: int = 0
    removed: int = 0
    modified: int = 0
    attributes: int = 0
    size: int = 0  # body bytes received
    etag: str | None = None
    last_modified: str | None = None
    gone: bool = False
    request: dict[str, Any] | None = None  # Request.to_dict(), to re-issue it later
    body: bytes | None = None  # to keep for answering 304s (None: keep what is stored)
    headers: dict[str, list[str]] | None = None
    cycle: int | None = None  # the cycle that scheduled it (None: the store's current one)


@dataclass
class UrlRecord:
    """The per-URL state a backend keeps (one row / hash per URL)."""

    id: int
    url: str
    fingerprint: bytes
    first_seen: float
    first_cycle: int
    visits: int = 0
    n: int = 0  # change observations (good visits after the first)
    X: int = 0  # changes seen among them
    sad: float = 0.0
    aad_sum: float = 0.0
    gad: float = 0.0
    last_visit_cycle: int = -1  # -1: never fetched successfully
    last_visit_time: float = float("nan")
    last_change_cycle: int = -1
    last_change_time: float = float("nan")
    D: float = float("nan")  # last observation's simhash distance
    A: float = float("nan")  # ... elements added
    R: float = float("nan")  # ... elements removed
    M: float = float("nan")  # ... elements modified
    status: int = 0
    gone: bool = False
    etag: str | None = None
    last_modified: str | None = None
    has_body: bool = False
    signature: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class StoredBody:
    """The last good body of a URL, to hand the spider on a 304."""

    status: int
    headers: dict[str, list[str]]
    body: bytes


@dataclass
class HistoryArrays:
    """Per-URL numbers as numpy columns, row ``i`` = URL ``ids[i]``.

    ``columns`` holds ``n``, ``X``, ``sad``, ``aad_sum``, ``gad``,
    ``last_visit_cycle``, ``last_visit_time``, ``D``, ``A``, ``R``, ``M``,
    ``gone`` — the input of :func:`scrapy_recrawl.scoring.terminals.compute_terminals`.
    """

    ids: np.ndarray
    columns: dict[str, np.ndarray]
    cycle: int

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@runtime_checkable
class HistoryStore(Protocol):
    """What the middleware, the scheduler and `recrawl-evolve` need of a store."""

    #: Where the store lives, for messages ("sqlite:///path", "redis://…").
    location: str

    def open(self) -> None: ...

    def close(self) -> None: ...

    @property
    def cycle(self) -> int:
        """The current crawl cycle (0 in a new store)."""
        ...

    def advance_cycle(self) -> int:
        """Start the next cycle and return its number."""
        ...

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        """The URL's record; ``signature=False`` skips loading the (large) signature."""
        ...

    def knows(self, fingerprint: bytes) -> bool:
        """Whether the URL has a record (cheaper than :meth:`get`)."""
        ...

    def record(self, visit: Visit) -> UrlRecord:
        """Fold one visit into the URL's state and append it to the visit log."""
        ...

    def body(self, fingerprint: bytes) -> StoredBody | None: ...

    def requests(self, ids: np.ndarray) -> list[dict[str, Any] | None]:
        """The stored request dicts of these URL ids, in the same order."""
        ...

    def arrays(self) -> HistoryArrays: ...

    def urls(self, ids: np.ndarray) -> list[str]:
        """The URLs of these ids, in the same order."""
        ...

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        """Keep discovered, not yet fetched requests ``(fingerprint, request dict,
        priority)`` for a later cycle; returns how many were new to the frontier."""
        ...

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        """Take up to ``limit`` frontier requests, highest priority first, oldest first."""
        ...

    def frontier_size(self) -> int: ...

    def flush(self) -> None: ...

    def __len__(self) -> int: ...
