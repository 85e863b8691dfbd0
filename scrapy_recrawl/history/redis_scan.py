"""The Redis store's bulk reads: every URL's row (``rows``, ``arrays``), the visit log,
the URLs and requests of many ids, the change window. Each flushes this process's
buffer first (a process reads its own writes) and reads whole strings in
:data:`~.redis_schema.READ_CHUNK` slices, pipelined, into numpy: no key and no Python
loop per URL.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import numpy as np

from .base import HistoryArrays
from .records import window_from_bits
from .redis_ids import IdAllocator, decode_data
from .redis_reader import PointReader
from .redis_schema import (
    BIG_BLOB,
    GONE,
    LOG_DTYPE,
    NO_COUNT,
    PRESENT,
    READ_CHUNK,
    ROW_DTYPE,
    SAD,
    split_blob,
    url_from,
)
from .redis_session import RedisSession
from .redis_writer import VisitWriter


def _copy(value: Any) -> Any:
    """A copy of a decoded shape's containers (its dicts and lists are the caller's)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _counts(column: np.ndarray) -> np.ndarray:
    """A u16 count column as floats, NaN where there is none yet (NO_COUNT)."""
    return np.where(column == NO_COUNT, np.nan, column.astype(np.float64))


class BulkReader:
    """Many URLs at once (module docstring)."""

    def __init__(
        self, session: RedisSession, ids: IdAllocator, writer: VisitWriter, point: PointReader
    ) -> None:
        self.session = session
        self.ids = ids
        self.writer = writer
        self.point = point
        # the blobs' locations of the last rows() read, and how many flushes it had seen
        self.snapshot: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        self.writer.flush()
        session = self.session

        def count(c: Any) -> int:
            pipe = c.pipeline(transaction=False)
            for s in range(session.shards):
                pipe.hget(session.layout.shard(s, "meta"), "urls")
            return sum(int(x or 0) for x in pipe.execute())

        return int(session.call("read", count))

    # -- URLs and requests of many ids -----------------------------------------------

    def blobs(self, ids: list[int]) -> list[bytes | None]:
        """The blobs of these URL ids (None: no such URL), in order. The blob locations
        come from the last :meth:`rows` snapshot when nothing was written since (blobs are
        append-only: a location stays valid), else from the rows; each shard's blobs are
        read whole when that is cheaper than one GETRANGE per URL."""
        self.writer.flush()
        session = self.session
        shards, layout = session.shards, session.layout
        out: list[bytes | None] = [None] * len(ids)
        by_shard: dict[int, list[int]] = {}
        for k, uid in enumerate(ids):
            if uid >= 1:
                by_shard.setdefault((uid - 1) % shards, []).append(k)
        fresh = self.snapshot and self.snapshot[0] == self.writer.writes
        snap = self.snapshot[1] if fresh and self.snapshot else None

        def read(c: Any) -> None:
            for shard, ks in by_shard.items():
                local = np.array([(ids[k] - 1) // shards for k in ks], dtype=np.int64)
                if snap is not None and len(snap) and local.max() < snap.shape[0]:
                    loc = snap[local, shard]
                    lens, offs = loc["req_len"].astype(np.int64), loc["req_off"].astype(np.int64)
                else:
                    pipe = c.pipeline(transaction=False)
                    rows = layout.shard(shard, "rows")
                    for j in local.tolist():
                        pipe.getrange(
                            rows, j * ROW_DTYPE.itemsize + 33, j * ROW_DTYPE.itemsize + 38
                        )
                    raw = [r if len(r) == 6 else b"\0" * 6 for r in pipe.execute()]
                    arr = np.frombuffer(b"".join(raw), dtype=[("l", "<u2"), ("o", "<u4")])
                    lens, offs = arr["l"].astype(np.int64), arr["o"].astype(np.int64)
                self._read_blobs(c, shard, ks, ids, lens, offs, out)

        session.call("read", read)
        return out

    def _read_blobs(
        self,
        c: Any,
        shard: int,
        ks: list[int],
        ids: list[int],
        lens: np.ndarray,
        offs: np.ndarray,
        out: list[bytes | None],
    ) -> None:
        layout = self.session.layout
        key = layout.shard(shard, "blobs")
        small = [j for j in range(len(ks)) if 0 < lens[j] < BIG_BLOB]
        big = [j for j in range(len(ks)) if lens[j] == BIG_BLOB]
        if big:
            vals = c.hmget(layout.shard(shard, "bigreq"), [ids[ks[j]] for j in big])
            for j, v in zip(big, vals, strict=True):
                out[ks[j]] = v
        if not small:
            return
        size = int(c.strlen(key))
        if size < 1000 * len(small):  # one GETRANGE per URL costs ~ reading 1 KB
            pipe = c.pipeline(transaction=False)
            for start in range(0, size, READ_CHUNK):
                pipe.getrange(key, start, min(size, start + READ_CHUNK) - 1)
            whole = b"".join(pipe.execute())
            for j in small:
                out[ks[j]] = whole[offs[j] : offs[j] + lens[j]]
        else:
            pipe = c.pipeline(transaction=False)
            for j in small:
                pipe.getrange(key, int(offs[j]), int(offs[j] + lens[j] - 1))
            for j, v in zip(small, pipe.execute(), strict=True):
                out[ks[j]] = v

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        wanted = [int(i) for i in ids]
        out: list[dict[str, Any] | None] = []
        for uid, data in zip(wanted, self.blobs(wanted), strict=True):
            if data is None:
                out.append(None)
                continue
            try:
                part, sid, inline = split_blob(data)
                url = url_from(part, self.ids.host)
            except (ValueError, struct.error, IndexError):
                self.point.unreadable(uid, "blob")
                out.append(None)
                continue
            if sid:
                shape = self.ids.shape(sid)
                d = None if shape is None else _copy(shape)
            elif inline is not None:
                d = decode_data(self.session, inline, f"the request of URL id {uid}")
            else:
                d = None
            if d is not None and d.get("url") == "":
                d["url"] = url
            out.append(d)
        return out

    def urls(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        """The URLs of these ids; an id the store does not know is a KeyError naming it
        (as every backend: the store contract)."""
        wanted = [int(i) for i in ids]
        found = self.blobs(wanted)
        missing = [i for i, u in zip(wanted, found, strict=True) if u is None]
        if missing:
            raise KeyError(f"history store {self.session.location}: no URL ids {missing[:5]}")
        return [self.point.url_of(data, uid) for uid, data in zip(wanted, found, strict=True)]

    # -- every URL's row ---------------------------------------------------------------

    def rows(self) -> tuple[np.ndarray, int]:
        """Every URL's row (structured :data:`ROW_DTYPE`, row i = id i + 1; ``flags`` bit
        :data:`~.redis_schema.PRESENT` 0: no URL) and the cycle.

        Each shard's row string is read in ``READ_CHUNK`` slices (one pipeline per
        shard) and copied once into a ``[rows, shards]`` array whose row-major order is
        the id order: no key per URL, no Python loop per URL, no concatenation of
        growing buffers.
        """
        self.writer.flush()
        session = self.session
        shards, layout = session.shards, session.layout

        def read(c: Any) -> tuple[np.ndarray, int]:
            pipe = c.pipeline(transaction=False)
            pipe.get(session.k("cycle"))
            for s in range(shards):
                pipe.strlen(layout.shard(s, "rows"))
            cycle, *sizes = pipe.execute()
            size = ROW_DTYPE.itemsize
            counts = [int(n) // size for n in sizes]
            table = np.zeros((max(counts, default=0), shards), dtype=ROW_DTYPE)
            for s, count in enumerate(counts):
                if not count:
                    continue
                key, end = layout.shard(s, "rows"), count * size
                pipe = c.pipeline(transaction=False)
                for start in range(0, end, READ_CHUNK):
                    pipe.getrange(key, start, min(start + READ_CHUNK, end) - 1)
                parts = pipe.execute()
                column = table[:count, s]
                pos = 0
                for part in parts:
                    n = len(part) // size
                    column[pos : pos + n] = np.frombuffer(part, dtype=ROW_DTYPE, count=n)
                    pos += n
                del parts
            # the blobs' locations, for requests() and urls() of this snapshot's ids
            locations = np.empty(table.shape, dtype=[("req_len", "<u2"), ("req_off", "<u4")])
            locations["req_len"], locations["req_off"] = table["req_len"], table["req_off"]
            self.snapshot = (self.writer.writes, locations)
            return table.reshape(-1), session.counter(cycle, "cycle")

        result: tuple[np.ndarray, int] = session.call("read", read)
        return result

    def arrays(self) -> HistoryArrays:
        table, cycle = self.rows()
        flags = table["flags"]
        keep = np.flatnonzero(flags & PRESENT)
        table = table[keep]
        flags = flags[keep]
        columns = {
            "n": table["n"].astype(np.int64),
            "X": table["X"].astype(np.int64),
            "sad": ((flags & SAD) > 0).astype(np.float64),
            "aad_sum": np.ascontiguousarray(table["aad_sum"]),
            "gad": np.ascontiguousarray(table["gad"]),
            "last_visit_cycle": table["last_visit_cycle"].astype(np.int64),
            "last_visit_time": np.ascontiguousarray(table["last_visit_time"]),
            "D": _counts(table["D"]),
            "A": _counts(table["A"]),
            "R": _counts(table["R"]),
            "M": _counts(table["M"]),
            "gone": (flags & GONE) > 0,
            "failures": table["failures"].astype(np.int64),
            "last_failure_cycle": table["last_failure_cycle"].astype(np.int64),
            "first_cycle": table["first_cycle"].astype(np.int64),
            "last_change_cycle": table["last_change_cycle"].astype(np.int64),
        }
        return HistoryArrays(ids=keep.astype(np.int64) + 1, columns=columns, cycle=cycle)

    def change_window(
        self, ids: Iterable[int] | np.ndarray, window: int, table: np.ndarray | None = None
    ) -> np.ndarray:
        """``[len(ids), window]`` of the last change observations, newest first (NaN: none),
        from the rows' ``cwin`` byte (``table``: rows already read by :meth:`rows`)."""
        if table is None:
            table = self.rows()[0]
        idx = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
        cw = np.zeros(len(idx), dtype=np.int64)
        ok = (idx >= 1) & (idx <= len(table))
        cw[ok] = table["cwin"][idx[ok] - 1]
        return window_from_bits(cw, window)

    # -- the visit log -------------------------------------------------------------------

    def visit_log(
        self, url_ids: Iterable[int] | None = None, *, since_cycle: int | None = None
    ) -> dict[str, np.ndarray]:
        """The visit log (oldest first: each shard's log, merged by the entries'
        ``order``) as numpy columns; ``changed`` is -1 for no observation.

        ``since_cycle``: only the cycles from that one on (each shard's log read from its
        first entry of those cycles, ``{p#s}:logstart``, not from its start).
        """
        self.writer.flush()
        session = self.session
        layout = session.layout

        def first_entry(c: Any, shard: int, cur: int) -> str | None:
            cycles = list(range(max(0, since_cycle or 0), cur + 1))
            key = layout.shard(shard, "logstart")
            starts = [s for s in c.hmget(key, cycles) if s] if cycles else []
            if not starts:
                return None
            return min(starts, key=lambda s: tuple(int(x) for x in s.split(b"-"))).decode()

        def read(c: Any) -> bytes:
            parts: list[bytes] = []
            cur = session.counter(c.get(session.k("cycle")), "cycle")
            for shard in range(session.shards):
                start: str | None = "-"
                if since_cycle is not None:
                    start = first_entry(c, shard, cur)
                key = layout.shard(shard, "log")
                while start is not None:
                    batch = c.xrange(key, min=start, max="+", count=50_000)
                    if not batch:
                        break
                    parts.extend(fields[b"v"] for _, fields in batch)
                    ms, seq = batch[-1][0].decode().split("-")
                    start = f"{ms}-{int(seq) + 1}" if len(batch) == 50_000 else None
            return b"".join(parts)

        table = np.frombuffer(session.call("read", read), dtype=LOG_DTYPE)
        table = table[np.argsort(table["order"], kind="stable")]
        if since_cycle is not None:
            table = table[table["cycle"] >= since_cycle]
        if url_ids is not None:
            table = table[np.isin(table["url_id"], np.fromiter(url_ids, dtype=np.int64))]
        return {
            name: table[name].astype(np.float64 if name == "time" else np.int64)
            for name in LOG_DTYPE.names or ()
            if name != "order"
        }
