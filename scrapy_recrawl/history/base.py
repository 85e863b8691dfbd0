"""The history store interface: what every backend keeps per URL and per visit.

A backend keeps, per URL (keyed by Scrapy's request fingerprint), the O(1)
estimator state of :mod:`scrapy_recrawl.history.state`, the last change
signature, the HTTP validators, the serialized request and (optionally) the
last body; and a visit log with one row per response received. The scheduler
reads the per-URL numbers back as numpy columns (:meth:`HistoryStore.arrays`)
so scoring a million URLs is a few vector operations.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

isal_zlib: Any
try:  # a dependency where it has wheels (setup.cfg): zlib otherwise
    from isal import isal_zlib
except ImportError:  # pragma: no cover -- the platforms without its wheels
    isal_zlib = None

#: Schema version written by this release; backends migrate older ones up.
#: 3: the store remembers the spider it belongs to (:meth:`HistoryStore.owner`).
#: 4: nothing stored is a pickle: requests are data (history/request_codec.py), the
#: pickled basket model is dropped; and each URL's consecutive failed cycles
#: (``failures``, ``last_failure_cycle``).
#: 5: the Redis store's compact, sharded encoding (history/redis_schema.py); SQLite
#: unchanged.
#: 6: no credential kept at rest: stored requests (each URL's, the frontier's, the Redis
#: request shapes) scrubbed of credentials, cookies and what Scrapy's downloader
#: middlewares added (history/request_scrub.py); SQLite files owner-only.
#: 7: each SQLite URL row keeps its change window (``cwin``, as the Redis row does), so
#: :meth:`HistoryStore.change_window` reads no log; the SQLite visit log is indexed by
#: cycle and capped (RECRAWL_SQLITE_LOG_MAXLEN); Redis unchanged.
#: 8: each cycle's record keeps the crawl's own freshness estimate of its end (side
#: table ``cycle_freshness``: history/cycle_log.py), which recrawl-report reads
#: instead of refitting it; nothing moved (cycles crawled before have none), both
#: backends.
#: 9: the SQLite store keeps the scorers' columns a second time, packed in blocks of
#: fixed-width records (table ``packed``: history/sqlite_packed.py), read by
#: ``arrays()`` without an object per value; built from ``urls`` by the step from 8.
#: Redis unchanged (its step only records the version).
SCHEMA_VERSION = 9

#: The schema of the first release (v0.1.0): the oldest a store may be written in. The
#: versions before it were never released (1-7 were all made before the first tag), so
#: no step leads up from them: such a store is refused (:func:`pre_release_store`).
BASELINE_SCHEMA_VERSION = 8


class HistoryStoreError(RuntimeError):
    """The store cannot be opened, read or written; the message names it."""


class PreReleaseStore(HistoryStoreError):
    """A store written by a build before the first release: never read nor upgraded
    (``scrapy recrawl-reset`` empties it without reading it)."""

    def __init__(self, message: str, location: str, version: int) -> None:
        super().__init__(message)
        self.location, self.version = location, version


def pre_release_store(location: str, version: int) -> HistoryStoreError:
    """The one-line refusal of a store written by a build before the first release."""
    return PreReleaseStore(
        f"{location} was written by a pre-release build of scrapy-recrawl (schema version "
        f"{version}; this release reads {BASELINE_SCHEMA_VERSION} to {SCHEMA_VERSION}) and "
        "cannot be upgraded: empty it with `scrapy recrawl-reset SPIDER` (its history is "
        "lost), or keep using the build that wrote it",
        location,
        version,
    )


class FlushFailed(HistoryStoreError):
    """:meth:`HistoryStore.record` kept the visit in its buffer, but the write it then
    started (its buffer was full, or its flush interval over) failed: the visit is the
    store's now, retried by the next :meth:`~HistoryStore.flush`, and must not be
    recorded again. ``record`` is what ``record()`` would have returned.

    Any other error of ``record()`` means the visit was not taken: the crawl holds the
    response and records it again once the store answers (middleware.py)."""

    def __init__(self, message: str, record: UrlRecord) -> None:
        super().__init__(message)
        self.record = record


#: a buffering store takes at most this many times its flush bound of visits it could
#: not write; past it, ``record()`` refuses the visit (the crawl holds the response,
#: bounded too: middleware.py), so a store whose writes keep failing (a full disk, a
#: Redis refusing writes) does not grow its memory with the crawl
BUFFER_FLUSHES = 2


def refuse_when_full(store: Any, flush_every: int) -> None:
    """Before ``record()`` takes a visit: when ``store.buffered_visits`` reached
    :data:`BUFFER_FLUSHES` times ``flush_every`` (its last flushes failed), flush now;
    if that fails too its error is raised as it is, not :class:`FlushFailed`: the
    visit was not taken (the same rule for every buffering store)."""
    if store.buffered_visits >= BUFFER_FLUSHES * max(1, flush_every):
        store.flush()


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
    # Request.to_dict(), to re-issue it later (None: the store keeps the one it has)
    request: dict[str, Any] | None = None
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
    # consecutive cycles whose downloads of the URL failed (status 0), and the last
    # one (-1: never); history/state.py: fold_failure (schema version 4)
    failures: int = 0
    last_failure_cycle: int = -1
    # the last <= 5 change observations, packed (history/state.py: push_window; schema
    # version 7): what change_window() answers, kept whole however the log is trimmed
    cwin: int = 0
    signature: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class StoredBody:
    """The last good body of a URL, to hand the spider on a 304."""

    status: int
    headers: dict[str, list[str]]
    body: bytes


def compress_body(body: bytes) -> bytes:
    """A body as the stores keep it: a zlib stream, fast level (every first fetch and
    every changed body writes one). ISA-L's deflate (the ``isal`` package) where it is
    installed: three times faster than zlib's level 1 on a page of a few KB, as small.
    Else zlib's level 1 with a window just over the body's length (at least 4 KiB): it
    compresses such a page as well as the default window, and allocates less per call.
    ``zlib.decompress`` reads every one of them (and what older releases wrote)."""
    if isal_zlib is not None:
        return bytes(isal_zlib.compress(body, 1))
    wbits = min(15, max(12, (len(body) + 300).bit_length()))
    # compressobj: zlib.compress takes no wbits before Python 3.11
    packer = zlib.compressobj(1, zlib.DEFLATED, wbits)
    return packer.compress(body) + packer.flush()


def decompress_body(data: bytes) -> bytes:
    """A body as :func:`compress_body` kept it (ISA-L reads zlib streams faster too);
    ``zlib.error`` when ``data`` is not such a stream, whichever library read it."""
    if isal_zlib is not None:
        try:
            return bytes(isal_zlib.decompress(data))
        except isal_zlib.error as exc:
            raise zlib.error(str(exc)) from None
    return zlib.decompress(data)


@dataclass
class HistoryArrays:
    """Per-URL numbers as numpy columns, row ``i`` = URL ``ids[i]``.

    ``columns`` holds ``n``, ``X``, ``sad``, ``aad_sum``, ``gad``,
    ``last_visit_cycle``, ``last_visit_time``, ``D``, ``A``, ``R``, ``M``,
    ``gone``, ``failures``, ``last_failure_cycle``, ``first_cycle`` (the cycle the URL
    was first recorded in) and ``last_change_cycle`` (the cycle of the visit that last
    saw it changed, -1: none yet) — the input of
    :func:`scrapy_recrawl.scoring.registry.compute_terminals` and of the cycle
    core's candidate rule (``core/selection.py``).
    """

    ids: np.ndarray
    columns: dict[str, np.ndarray]
    cycle: int

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@runtime_checkable
class HistoryStore(Protocol):
    """The store contract: everything the middleware, the schedulers, the plug-ins and
    the offline commands read of a backend (nothing else is looked up on a store).

    A third-party backend implements every member below and is named by
    ``RECRAWL_STORE_CLASS`` (docs/architecture.md, "How to add a backend"); the crawl
    and the commands build it with ``cls.from_settings(settings, spider=...,
    read_only=...)``: the spider whose history it is (None: not known, a test) and
    whether it is opened for reading only (the offline commands), as Scrapy hands
    ``open_spider(spider)`` to a cache storage. ``scrapy_recrawl.testing.StoreContract`` is the test
    suite it should pass. Errors of the backend itself (unreachable, read-only,
    corrupt) raise :class:`HistoryStoreError` with a message that names the store
    and the setting (``RECRAWL_STORE``); nothing read back is ever unpickled or
    evaluated.

    What a store offers beyond this is an optional capability, *declared* in
    :attr:`capabilities` (never found by looking for a method): ``"fenced"``
    (:class:`FencedStore`), ``"file"`` (:class:`FileStore`) and ``"read_ahead"``
    (:class:`ReadAheadStore`). Callers reach them through :func:`fenced`,
    :func:`file_store` and :func:`read_ahead`.
    """

    #: Where the store lives, for messages ("sqlite:///path", "redis://…").
    location: str

    @property
    def label(self) -> str:
        """A short name for messages and the report's titles, where the whole
        :attr:`location` does not fit: the SQLite file's name, the Redis key prefix."""
        ...

    @property
    def read_only(self) -> bool:
        """Opened for reading only (the offline commands): :meth:`open` never creates,
        migrates or claims it, and every write (:meth:`record`, :meth:`flush` of a
        visit, :meth:`advance_cycle`, the frontier's and side storage's writes,
        :meth:`claim`, :meth:`clear`) raises :class:`HistoryStoreError` naming the
        store; nothing of it is changed."""
        ...

    @property
    def store_bodies(self) -> bool:
        """Whether the last good body of each URL is kept (for 304s: :meth:`body`); the
        middleware hands bodies to :meth:`record` only when it is true."""
        ...

    @property
    def buffered_visits(self) -> int:
        """Visits :meth:`record` took but did not write yet (0 for a store that writes
        each at once): the crawl says them lost if the store's close cannot write
        them, and :func:`refuse_when_full` bounds them while writes fail."""
        ...

    @property
    def unreadable_values(self) -> int:
        """Values read back since it was opened that could not be parsed (skipped, never
        evaluated), for the stat ``recrawl/unreadable_values``; 0 when none can be."""
        ...

    @property
    def capabilities(self) -> frozenset[str]:
        """The optional capabilities this store declares, among :data:`CAPABILITIES`;
        each declared one's members must be there (:func:`capability_gaps`)."""
        ...

    def open(self) -> None:
        """Connect, create or migrate the schema to :data:`SCHEMA_VERSION`; idempotent.

        A store of a newer schema is refused; an older one is migrated in the one
        schema-version sequence, all of a step or none of it; one older than
        :data:`BASELINE_SCHEMA_VERSION` (a pre-release build's) is refused with
        :func:`pre_release_store`. Opened :attr:`read_only`, nothing is created or
        migrated on disk: a missing store is refused.
        """
        ...

    def close(self) -> None:
        """Flush what is buffered and release the connection; idempotent."""
        ...

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
        """Fold one visit into the URL's state (the one update rule of
        :mod:`~scrapy_recrawl.history.state`: the estimators, and the failure count
        of ``fold_failure``) and append it to the visit log, atomically per URL;
        returns the updated record. A new URL gets the next id.

        A buffering store that took the visit and then failed to write its buffer
        raises :class:`FlushFailed` (keeping the buffer); any other
        :class:`HistoryStoreError` means the visit was not taken."""
        ...

    def body(self, fingerprint: bytes) -> StoredBody | None:
        """The last good body kept for the URL (None: none kept)."""
        ...

    def requests(self, ids: np.ndarray) -> list[dict[str, Any] | None]:
        """The stored request dicts of these URL ids, in the same order."""
        ...

    def arrays(self) -> HistoryArrays:
        """Every URL's numbers as numpy columns (:class:`HistoryArrays`), ids ascending."""
        ...

    def urls(self, ids: np.ndarray) -> list[str]:
        """The URLs of these ids, in the same order; an id the store never gave raises
        :class:`KeyError`."""
        ...

    def visit_log(
        self, url_ids: Iterable[int] | None = None, *, since_cycle: int | None = None
    ) -> dict[str, np.ndarray]:
        """The visit log, oldest first, as numpy columns ``url_id``, ``cycle``, ``time``,
        ``status``, ``changed`` (1/0, -1: not an observation), ``distance``, ``added``,
        ``removed``, ``modified``, ``attributes``, ``bytes``; only ``url_ids`` and
        only the cycles from ``since_cycle`` on when given."""
        ...

    def change_window(self, ids: np.ndarray, window: int) -> np.ndarray:
        """``[len(ids), window]``: each URL's last ``window`` change observations
        (1/0), newest first, NaN where there are fewer."""
        ...

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        """Keep discovered, not yet fetched requests ``(fingerprint, request dict,
        priority)`` for a later cycle; returns how many were new to the frontier."""
        ...

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        """Take up to ``limit`` frontier requests, highest priority first, oldest first."""
        ...

    def frontier_size(self) -> int:
        """How many requests wait in the frontier."""
        ...

    # -- side storage: what plug-ins keep beside the history --------------------
    #
    # ``table`` is a plug-in's namespace (``[a-z][a-z0-9_]{0,39}``, ValueError
    # otherwise); keys are ints (URL ids, or 1 for a singleton); values are bytes
    # (:mod:`scrapy_recrawl.history.records` has the encodings the built-in
    # plug-ins use). Writes are not buffered: they are visible at once.

    def side_get(self, table: str, keys: Sequence[int]) -> list[bytes | None]:
        """The values of ``keys`` in ``table``, in order (None: absent)."""
        ...

    def side_put(self, table: str, items: Sequence[tuple[int, bytes]]) -> None:
        """Set ``key -> value`` for each item, replacing what was there."""
        ...

    def side_delete(self, table: str, keys: Sequence[int]) -> None:
        """Remove these keys from ``table`` (absent ones are ignored)."""
        ...

    def side_items(self, table: str) -> Iterator[tuple[int, bytes]]:
        """Every ``(key, value)`` of ``table``, keys ascending."""
        ...

    def side_push(self, table: str, key: int, item: bytes, keep: int) -> list[bytes]:
        """Prepend ``item`` to the list kept at ``key`` and keep its newest ``keep``
        items, atomically (another process may push to the same key); returns the
        list as it was before, newest first."""
        ...

    def flush(self) -> None:
        """Write what is buffered (visits); a failure keeps the buffer for a retry."""
        ...

    def clear(self) -> None:
        """Remove everything this store keeps -- URLs, visit log, frontier, side storage,
        its owner (:meth:`owner` is None after it), what is buffered -- and start again
        at cycle 0, open and usable (``scrapy recrawl-reset``). Nothing outside this
        store is touched."""
        ...

    # -- whose history: one store per spider (docs/project.md) ------------------

    def owner(self) -> str | None:
        """The name of the spider this history belongs to; None: nobody's yet (a new
        store, or one emptied by :meth:`clear`)."""
        ...

    def claim(self, spider: str) -> str:
        """Make ``spider`` the owner if the store has none, atomically (several processes
        of one spider may open it at once); returns the owner, whoever it is."""
        ...

    def __len__(self) -> int:
        """How many URLs the store knows."""
        ...


