"""Probing new URLs for loop-time baskets: where the state lives, when a probe is due.

**State.** Two side-storage tables of the history store (the store contract of
:mod:`scrapy_recrawl.history.base`, so every backend keeps them), each value a
record of plain fields (:func:`scrapy_recrawl.history.records.pack_record`):

* ``basket_probes``, one record per probed URL id: the first fetch's time, how
  many offsets are behind it, the signatures of the first version and of the
  previous probe (dropped when probing ends), the 64 feature values, and the
  basket once classified;
* ``basket_model``, one record (key 1): the classifier ``scrapy recrawl-baskets``
  saved, and when.

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
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..change import ChangeDetector, Signature, SignatureVersionError
from ..history import HistoryStore
from ..history.records import pack_record, unpack_record
from ..history.state import good_status
from .baskets import BasketModel, BasketSettings, due_index, empty_features, set_probe

logger = logging.getLogger(__name__)

_PROBES, _MODEL = "basket_probes", "basket_model"

_STUCK_SECONDS = 600.0  # a dispatched probe with no response by then may go out again


@dataclass
class ProbeState:
    url_id: int
    first_time: float
    taken: int  # offsets behind this URL (the next probe is at index >= taken)
    first_sig: bytes | None
    prev_sig: bytes | None
    features: np.ndarray
    done: bool = False


def _to_record(st: ProbeState, basket: int | None) -> bytes:
    return pack_record(
        {
            "first_time": float(st.first_time),
            "taken": int(st.taken),
            "first_sig": None if st.done else st.first_sig,
            "prev_sig": None if st.done else st.prev_sig,
            "features": st.features.astype(np.float64).tobytes(),
            "done": int(st.done),
            "basket": basket,
        }
    )


def _from_record(url_id: int, data: bytes) -> tuple[ProbeState, int | None]:
    r = unpack_record(data)
    features = r["features"]
    assert isinstance(features, bytes)
    st = ProbeState(
        url_id,
        float(r["first_time"] or 0.0),  # type: ignore[arg-type]
        int(r["taken"] or 0),  # type: ignore[arg-type]
        r["first_sig"],  # type: ignore[arg-type]
        r["prev_sig"],  # type: ignore[arg-type]
        np.frombuffer(features, dtype=np.float64).copy(),
        bool(r["done"]),
    )
    basket = r.get("basket")
    return st, None if basket is None else int(basket)  # type: ignore[arg-type]


class ProbeStore:
    """The ``basket_probes`` and ``basket_model`` side tables of a history store."""

    def __init__(self, history: HistoryStore) -> None:
        self.history = history

    def _all(self) -> list[tuple[ProbeState, int | None]]:
        return [_from_record(k, v) for k, v in self.history.side_items(_PROBES)]

    def states(self) -> dict[int, ProbeState]:
        """Every probe state by URL id, finished ones included (tests, reports)."""
        return {st.url_id: st for st, _ in self._all()}

    def active(self) -> list[ProbeState]:
        return [st for st, _ in self._all() if not st.done]

    def save(self, st: ProbeState) -> None:
        old = self.history.side_get(_PROBES, [st.url_id])[0]
        basket = None if old is None else _from_record(st.url_id, old)[1]
        self.history.side_put(_PROBES, [(st.url_id, _to_record(st, basket))])

    def knows(self, url_id: int) -> bool:
        return self.history.side_get(_PROBES, [int(url_id)])[0] is not None

    def features(self, *, done_only: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(url_ids, features[url, 64])`` of the probed URLs (finished ones by default)."""
        states = [st for st, _ in self._all() if st.done or not done_only]
        return _stack(states)

    def unclassified(self) -> tuple[np.ndarray, np.ndarray]:
        return _stack([st for st, basket in self._all() if st.done and basket is None])

    def set_baskets(self, ids: np.ndarray, baskets: np.ndarray) -> None:
        keys = [int(i) for i in ids]
        items = []
        for url_id, data, basket in zip(
            keys, self.history.side_get(_PROBES, keys), baskets, strict=True
        ):
            if data is not None:
                items.append((url_id, _to_record(_from_record(url_id, data)[0], int(basket))))
        self.history.side_put(_PROBES, items)

    def baskets(self) -> tuple[np.ndarray, np.ndarray]:
        """``(url_ids, basket index)`` of every classified URL."""
        pairs = [(st.url_id, b) for st, b in self._all() if b is not None]
        a = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        return a[:, 0], a[:, 1]

    def save_model(self, model: BasketModel) -> None:
        record = pack_record({"model": model.to_bytes(), "saved": time.time()})
        self.history.side_put(_MODEL, [(1, record)])

    def load_model(self) -> BasketModel | None:
        data = self.history.side_get(_MODEL, [1])[0]
        if data is None:
            return None
        model = unpack_record(data)["model"]
        assert isinstance(model, bytes)
        where = f"the basket model in the history store {self.history.location}"
        return BasketModel.from_bytes(model, where)


def _stack(states: list[ProbeState]) -> tuple[np.ndarray, np.ndarray]:
    if not states:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0))
    ids = np.asarray([st.url_id for st in states], dtype=np.int64)
    return ids, np.vstack([st.features for st in states])


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
            BasketModel.load(self.cfg.model, "RECRAWL_BASKET_MODEL")
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
        if not good_status(status):
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
