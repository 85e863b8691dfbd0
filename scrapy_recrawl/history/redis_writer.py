"""The Redis store's buffered writer: ``record()`` buffers a visit and predicts the
record it makes; ``flush()`` writes the buffer, one guarded record script per shard
touched, pipelined (:mod:`.redis_pipeline`), each visit folded server-side; a failed
flush keeps the visits not written for a retry, a lost store drops them (or, under
"continue", writes them once more into the fresh one).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import redis_pipeline
from .base import (
    FlushFailed,
    HistoryStoreError,
    UrlRecord,
    Visit,
    compress_body,
    refuse_when_full,
)
from .epoch import StoreLost
from .redis_ids import IdAllocator
from .redis_record import PendingRecord, clone, set_numbers
from .redis_schema import (
    LOG_FORMAT,
    LOST_ERROR,
    ROW_DTYPE,
    ROW_FORMAT,
    VISIT_FORMAT,
    VISIT_HEAD,
    VISIT_TAIL,
    blob,
    host_of,
    shape_of,
    url_part,
)
from .redis_session import RedisSession
from .state import fold_visit, good_status


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8", "surrogateescape")


class VisitWriter:
    """The visits this process has taken and not yet written, and what it predicts of
    their URLs (the module docstring; RedisHistoryStore.record says the contract)."""

    #: records kept for predictions (the oldest go first; never one with buffered visits)
    CACHE_SIZE = 20_000

    def __init__(
        self,
        session: RedisSession,
        ids: IdAllocator,
        *,
        get: Callable[[bytes], UrlRecord | None],
        store_bodies: bool,
        log_maxlen: int,
        flush_every: int,
        flush_seconds: float,
        monotonic: Callable[[], float],
    ) -> None:
        self.session = session
        self.ids = ids
        self._get = get  # the store's get(): what a PendingRecord reads of the stored fields
        self.store_bodies = store_bodies
        self.log_maxlen = int(log_maxlen)
        self.flush_every = max(1, int(flush_every))
        self.flush_seconds = float(flush_seconds)
        #: the flush timer's clock (seconds, only differences count): a test may pass its own
        self.monotonic = monotonic
        self.reset()

    def reset(self) -> None:
        # visits waiting for flush(): (shard, bucket, fingerprint, script arguments, the
        # PendingRecord record() returned for it and the visit, when it was not predicted)
        # (its arguments wait as (id, visit, field, body) while its host is new)
        self.pending: list[
            tuple[
                int,
                int,
                bytes,
                tuple[bytes, bytes] | tuple[int, Visit, bytes, bytes | None],
                tuple[PendingRecord, Visit] | None,
            ]
        ] = []
        self.pending_fps: set[bytes] = set()
        self._proposed: dict[bytes, int] = {}  # ids proposed for buffered unread URLs
        self._new_hosts: set[str] = set()  # hosts of buffered visits, not in the dictionary yet
        # the batch sent and not yet answered: (plan, its visits, what send() gave)
        self.inflight: tuple[list[Any], list[Any], Any] | None = None
        # fingerprint -> (record, signature known): what record() predicts from
        # ... and the server's (id, row) after the last flush of its visits, not yet read;
        # a record not read from the store nor learnt from a flush is not in it
        self.cache: dict[bytes, tuple[UrlRecord, bool, tuple[int, bytes] | None]] = {}
        self._order = 0
        self._last_flush = self.monotonic()
        self.writes = 0  # flushes so far: a rows() snapshot is as new as this

    @property
    def location(self) -> str:
        return self.session.location

    def get_stored(self, fingerprint: bytes) -> UrlRecord | None:
        """The store's record of a URL (what a PendingRecord reads of the stored fields)."""
        return self._get(fingerprint)

    @property
    def buffered_visits(self) -> int:
        inflight = len(self.inflight[1]) if self.inflight is not None else 0
        return len(self.pending) + inflight

    # -- record() ----------------------------------------------------------------

    def record(self, visit: Visit) -> UrlRecord:
        session = self.session
        session.script("record")  # not open: say so now
        session.writable("record a visit")
        refuse_when_full(self, self.flush_every)  # writes failing: not taken past the bound
        fp = visit.fingerprint
        shard, bucket, field = session.layout.locate(fp)
        cycle = session.last_cycle if visit.cycle is None else int(visit.cycle)
        cached = self.cache.pop(fp, None)
        lazy: tuple[PendingRecord, Visit] | None = None
        if cached is not None:
            old, sig_known, learnt = cached
            rec = clone(old)
            if learnt is not None:  # the server's fold of its last flushed visit
                rec.id = learnt[0]
                set_numbers(rec, learnt[1])
            sig_known = sig_known or visit.signature is not None
        else:
            # not read nor written by this process: proposed as new (the server keeps the
            # id it has, if any), and the caller's record filled from the server's fold
            uid = self._proposed.get(fp) or self.ids.reserve(shard)  # one id for its visits
            self._proposed[fp] = uid
            rec = UrlRecord(
                id=uid,
                url=visit.url,
                fingerprint=fp,
                first_seen=visit.time,
                first_cycle=session.last_cycle,
            )
            sig_known = True
            lazy = (PendingRecord(self, fp), visit)
        fold_visit(rec, visit, cycle)
        if visit.signature is not None:
            rec.signature, sig_known = visit.signature, True
        body = None
        if self.store_bodies and visit.body is not None and good_status(visit.status):
            headers = json.dumps(visit.headers or {}).encode()
            body = (
                struct.pack("<HI", visit.status, len(headers)) + headers + compress_body(visit.body)
            )
            rec.has_body = True
        args: tuple[bytes, bytes] | tuple[int, Visit, bytes, bytes | None]
        host = host_of(visit.url)[0]
        if self.ids.is_new_host(host):
            # a host new to this process: its dictionary id is asked for at the flush,
            # with every other new host's (one round trip, not one per host)
            self._new_hosts.add(host)
            args = (rec.id, visit, field, body)
        else:
            args = self._visit_args(rec.id, visit, field, body)
        self.pending.append((shard, bucket, fp, args, lazy))
        self.pending_fps.add(fp)
        if lazy is None:
            self.remember(fp, rec, sig_known)
        if (
            len(self.pending) >= self.flush_every
            or self.monotonic() - self._last_flush >= self.flush_seconds
        ):
            try:
                self._flush(wait=False)
            except StoreLost:
                raise  # the buffer went with the store
            except HistoryStoreError as exc:  # the visit is buffered: not to be recorded again
                raise FlushFailed(str(exc), clone(rec) if lazy is None else lazy[0]) from exc
        return clone(rec) if lazy is None else lazy[0]

    def remember(self, fp: bytes, rec: UrlRecord, sig_known: bool) -> None:
        """Keep ``rec`` as what the next prediction of ``fp`` starts from."""
        self.cache.pop(fp, None)
        self.cache[fp] = (rec, sig_known, None)
        while len(self.cache) > max(self.CACHE_SIZE, 2 * self.flush_every):
            oldest = next(iter(self.cache))
            if oldest in self.pending_fps:
                break
            del self.cache[oldest]

    def _blob(self, visit: Visit) -> tuple[int, bytes]:
        """The URL's blob, as the record script takes it: ``(1, blob)`` (set), ``(2, URL
        part)`` (the URL, with the request stored before, if any: a visit without a
        request keeps the stored one)."""
        shape = None
        if visit.request is not None:
            shape = shape_of(visit.request, visit.url)  # None: not data, keep the stored request
        part = url_part(visit.url, self.ids.host_id(visit.url))
        if shape is None:
            return 2, part
        return 1, blob(part, self.ids.shape_id(shape), shape)

    def _visit_args(
        self, uid: int, visit: Visit, field: bytes, body: bytes | None
    ) -> tuple[bytes, bytes]:
        """One visit as the record script takes it: its numbers, then its strings with
        their lengths (the host of its URL already in the dictionary, or kept whole)."""
        etag, lastmod = _bytes(visit.etag), _bytes(visit.last_modified)
        sig, (mode, part) = visit.signature, self._blob(visit)
        strings = [field, etag, lastmod, sig, part, body]
        return (
            VISIT_FORMAT.pack(
                uid,
                float(visit.time),
                int(visit.status),
                -1 if visit.changed is None else int(bool(visit.changed)),
                int(visit.distance),
                int(visit.added),
                int(visit.removed),
                int(visit.modified),
                int(visit.attributes),
                int(visit.size),
                int(bool(visit.gone)),
                -1 if visit.cycle is None else int(visit.cycle),
            ),
            VISIT_TAIL.pack(
                len(field),
                -1 if etag is None else len(etag),
                -1 if lastmod is None else len(lastmod),
                -1 if sig is None else len(sig),
                mode,
                len(part),
                -1 if body is None else len(body),
            )
            + b"".join(x for x in strings if x is not None),
        )

    def _new_host_ids(self) -> None:
        """The dictionary ids of the hosts new since the last flush, in one script call;
        then the arguments of the visits that waited for them."""
        if not self._new_hosts:  # no visit waits (only a new host makes one wait)
            return
        self.ids.register_hosts(sorted(self._new_hosts))
        self._new_hosts.clear()
        self.pending = [
            (shard, bucket, fp, self._visit_args(*args) if len(args) == 4 else args, lazy)
            for shard, bucket, fp, args, lazy in self.pending
        ]

    # -- flush() -------------------------------------------------------------------

    def flush(self) -> None:
        """Write the buffered visits; on return they are in Redis. A failure keeps the
        visits of the shards not written, for a retry."""
        self._flush(wait=True)

    def _flush(self, *, wait: bool) -> None:
        """``wait=False`` (record()'s own flush when the buffer is full): send the batch
        and go on; its answer is read at the next flush (or read, or close), so Redis
        folds one batch while this process prepares the next. At most one batch is in
        flight; until its answer is read its visits count as buffered (a failure puts
        them back, a read of one of their URLs waits for it)."""
        session = self.session
        self._last_flush = self.monotonic()
        self.collect()
        if not self.pending or session._client is None:
            return
        self._new_host_ids()
        cur = session.read_cycle()
        by_shard: dict[int, list[int]] = {}
        for i, (shard, *_) in enumerate(self.pending):
            by_shard.setdefault(shard, []).append(i)
        now = max(time.time_ns() // 1000 << 12, self._order + 4096)
        self._order = now
        shards, layout = session.shards, session.layout
        plan = []
        for shard, idx in by_shard.items():
            buckets: dict[int, int] = {}
            keys = layout.shard_keys(shard)
            args: list[Any] = [
                ROW_FORMAT,
                LOG_FORMAT,
                -(-self.log_maxlen // shards) if self.log_maxlen > 0 else 0,
                shards,
                cur,
            ]
            for i in idx:
                _, bucket, _, visit_args, _ = self.pending[i]
                numbers, tail = visit_args  # type: ignore[misc]  # _new_host_ids made them
                if bucket not in buckets:
                    keys.append(layout.bucket(shard, bucket))
                    buckets[bucket] = len(keys)
                args.append(
                    VISIT_HEAD.pack(buckets[bucket]) + numbers + struct.pack("<q", now + i) + tail
                )
            keys.append(layout.shard(shard, "meta"))
            plan.append((shard, idx, keys, args))
        pending, self.pending = self.pending, []
        try:
            sent = redis_pipeline.send(session, plan)
        except HistoryStoreError:
            self._requeue(pending)  # not sent (Redis went away meanwhile): kept for a retry
            raise
        self.inflight = (plan, pending, sent)
        if wait:
            self.collect()

    def collect(self) -> None:
        """Read the answer of the batch in flight (if any) and settle it."""
        if self.inflight is None:
            return
        plan, pending, sent = self.inflight
        self.inflight = None
        session = self.session
        try:
            results = session.call(
                "write to", lambda c: redis_pipeline.answers(session, sent, plan)
            )
        except HistoryStoreError:
            self._requeue(pending)
            raise
        self._settle(plan, pending, results)

    def _requeue(self, visits: list[Any]) -> None:
        """Visits not written go back to the front of the buffer, for a retry."""
        self.pending = visits + self.pending
        self.pending_fps = {v[2] for v in self.pending}

    def _settle(self, plan: list[Any], pending: list[Any], results: list[Any]) -> None:
        import redis

        session = self.session
        for attempt in range(2):
            lost: list[str | None] = []
            done: set[int] = set()
            newer = {v[2] for v in self.pending}  # recorded since: their predictions stand
            for (shard, idx, _, _), result in zip(plan, results, strict=True):
                if isinstance(result, Exception):
                    if isinstance(result, redis.ResponseError) and str(result).startswith(
                        LOST_ERROR
                    ):
                        lost.append(str(result)[len(LOST_ERROR) :].strip() or None)
                    continue
                done.add(shard)
                uids = np.frombuffer(result[0], dtype="<i4")
                size = ROW_DTYPE.itemsize
                for k, i in enumerate(idx):
                    row = result[1][k * size : (k + 1) * size]
                    fp = pending[i][2]
                    self._learn(fp, int(uids[k]), row, pending[i][4], fp in newer)
            self.writes += 1
            plan = [p for p in plan if p[0] not in done]
            if plan and lost and not attempt:
                try:
                    session.lost(
                        lost[0]
                    )  # "stop" raises; "continue": once more, into the fresh one
                except StoreLost:
                    # nothing more is written into a lost store: these visits go with it
                    self.pending, self.pending_fps, self._proposed = [], set(), {}
                    raise
                results = session.call(
                    "write to", lambda c, p=plan: redis_pipeline.run(session, c, p)
                )
                continue
            self._requeue([pending[i] for p in plan for i in p[1]])
            self._proposed = {k: v for k, v in self._proposed.items() if k in self.pending_fps}
            if not plan:
                return
            first = next(r for r in results if isinstance(r, Exception))
            raise HistoryStoreError(
                f"cannot write to the history store at {session.location} (RECRAWL_STORE): {first}"
            )
        raise AssertionError("unreachable")

    def _learn(
        self,
        fp: bytes,
        uid: int,
        row: bytes,
        lazy: tuple[PendingRecord, Visit] | None = None,
        newer: bool = False,
    ) -> None:
        """The server's fold of a URL's visit: the record the next prediction starts
        from (decoded then: most URLs are not visited again by the same process soon),
        unless a newer visit of it is buffered (its prediction already folds this one);
        and the PendingRecord record() returned for it, if any, filled in."""
        cached = self.cache.get(fp)
        if cached is not None and not newer:
            self.cache[fp] = (cached[0], cached[1], (uid, row))
        if lazy is None:
            return
        pending, visit = lazy
        if cached is None and not newer:  # what the next prediction of this URL starts from
            base = UrlRecord(id=uid, url=visit.url, fingerprint=fp, first_seen=0.0, first_cycle=0)
            base.etag, base.last_modified = visit.etag, visit.last_modified
            base.signature = visit.signature
            self.remember(fp, base, visit.signature is not None)
            self.cache[fp] = (base, visit.signature is not None, (uid, row))
        pending._fill(uid, row, visit)
