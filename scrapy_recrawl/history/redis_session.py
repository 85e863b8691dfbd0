"""The Redis store's connection and identity: opening it (which Redis, the schema
version, the migrations), its epoch (history/epoch.py) and what a loss does, the
configuration warnings, and every command's error said in one line.

Every part of the store (writer, reader, dictionaries, lease) talks to Redis through
one :class:`RedisSession`: :meth:`~RedisSession.call` for commands,
:meth:`~RedisSession.script` for the registered scripts (each write guarded by the
epoch: :class:`Guarded`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import redis_migrate, redis_scripts
from .base import HistoryStoreError
from .epoch import StoreLost, new_epoch
from .redis_connection import (
    _redis_errors,
    client_location,
    cluster_mode,
    connect,
    location_of,
    redacted,
    redis_from_settings,
    redis_location,
)
from .redis_liveness import NOW_LUA, STAMP_LUA
from .redis_schema import LOST_ERROR, Layout

logger = logging.getLogger("scrapy_recrawl.history")

# Redis locations whose persistence and eviction settings were looked at (once a process).
_CONFIG_SEEN: set[str] = set()


def _location(client: Any) -> str:
    """Where a client points, for messages (a Redis Cluster client: its first node)."""
    if hasattr(client, "connection_pool"):
        return client_location(client)
    nodes = client.get_nodes() if hasattr(client, "get_nodes") else []
    first = nodes[0] if nodes else None
    return f"redis-cluster://{getattr(first, 'host', '?')}:{getattr(first, 'port', '?')}"


class RedisSession:
    """One store's connection, its epoch and its scripts (module docstring)."""

    def __init__(
        self,
        key: str,
        *,
        url: str | None,
        settings: Any,
        connection: Mapping[str, Any] | None,
        client: Any,
        shards: int,
        on_loss: str,
        read_only: bool,
    ) -> None:
        self.key = key
        self._url = url
        self._settings = settings
        self._connection = connection
        self._client = client
        self.read_only = read_only
        if client is not None:
            self.location = _location(client)
        elif connection is not None:
            self.location = location_of(connection, cluster=cluster_mode(settings))
        elif url is not None and settings is None:
            self.location = redacted(url)
        else:
            # where scrapy-redis's settings point; resolved without connecting
            self.location = redis_location(settings, url)
        #: shards of a store this process creates (an existing one keeps its own)
        self.new_shards = max(1, int(shards))
        self.layout = Layout(key, self.new_shards)
        self.scripts: dict[str, Any] = {}
        #: stored values read back that were not data (skipped)
        self.unreadable = 0
        #: RECRAWL_ON_STORE_LOSS: "stop" or "continue" (history/epoch.py)
        self.on_loss = on_loss
        #: called with the StoreLost before it is raised ("stop"); the crawl sets it
        self.on_lost: Callable[[StoreLost], None] | None = None
        #: called after a loss under "continue", once the fresh store has its identity:
        #: the store writes again what its buffered visits name (ids, dictionaries)
        self.on_fresh: Callable[[], None] = lambda: None
        #: the identity of the store this process opened (None: not open)
        self.epoch: str | None = None
        self.epoch_created: float | None = None
        self.claimed: str | None = None  # the spider this process claimed the store for
        self.last_cycle = 0  # the highest cycle counter seen ("continue" keeps it)

    @property
    def client(self) -> Any:
        if self._client is None:
            raise HistoryStoreError(f"history store {self.location} is not open")
        return self._client

    @property
    def shards(self) -> int:
        return self.layout.shards

    @property
    def where(self) -> str:
        """The store, for messages: its Redis and its key prefix."""
        return f"history store {self.location} (key {self.key!r})"

    def k(self, name: str) -> str:
        """The name of one of the store's own keys (``{<prefix>}:<name>``)."""
        return self.layout.store(name)

    def call(self, what: str, fn: Any, for_: str = "") -> Any:
        """``fn(client)``; a Redis error is one HistoryStoreError naming the store."""
        client = self.client
        try:
            return fn(client)
        except _redis_errors() as exc:
            raise HistoryStoreError(
                f"cannot {what} the history store at {self.location} (RECRAWL_STORE){for_}: {exc}"
            ) from exc

    def script(self, name: str) -> Any:
        if not self.scripts:
            raise HistoryStoreError(f"history store {self.location} is not open")
        return self.scripts[name]

    def writable(self, what: str) -> None:
        """Refuse a write to a store opened read-only, naming it."""
        if self.read_only:
            raise HistoryStoreError(
                f"{self.where} is open read-only: cannot {what} (an offline command "
                "reads the history, it never writes it)"
            )

    def counter(self, value: Any, name: str) -> int:
        """A counter read back (None: 0); a value that is not one stops with the key named."""
        try:
            return int(value or 0)
        except ValueError:
            raise HistoryStoreError(
                f"history store {self.location}: the key {self.k(name)} does not hold a "
                "counter this scrapy-recrawl wrote (read as data, not run)"
            ) from None

    def read_cycle(self) -> int:
        cycle = self.counter(self.call("read", lambda c: c.get(self.k("cycle"))), "cycle")
        self.last_cycle = max(self.last_cycle, cycle)
        return cycle

    # -- opening ---------------------------------------------------------------

    def connect(self) -> Any:
        """The client, connected now if it is not (no schema check: :meth:`open` does it)."""
        if self._client is not None:
            return self._client
        try:
            if self._connection is not None:
                cluster = cluster_mode(self._settings)
                self._client, _ = connect(self._connection, cluster=cluster)
            else:
                self._client, location = redis_from_settings(self._settings, self._url)
                if self._url is None:
                    self.location = location
        except _redis_errors() as exc:
            raise HistoryStoreError(
                f"cannot reach the history store at {self.location} (RECRAWL_STORE, "
                f"REDIS_URL): {exc}"
            ) from exc
        return self._client

    def open(self) -> None:
        if self._client is not None and self.scripts:
            return
        meta = self.k("meta")
        try:
            client = self.connect()
            client.ping()
            version, shards = client.hmget(meta, ["schema_version", "shards"])
            if version is None:
                # the keys of schema versions 1 to 4 were ``<prefix>:<name>``
                old = client.hget(f"{self.key}:meta", "schema_version")
                if old is not None:
                    version = old
                elif self.read_only:
                    self._client = None
                    raise HistoryStoreError(
                        f"{self.where} does not exist: nothing to read (check "
                        "RECRAWL_STORE and RECRAWL_REDIS_KEY, or crawl first)"
                    )
                else:  # a new store
                    pipe = client.pipeline()
                    pipe.hsetnx(meta, "shards", self.new_shards)
                    pipe.hsetnx(meta, "schema_version", redis_migrate.TARGET)
                    pipe.hmget(meta, ["schema_version", "shards"])
                    version, shards = pipe.execute()[-1]
        except _redis_errors() as exc:
            self._client = None
            raise HistoryStoreError(
                f"cannot reach the history store at {self.location} (RECRAWL_STORE, "
                f"REDIS_URL): {exc}"
            ) from exc
        try:
            version = int(version)
        except (TypeError, ValueError):
            self._client = None
            raise HistoryStoreError(
                f"history store {self.location}: the key {meta} does not hold a "
                "schema version this scrapy-recrawl wrote (read as data, not run): point "
                "RECRAWL_STORE or RECRAWL_REDIS_KEY elsewhere"
            ) from None
        try:
            redis_migrate.check_version(version, self.where)
            if version < redis_migrate.TARGET:
                self.writable(f"upgrade it from schema version {version}")
                layout = Layout(self.key, int(shards or 1))
                self.call(
                    "migrate",
                    lambda c: redis_migrate.migrate(c, layout, self.location, version),
                )
                shards = self.call("read", lambda c: c.hget(meta, "shards"))
        except HistoryStoreError:
            self._client = None
            raise
        self.layout = Layout(self.key, int(shards or 1))
        if self.read_only:
            self._read_identity()
        else:
            self.identify()
            self._check_config()
        self._register(client)
        self.read_cycle()

    def _register(self, client: Any) -> None:
        # every script that writes is guarded by the epoch (redis_scripts.guarded)
        def guarded(source: str) -> Guarded:
            return Guarded(self, client.register_script(source))

        self.scripts = {
            "record": client.register_script(redis_scripts.RECORD),
            "get": client.register_script(redis_scripts.GET),
            "dict": guarded(redis_scripts.DICT),
            "push_frontier": guarded(redis_scripts.PUSH_FRONTIER),
            "pop_frontier": guarded(redis_scripts.POP_FRONTIER),
            "side_push": guarded(redis_scripts.SIDE_PUSH),
            "side_put": guarded(redis_scripts.SIDE_PUT),
            "side_delete": guarded(redis_scripts.SIDE_DELETE),
            "advance_cycle": guarded(redis_scripts.ADVANCE_CYCLE),
            "reserve_ids": guarded(redis_scripts.RESERVE_IDS),
            "lease": guarded(redis_scripts.guarded(STAMP_LUA)),
            "now": client.register_script(NOW_LUA),
        }

    def close(self) -> Any:
        """Forget the connection; returns the client (the caller releases the lease),
        closed when this store made it."""
        client, self._client = self._client, None
        self.scripts = {}
        self.epoch = self.epoch_created = None
        return client

    def disconnect(self, client: Any) -> None:
        if self._connection is not None or self._url is not None or self._settings is not None:
            client.close()  # ours: release its connections

    # -- identity (history/epoch.py) -------------------------------------------

    def _read_identity(self) -> None:
        """A read-only open: the store's epoch as it is, nothing written."""
        epoch, when = self.call(
            "read", lambda c: c.hmget(self.k("meta"), ["epoch", "epoch_created"])
        )
        self.epoch = epoch.decode() if epoch is not None else None
        self.epoch_created = float(when) if when is not None else None

    def identify(self, *, fresh: bool = False) -> None:
        """Give the store an epoch unless it has one (HSETNX: the first process wins, the
        others adopt it) and remember it; and each shard its copy (written once, when the
        store is made: a shard that lost it -- a node that lost its data -- is noticed).
        ``fresh``: after a loss ("continue"), also the fields a new store starts with,
        the owner and the cycle counter as they were, and every shard's copy."""
        token, created = new_epoch()
        meta = self.k("meta")

        def identify(c: Any) -> list[Any]:
            pipe = c.pipeline()  # MULTI/EXEC (one slot): token and time from one process
            if fresh:
                pipe.hsetnx(meta, "schema_version", redis_migrate.TARGET)
                pipe.hsetnx(meta, "shards", self.shards)
                if self.claimed is not None:
                    pipe.hsetnx(meta, "spider", self.claimed)
                pipe.setnx(self.k("cycle"), self.last_cycle)
            pipe.hsetnx(meta, "epoch", token)
            pipe.hsetnx(meta, "epoch_created", repr(created))
            pipe.hmget(meta, ["epoch", "epoch_created", "shards_marked"])
            epoch, when, marked = pipe.execute()[-1]
            if fresh or marked is None:
                self.mark_shards(c, epoch, overwrite=fresh)
                c.hset(meta, "shards_marked", 1)
            return [epoch, when]

        epoch, when = self.call("write to", identify)
        self.epoch = epoch.decode()
        self.epoch_created = float(when) if when is not None else None

    def mark_shards(self, c: Any, epoch: Any, *, overwrite: bool) -> None:
        pipe = c.pipeline(transaction=False)
        for s in range(self.shards):
            if overwrite:
                pipe.hset(self.layout.shard(s, "meta"), "epoch", epoch)
            else:
                pipe.hsetnx(self.layout.shard(s, "meta"), "epoch", epoch)
        pipe.execute()

    def check_epoch(self) -> None:
        """Raise :class:`StoreLost` if the store (or one of its shards) is no longer the
        one this process opened (vanished or replaced); with ``on_loss="continue"``, warn
        and go on with a fresh history instead."""

        def read(c: Any) -> list[Any]:
            pipe = c.pipeline(transaction=False)
            pipe.hget(self.k("meta"), "epoch")
            for s in range(self.shards):
                pipe.hget(self.layout.shard(s, "meta"), "epoch")
            return list(pipe.execute())

        for found in self.call("read", read):
            found = found.decode() if found is not None else None
            if found != self.epoch:
                self.lost(found)  # raises, unless "continue" went on with a fresh store
                break

    def lost(self, found: str | None) -> None:
        """The store is not the one this process opened: raise :class:`StoreLost` (after
        the crawl's hook), or under "continue" (never read-only) give the fresh store its
        identity, write again what this process's buffered visits name, and warn."""
        exc = StoreLost(self.location, self.key, self.epoch, self.epoch_created, found)
        if self.on_loss == "continue" and not self.read_only:
            old = self.epoch
            self.identify(fresh=True)
            self.on_fresh()
            logger.warning(
                "recrawl: the history store at %s (key %r, epoch %s) %s; "
                "RECRAWL_ON_STORE_LOSS = 'continue': going on with a fresh history (epoch %s)",
                self.location,
                self.key,
                old,
                "vanished" if found is None else f"was replaced (epoch {found})",
                self.epoch,
            )
            return
        if self.on_lost is not None:
            self.on_lost(exc)
        raise exc

    def _check_config(self) -> None:
        """Warn once per Redis when its settings can lose the history unnoticed until the
        epoch check: eviction of keys, no persistence. A managed Redis may refuse CONFIG:
        then nothing is said."""
        if self.location in _CONFIG_SEEN:
            return
        _CONFIG_SEEN.add(self.location)
        try:
            config = {}
            for name in ("maxmemory-policy", "appendonly", "save"):
                got = self.client.config_get(name)
                if got and isinstance(next(iter(got.values())), dict):
                    got = next(iter(got.values()))  # a cluster: per node; the first says
                config.update(got)
        except _redis_errors():
            return
        config = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in config.items()
        }
        policy = config.get("maxmemory-policy")
        if policy not in (None, "noeviction"):
            logger.warning(
                "recrawl: the Redis at %s has maxmemory-policy %s: when it is full it drops keys, "
                "and the history store (key %r) with them; set maxmemory-policy noeviction "
                "(docs/distributed.md)",
                self.location,
                policy,
                self.key,
            )
        if config.get("appendonly") == "no" and config.get("save") == "":
            logger.warning(
                "recrawl: the Redis at %s keeps nothing on disk (appendonly no, no save): a restart "
                "loses the history store (key %r); set appendonly yes (docs/distributed.md)",
                self.location,
                self.key,
            )


class Guarded:
    """A registered write script of the store's own slot, called with the store's meta
    key and epoch appended (redis_scripts.guarded); a refusal is the store's loss
    (:meth:`RedisSession.lost`), and under "continue" the write is made once more,
    into the fresh history. A read-only store refuses it before Redis is asked."""

    def __init__(self, session: RedisSession, script: Any) -> None:
        self.session = session
        self.script = script

    def __call__(
        self,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        client: Any = None,
        meta: Any = None,
    ) -> Any:
        """``meta``: the meta hash whose epoch guards it (default the store's; a shard's
        own for a key of that shard's slot)."""
        import redis

        session = self.session
        session.writable("write to it")
        for _ in range(2):
            try:
                return self.script(
                    keys=[*keys, meta or session.k("meta")],
                    args=[*args, session.epoch or ""],
                    client=client,
                )
            except redis.ResponseError as exc:
                message = str(exc)
                if not message.startswith(LOST_ERROR):
                    raise
                session.lost(message[len(LOST_ERROR) :].strip() or None)
        raise StoreLost(session.location, session.key, session.epoch, None, None)
