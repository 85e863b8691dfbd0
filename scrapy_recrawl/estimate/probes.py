"""Probing new URLs for loop-time baskets: where the state lives, when a probe is due.

**State.** Two tables in the SQLite history store's file (created here, on the
store's own connection; the history store's schema does not change):

* ``basket_probes``, one row per probed URL id: the first fetch's time, how
  many offsets are behind it, the signatures of the first version and of the
  previous probe (dropped when probing ends), the 64 feature values, and the
  basket once classified;
* ``basket_model``, one row: the classifier ``scrapy recrawl-baskets`` saved.

The Redis store has no such tables yet: probing refuses it with an error that
says so (docs/baskets.md).

**Timing.** A URL's first good fetch starts its probes; probe ``j`` is due at
``first_time + RECRAWL_PROBE_OFFSETS[j] * RECRAWL_HOUR_SECONDS`` (wall clock).
:class:`Prober` keeps the due times in a heap; the scheduler asks it for due
probes ahead of the cycle's other budgeted requests, and it wakes the engine
when the next one comes due (instead of waiting for Scrapy's 5 s heartbeat).
A probe fetched late is recorded at the latest offset it reached.

**Change values.** The recording middleware has already folded the response
into the store when Scrapy's ``response_received`` signal fires, so the URL's
record holds the signature of the version just fetched; the prober compares it
with its own two reference signatures using the crawl's change detector.
"""

from __future__ import annotations

import heapq
import logging
import math
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..change import ChangeDetector, Signature, SignatureVersionError
from ..history import HistoryStore, SqliteHistoryStore
from ..settings import RecrawlSettingError
from .baskets import BasketModel, BasketSettings, due_index, empty_features, set_probe

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS basket_probes (
    url_id INTEGER PRIMARY KEY,
    first_time REAL NOT NULL,
    taken INTEGER NOT NULL DEFAULT 0,
    first_sig BLOB,
    prev_sig BLOB,
    features BLOB NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    basket INTEGER
);
CREATE TABLE IF NOT EXISTS basket_model (
    id INTEGER PRIMARY KEY CHECK (id = 1), model BLOB NOT NULL, saved REAL NOT NULL
);
"""

_STUCK_SECONDS = 600.0  # a dispatched probe with no response by then may go out again


def _refuse_store(store: Any) -> RecrawlSettingError:
    return RecrawlSettingError(
        f"loop-time baskets (RECRAWL_PROBE, the `due` terminal, the `basket` scorer) keep "
        f"their probe state and model in the SQLite history store; {store.location} "
        "(RECRAWL_STORE) is not one: the Redis store does not support them yet "
        "(docs/baskets.md)"
    )


@dataclass
class ProbeState:
    url_id: int
    first_time: float
    taken: int  # offsets behind this URL (the next probe is at index >= taken)
    first_sig: bytes | None
    prev_sig: bytes | None
    features: np.ndarray
    done: bool = False


class ProbeStore:
    """The ``basket_probes`` and ``basket_model`` tables beside a SQLite history store."""

    def __init__(self, history: HistoryStore) -> None:
        if not isinstance(history, SqliteHistoryStore):
            raise _refuse_store(history)
        self.history = history
        self.db.executescript("BEGIN;" + _SCHEMA + "COMMIT;")

    @property
    def db(self) -> sqlite3.Connection:
        return self.history.db

    def active(self) -> list[ProbeState]:
        rows = self.db.execute(
            "SELECT url_id, first_time, taken, first_sig, prev_sig, features FROM basket_probes"
            " WHERE done = 0"
        ).fetchall()
        return [
            ProbeState(i, t, k, fs, ps, np.frombuffer(f, dtype=np.float64).copy())
            for i, t, k, fs, ps, f in rows
        ]

    def save(self, st: ProbeState) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO basket_probes"
            " (url_id, first_time, taken, first_sig, prev_sig, features, done, basket)"
            " VALUES (?, ?, ?, ?, ?, ?, ?,"
            " (SELECT basket FROM basket_probes WHERE url_id = ?))",
            (
                st.url_id,
                st.first_time,
                st.taken,
                None if st.done else st.first_sig,
                None if st.done else st.prev_sig,
                st.features.astype(np.float64).tobytes(),
                int(st.done),
                st.url_id,
            ),
        )

    def knows(self, url_id: int) -> bool:
        q = "SELECT 1 FROM basket_probes WHERE url_id = ?"
        return self.db.execute(q, (url_id,)).fetchone() is not None

    def features(self, *, done_only: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(url_ids, features[url, 64])`` of the probed URLs (finished ones by default)."""
        sql = "SELECT url_id, features FROM basket_probes" + (
            " WHERE done = 1" if done_only else ""
        )
        rows = self.db.execute(sql + " ORDER BY url_id").fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0))
        ids = np.asarray([r[0] for r in rows], dtype=np.int64)
        return ids, np.vstack([np.frombuffer(r[1], dtype=np.float64) for r in rows])

    def unclassified(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self.db.execute(
            "SELECT url_id, features FROM basket_probes WHERE done = 1 AND basket IS NULL"
        ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0))
        ids = np.asarray([r[0] for r in rows], dtype=np.int64)
        return ids, np.vstack([np.frombuffer(r[1], dtype=np.float64) for r in rows])

    def set_baskets(self, ids: np.ndarray, baskets: np.ndarray) -> None:
        self.db.execute("BEGIN")
        self.db.executemany(
            "UPDATE basket_probes SET basket = ? WHERE url_id = ?",
            [(int(b), int(i)) for i, b in zip(ids, baskets, strict=True)],
        )
        self.db.execute("COMMIT")

    def baskets(self) -> tuple[np.ndarray, np.ndarray]:
        """``(url_ids, basket index)`` of every classified URL."""
        rows = self.db.execute(
            "SELECT url_id, basket FROM basket_probes WHERE basket IS NOT NULL"
        ).fetchall()
        a = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        return a[:, 0], a[:, 1]

    def save_model(self, model: BasketModel) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO basket_model VALUES (1, ?, ?)", (model.to_bytes(), time.time())
        )

    def load_model(self) -> BasketModel | None:
        row = self.db.execute("SELECT model FROM basket_model WHERE id = 1").fetchone()
        return None if row is None else BasketModel.from_bytes(row[0])