class FencedStore(HistoryStore, Protocol):
    """Capability ``"fenced"``: a store shared by several processes (a service such as
    Redis), which can be emptied or replaced under a running crawl.

    It carries an identity (:attr:`epoch`) taken when it was opened; the crawl checks it
    every 2 s and at each cycle (history/epoch.py): when the store is no longer the one
    opened, :meth:`check_epoch` calls :attr:`on_lost` with a ``StoreLost`` and raises it,
    and no write goes into the new store. The crawl holds the store's lease from open
    (:meth:`hold`, refreshed by each check, left by ``close()``); ``scrapy
    recrawl-reset`` refuses while :meth:`holders` names a live one."""

    #: set by the crawl (history/epoch.py): what :meth:`check_epoch` calls with the
    #: ``StoreLost`` it then raises, when the store is found lost
    on_lost: Callable[[Any], None] | None

    @property
    def epoch(self) -> str | None:
        """The identity of the store this process opened (None: not open)."""
        ...

    def check_epoch(self) -> None:
        """Raise ``StoreLost`` (after calling :attr:`on_lost`) when the store is no
        longer the one opened; refresh the lease taken by :meth:`hold`."""
        ...

    def hold(self, seconds: float) -> Any:
        """Hold the store's crawl lease for ``seconds`` after each check; returns the
        holder's id."""
        ...

    def holders(self, timeout: float) -> Mapping[str, Any]:
        """The crawls holding the store now (seen within ``timeout`` seconds), by holder
        id (``host:pid:token``), with their status."""
        ...


