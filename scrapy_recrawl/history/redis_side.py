"""The Redis store's own keys beside the rows: whose history it is (the ``spider``
field of ``{p}:meta``), its frontier (new URLs waiting for a budget) and side storage
(what plug-ins keep), each a hash or sorted set of the store's own slot; every write a
guarded script or a MULTI/EXEC (no epoch round trip first, no gap after it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from .records import check_table, unpack_list
from .redis_ids import decode_data
from .redis_session import RedisSession
from .request_codec import encode_stored

_INT_FIELD = re.compile(rb"-?[0-9]{1,19}")


class StoreKeys:
    """The store's owner, frontier and side tables (module docstring)."""

    def __init__(self, session: RedisSession) -> None:
        self.session = session

    # -- whose history ---------------------------------------------------------

    def owner(self) -> str | None:
        session = self.session
        name = session.call("read", lambda c: c.hget(session.k("meta"), "spider"))
        return name.decode() if name is not None else None

    def claim(self, spider: str) -> str:
        session = self.session
        session.writable(f"claim it for the spider {spider!r}")
        meta = session.k("meta")

        def claim(c: Any) -> Any:
            pipe = c.pipeline()  # MULTI/EXEC: the first claim wins, every process sees it
            pipe.hsetnx(meta, "spider", spider)
            pipe.hget(meta, "spider")
            return pipe.execute()[1]

        owner = bytes(session.call("write to", claim)).decode()
        session.claimed = owner
        return owner

    # -- the frontier --------------------------------------------------------

    def _frontier_keys(self) -> list[str]:
        k = self.session.k
        return [k(n) for n in ("frontier", "frontier:fp", "frontier:req", "frontier:seq")]

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        args: list[Any] = []
        for fp, request, priority in items:
            data = encode_stored(request)
            if data is not None:  # not plain data: cannot be kept
                args.extend((fp, int(priority), data))
        session = self.session
        script = session.script("push_frontier")
        added = 0
        keys = self._frontier_keys()
        for start in range(0, len(args), 3 * 1000):
            chunk = args[start : start + 3 * 1000]
            added += int(
                session.call("write to", lambda c, a=chunk: script(keys=keys, args=a, client=c))
            )
        return added

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        session = self.session
        script = session.script("pop_frontier")
        keys = self._frontier_keys()[:3]
        blobs = session.call("write to", lambda c: script(keys=keys, args=[int(limit)], client=c))
        what = f"an entry of {session.k('frontier:req')}"
        out = [decode_data(session, b, what) for b in blobs if b is not None]
        return [d for d in out if d is not None]

    def frontier_size(self) -> int:
        session = self.session
        return int(session.call("read", lambda c: c.zcard(session.k("frontier"))))

    # -- side storage (what plug-ins keep) ---------------------------------------

    def _side(self, table: str) -> str:
        return self.session.k(f"side:{check_table(table)}")

    def side_get(self, table: str, keys: Sequence[int]) -> list[bytes | None]:
        key, wanted = self._side(table), [int(k) for k in keys]
        out: list[bytes | None] = []
        for start in range(0, len(wanted), 10_000):
            chunk = wanted[start : start + 10_000]
            if chunk:
                out.extend(self.session.call("read", lambda c, chunk=chunk: c.hmget(key, chunk)))
        return out

    def side_put(self, table: str, items: Sequence[tuple[int, bytes]]) -> None:
        script, key = self.session.script("side_put"), self._side(table)
        for start in range(0, len(items), 10_000):
            args = [x for k, v in items[start : start + 10_000] for x in (int(k), bytes(v))]
            self.session.call("write to", lambda c, a=args: script(keys=[key], args=a, client=c))

    def side_delete(self, table: str, keys: Sequence[int]) -> None:
        script, key = self.session.script("side_delete"), self._side(table)
        wanted = [int(k) for k in keys]
        for start in range(0, len(wanted), 10_000):
            chunk = wanted[start : start + 10_000]
            self.session.call("write to", lambda c, a=chunk: script(keys=[key], args=a, client=c))

    def side_items(self, table: str) -> Iterator[tuple[int, bytes]]:
        key = self._side(table)
        items = self.session.call("read", lambda c: dict(c.hscan_iter(key, count=1000)))
        # a field that is no int was not written by a store (the Redis is shared): skipped
        keyed = {int(k): v for k, v in items.items() if _INT_FIELD.fullmatch(bytes(k))}
        for k in sorted(keyed):
            yield k, bytes(keyed[k])

    def side_push(self, table: str, key: int, item: bytes, keep: int) -> list[bytes]:
        script, name = self.session.script("side_push"), self._side(table)
        old = self.session.call(
            "write to",
            lambda c: script(keys=[name], args=[int(key), bytes(item), int(keep)], client=c),
        )
        return unpack_list(old)