def basket_seconds(
    ids: np.ndarray,
    classified_ids: np.ndarray,
    classified: np.ndarray,
    cfg: BasketSettings,
) -> np.ndarray:
    """Per-URL basket interval in wall seconds, aligned with ``ids`` (the ``due`` column).

    URLs not classified (still probing, known before probing was on, no model
    yet) get ``RECRAWL_BASKET_DEFAULT``.
    """
    hours = np.full(len(ids), cfg.default_basket, dtype=np.float64)
    if len(classified_ids) and len(ids):
        order = np.argsort(classified_ids)
        sorted_ids = classified_ids[order]
        pos = np.searchsorted(sorted_ids, ids).clip(0, len(sorted_ids) - 1)
        hit = sorted_ids[pos] == ids
        table = np.asarray(cfg.baskets, dtype=np.float64)
        hours[hit] = table[classified[order][pos[hit]]]
    return hours * cfg.hour_seconds


class Prober:
    """Probe schedule and change values for one crawl (used by the recrawl scheduler)."""

    def __init__(
        self,
        history: HistoryStore,
        cfg: BasketSettings,
        detector: ChangeDetector,
        *,
        clock: Any = time.time,
    ) -> None:
        self.cfg = cfg
        self.history = history
        self.store = ProbeStore(history)
        self.detector = detector
        self.clock = clock
        self._states: dict[int, ProbeState] = {st.url_id: st for st in self.store.active()}
        self._heap: list[tuple[float, int]] = []
        # the one valid heap entry per URL (older entries are skipped when popped)
        self._scheduled: dict[int, float] = {}
        for st in self._states.values():
            self._push(st)
        self._in_flight: dict[bytes, tuple[int, float]] = {}  # fingerprint -> (url id, sent)
        self.model: BasketModel | None = self._load_model()
        self.stats = {"started": 0, "fetched": 0, "completed": 0, "classified": 0}

    def _load_model(self) -> BasketModel | None:
        model = (
            BasketModel.load(self.cfg.model)
            if self.cfg.model is not None
            else self.store.load_model()
        )
        if model is not None:
            model.check_compatible(self.cfg.offsets, self.cfg.baskets)
        return model

    # -- schedule ----------------------------------------------------------

    def due_time(self, st: ProbeState) -> float:
        return st.first_time + self.cfg.offsets[st.taken] * self.cfg.hour_seconds

    def _push(self, st: ProbeState) -> None:
        if not st.done and st.taken < len(self.cfg.offsets):
            self._schedule(st.url_id, self.due_time(st))

    def _schedule(self, url_id: int, at: float) -> None:
        self._scheduled[url_id] = at
        heapq.heappush(self._heap, (at, url_id))

    def _drop_stale(self) -> None:
        while self._heap and self._scheduled.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)

    def next_due_time(self) -> float | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def has_due(self, now: float | None = None) -> bool:
        self._drop_stale()
        return bool(self._heap) and self._heap[0][0] <= (self.clock() if now is None else now)

    def pop_due(self, now: float | None = None) -> int | None:
        """The URL id of a probe due now (None: nothing is due)."""
        now = self.clock() if now is None else now
        while self._heap and self._heap[0][0] <= now:
            at, url_id = heapq.heappop(self._heap)
            if self._scheduled.get(url_id) != at:
                continue  # superseded by a later schedule of the same URL
            del self._scheduled[url_id]
            st = self._states.get(url_id)
            if st is None or st.done:
                continue
            if self.due_time(st) > now:  # that probe was taken meanwhile
                self._push(st)
                continue
            return url_id
        return None

    def dispatched(self, fingerprint: bytes, url_id: int) -> None:
        now = self.clock()
        self._in_flight[fingerprint] = (url_id, now)
        st = self._states[url_id]
        # Due again at the next offset if this probe brings nothing back (error, drop);
        # after the last one, once a dispatched probe counts as lost.
        nxt = due_index((now - st.first_time) / self.cfg.hour_seconds, self.cfg.offsets, st.taken)
        follow = (nxt if nxt is not None else st.taken) + 1
        if follow < len(self.cfg.offsets):
            at = st.first_time + self.cfg.offsets[follow] * self.cfg.hour_seconds
        else:
            at = now + _STUCK_SECONDS
        self._schedule(url_id, at)

    # -- responses ---------------------------------------------------------

    def on_response(self, fingerprint: bytes, status: int) -> None:
        """A response was received (after the recording middleware stored its visit)."""
        sent = self._in_flight.pop(fingerprint, None)
        good = 200 <= status < 300 or status == 304
        if not good:
            return
        rec = self.history.get(fingerprint)
        if rec is None or rec.signature is None:
            return
        now = self.clock()
        if sent is not None:
            st = self._states.get(sent[0])
            if st is not None and not st.done:
                self._record_probe(st, rec.signature, now)
            return
        if rec.visits == 1 and rec.id not in self._states and not self.store.knows(rec.id):
            # a new URL's first good fetch: its probes start now
            st = ProbeState(
                rec.id,
                now,
                0,
                rec.signature,
                rec.signature,
                empty_features(len(self.cfg.offsets)),
            )
            self._states[rec.id] = st
            self.store.save(st)
            self._push(st)
            self.stats["started"] += 1

    def _record_probe(self, st: ProbeState, signature: bytes, now: float) -> None:
        idx = due_index((now - st.first_time) / self.cfg.hour_seconds, self.cfg.offsets, st.taken)
        if idx is None:
            return  # fetched before its offset (cannot happen through pop_due)
        cur = Signature.from_bytes(signature)
        vs_first = self.detector.compare(_sig(st.first_sig), cur)
        vs_prev = self.detector.compare(_sig(st.prev_sig), cur)
        set_probe(
            st.features,
            idx,
            (vs_first.added, vs_first.removed, vs_first.modified, vs_first.attributes),
            (vs_prev.added, vs_prev.removed, vs_prev.modified, vs_prev.attributes),
        )
        st.prev_sig = signature
        st.taken = idx + 1
        self.stats["fetched"] += 1
        if st.taken >= len(self.cfg.offsets):
            st.done = True
            del self._states[st.url_id]
            self._scheduled.pop(st.url_id, None)
            self.stats["completed"] += 1
        else:
            self._push(st)
        self.store.save(st)
        if st.done and self.model is not None:
            basket = self.model.predict(st.features[None, :])
            self.store.set_baskets(np.asarray([st.url_id]), basket)
            self.stats["classified"] += 1

    def is_probe(self, fingerprint: bytes) -> bool:
        return fingerprint in self._in_flight

    def forget_stuck(self) -> None:
        now = self.clock()
        for fp, (_, sent) in list(self._in_flight.items()):
            if now - sent > _STUCK_SECONDS:
                del self._in_flight[fp]

    # -- baskets -----------------------------------------------------------

    def classify_pending(self) -> int:
        """Classify finished URLs that have no basket yet (the model may be new)."""
        if self.model is None:
            return 0
        ids, feats = self.store.unclassified()
        if len(ids):
            self.store.set_baskets(ids, self.model.predict(feats))
            self.stats["classified"] += len(ids)
        return len(ids)

    def basket_column(self, ids: np.ndarray) -> np.ndarray:
        cids, baskets = self.store.baskets()
        return basket_seconds(ids, cids, baskets, self.cfg)


def _sig(data: bytes | None) -> Signature | None:
    if data is None:
        return None
    try:
        return Signature.from_bytes(data)
    except SignatureVersionError:  # kept by an older scrapy-recrawl: no baseline to compare
        return None


def probe_cap(share: float, total: int | None) -> int | None:
    """Probes a cycle may take from its budget (None: unlimited, as the budget)."""
    return None if total is None else max(1, math.ceil(share * total))