class FileStore(HistoryStore, Protocol):
    """Capability ``"file"``: a store in one local file (SQLite), which one process
    writes at a time under its lock (a second is refused at open)."""

    @property
    def path(self) -> str:
        """The store's file (``scrapy recrawl-reset`` never creates one to empty it)."""
        ...

    @property
    def file_schema_version(self) -> int | None:
        """The schema version of the file as found when opened read-only (None: opened
        for writing, or not yet opened); a newer one is refused, an older one of the
        released sequence is upgraded in memory for reading, never on disk."""
        ...


class ReadAheadStore(HistoryStore, Protocol):
    """Capability ``"read_ahead"``: a store that reads the records of many URLs at once
    faster than one at a time (SQLite: one query per block of ids instead of one per
    URL, each with its own read transaction)."""

    def read_ahead(self, ids: np.ndarray) -> None:
        """A hint: the visits of the URLs ``ids`` come soon (a cycle's next recrawls).
        Their records (with signature and kept body) may be read now, in one go, for
        the :meth:`get` and :meth:`body` of those visits; what any read returns is the
        same as without it."""
        ...


#: The capabilities a store may declare (:attr:`HistoryStore.capabilities`), each with
#: the protocol whose members it promises.
CAPABILITIES: dict[str, type] = {
    "fenced": FencedStore,
    "file": FileStore,
    "read_ahead": ReadAheadStore,
}


