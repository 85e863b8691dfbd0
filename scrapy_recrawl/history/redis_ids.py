"""The Redis store's allocation of ids: URL ids by blocks per shard, and the two
dictionaries of what repeats (schemes and hosts; request shapes), with what this
process knows of them.

A new URL takes an id of its shard's block reserved by this process (``INCRBY
{p#s}:next``, :data:`~.redis_schema.ID_BLOCK` at a time, behind the shard's epoch); a
host or request shape takes the dictionary's id for it (one script call for every
host new since the last flush). After a loss under "continue" the fresh store gets the
counters and dictionary entries this process's buffered visits and blobs name
(:meth:`IdAllocator.write_again`).
"""

from __future__ import annotations

from typing import Any

from .redis_schema import ID_BLOCK, MAX_SHAPE, host_of
from .redis_session import RedisSession
from .request_codec import decode_stored


class IdAllocator:
    """URL ids, host ids and request-shape ids of one store, as this process knows them."""

    def __init__(self, session: RedisSession) -> None:
        self.session = session
        self.reset()

    def reset(self) -> None:
        self.reserved: dict[int, list[int]] = {}  # shard -> [next local, end]
        self.shape_ids: dict[bytes, int] = {}
        self.shapes: dict[int, Any] = {}  # id -> decoded shape (None: not data)
        self.host_ids: dict[str, int] = {}
        self.hosts: dict[int, str | None] = {}

    def reserve(self, shard: int) -> int:
        """A new URL id of ``shard``, from a block this process reserved (INCRBY)."""
        block = self.reserved.get(shard)
        if block is None or block[0] >= block[1]:
            # behind the shard's epoch: a reset store's counter is not re-created
            session = self.session
            keys, meta = [session.layout.shard(shard, "next")], session.layout.shard(shard, "meta")
            script = session.script("reserve_ids")
            end = int(
                session.call(
                    "write to",
                    lambda c: script(keys=keys, args=[ID_BLOCK], client=c, meta=meta),
                )
            )
            block = self.reserved[shard] = [end - ID_BLOCK, end]
        local = block[0]
        block[0] += 1
        return self.session.layout.id_of(shard, local)

    def shape_id(self, shape: bytes) -> int:
        """The dictionary id of a request shape (0: kept inline)."""
        if len(shape) > MAX_SHAPE:
            return 0
        sid = self.shape_ids.get(shape)
        if sid is None:
            session = self.session
            script = session.script("dict")
            keys = [session.k("dict"), session.k("dictidx")]
            sid = int(
                session.call("write to", lambda c: script(keys=keys, args=[shape], client=c))[0]
            )
            self.shape_ids[shape] = sid
        return sid

    def host_id(self, url: str) -> int:
        """The host dictionary's id of the URL's scheme and host (0: kept whole). A host
        new to this process is registered by the next flush (:meth:`register_hosts`),
        before the arguments of its visits are made: here it is known."""
        return self.host_ids.get(host_of(url)[0], 0)

    def is_new_host(self, host: str) -> bool:
        """A host this process has no id for yet (and that the dictionary can take)."""
        return bool(host) and len(host) <= MAX_SHAPE and host not in self.host_ids

    def register_hosts(self, hosts: list[str]) -> None:
        """The dictionary ids of ``hosts``, in one script call."""
        session = self.session
        script = session.script("dict")
        keys = [session.k("hosts"), session.k("hostidx")]
        ids = session.call("write to", lambda c: script(keys=keys, args=hosts, client=c))
        self.host_ids.update(zip(hosts, (int(i) for i in ids), strict=True))

    def host(self, hid: int) -> str | None:
        """The scheme and host of a host id (None: not in the dictionary: not ours)."""
        if hid not in self.hosts:  # a host not seen yet: the whole dictionary, once
            session = self.session
            every = session.call("read", lambda c: c.hgetall(session.k("hosts")))
            for k, v in every.items():
                self.hosts[int(k)] = v.decode("utf-8", "surrogateescape")
        return self.hosts.get(hid)  # None: not in the dictionary (not ours), read again

    def shape(self, sid: int) -> Any:
        """The request shape of a dictionary id, decoded as data (None: none, or not data)."""
        if sid not in self.shapes:
            session = self.session
            data = session.call("read", lambda c: c.hget(session.k("dict"), sid))
            self.shapes[sid] = (
                None
                if data is None
                else decode_data(session, data, f"request shape {sid} of {session.k('dict')}")
            )
        return self.shapes[sid]

    def write_again(self) -> None:
        """After a loss under "continue": the ids this process reserved (and maybe handed
        out) stay its own, and the hosts and request shapes it knows keep their ids (its
        buffered visits and blobs name them): written again into the fresh store."""
        session = self.session
        blocks = list(self.reserved.items())
        session.call(
            "write to",
            lambda c: [c.setnx(session.layout.shard(s, "next"), b[1]) for s, b in blocks],
        )
        for ids, table, index in (
            (self.host_ids, "hosts", "hostidx"),
            (self.shape_ids, "dict", "dictidx"),
        ):
            known = {k: v for k, v in ids.items() if v > 0}
            if known:
                session.call(
                    "write to",
                    lambda c, t=table, i=index, m=known: (
                        c.hset(session.k(t), mapping={v: k for k, v in m.items()}),
                        c.hset(session.k(i), mapping=m),
                    ),
                )


def decode_data(session: RedisSession, data: bytes, what: str) -> dict[str, Any] | None:
    """A stored request read back as data (None, counted as unreadable: it is not)."""
    d = decode_stored(data, f"{what} in the history store at {session.location}")
    if d is None:
        session.unreadable += 1
    return d