def _own_members(proto: type) -> list[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names.update(n for n in vars(proto) if not n.startswith("_"))
    return sorted(names)


def capability_gaps(store: Any) -> list[str]:
    """What is wrong with ``store``'s declared capabilities, one phrase each (an empty
    list: nothing): a name that is not one of :data:`CAPABILITIES`, or a declared one
    whose members are missing."""
    declared = store.capabilities
    if not isinstance(declared, frozenset):
        return [f"capabilities is {type(declared).__name__}, not a frozenset"]
    gaps = [
        f"capability {name!r} is unknown (known: {', '.join(sorted(CAPABILITIES))})"
        for name in sorted(declared - CAPABILITIES.keys())
    ]
    for name in sorted(declared & CAPABILITIES.keys()):
        missing = [m for m in _own_members(CAPABILITIES[name]) if not hasattr(store, m)]
        if missing:
            gaps.append(f"capability {name!r} lacks {', '.join(missing)}")
    return gaps


def fenced(store: HistoryStore) -> FencedStore | None:
    """The store as a :class:`FencedStore` when it declares ``"fenced"``; else None."""
    return cast(FencedStore, store) if "fenced" in store.capabilities else None


def file_store(store: HistoryStore) -> FileStore | None:
    """The store as a :class:`FileStore` when it declares ``"file"``; else None."""
    return cast(FileStore, store) if "file" in store.capabilities else None


def read_ahead(store: HistoryStore) -> ReadAheadStore | None:
    """The store as a :class:`ReadAheadStore` when it declares ``"read_ahead"``; else
    None."""
    return cast(ReadAheadStore, store) if "read_ahead" in store.capabilities else None
