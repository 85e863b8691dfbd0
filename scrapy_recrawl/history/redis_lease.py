"""The Redis history store's crawl lease (``{<p>}:lease``, redis_schema.LEASE): which
crawls have the store open now, by the one liveness rule of :mod:`.redis_liveness`
(statuses stamped with the Redis's clock), behind the store's epoch.
"""

from __future__ import annotations

from typing import Any

from .redis_liveness import holder_id, seen_within, server_time, stamp_args
from .redis_schema import LEASE
from .redis_session import RedisSession


class StoreLease:
    """A Redis history store's crawl lease (``{<p>}:lease``, redis_schema.LEASE): which
    crawls have the store open now. history/epoch.py's watch takes it when a crawl opens
    the store (:meth:`hold`), each epoch check stamps it again, a clean close leaves it
    (:meth:`release`); ``scrapy recrawl-reset`` reads :meth:`holders`."""

    def __init__(self, session: RedisSession) -> None:
        self.session = session
        #: this process's field (None: not held) and the seconds it lasts after a stamp
        self.holder: str | None = None
        self.seconds = 0.0

    def hold(self, seconds: float) -> str:
        """Stamp this process's field now with the Redis's clock (again by every epoch
        check); it lasts ``seconds`` after each stamp, so a killed crawl's lease dies.
        Stamped behind the epoch, as every write: a crawl that outlives a reset does not
        re-create it. Returns the holder id (``host:pid:token``)."""
        self.session.writable("hold")
        if self.holder is None:
            self.holder = holder_id()
        self.seconds = float(seconds)
        self.stamp()
        return self.holder

    def stamp(self) -> None:
        """The holder's status stamped again (nothing when not held)."""
        if self.holder is None:
            return
        session, holder = self.session, self.holder
        script, key = session.script("lease"), session.k(LEASE)
        args = stamp_args(holder, {}, self.seconds)
        session.call("write to", lambda c: script(keys=[key], args=args, client=c))

    def holders(self, timeout: float) -> dict[str, dict[str, Any]]:
        """The crawls holding the store now: the holders stamped within ``timeout``
        seconds of the Redis's time now, by holder id, with their status."""
        session = self.session
        key, now = session.k(LEASE), session.script("now")

        def read(c: Any) -> dict[str, dict[str, Any]]:
            raw = c.hgetall(key)
            return seen_within(raw, server_time(now(keys=[key], client=c)), timeout)

        return dict(session.call("read", read))

    def release(self, client: Any) -> None:
        """Leave the lease (HDEL never creates the key); an unreachable Redis lets it
        expire on its own."""
        from .redis_connection import _redis_errors

        holder, self.holder = self.holder, None
        if holder is None:
            return
        try:
            client.hdel(self.session.k(LEASE), holder)
        except _redis_errors():
            pass  # gone within its seconds: what a killed crawl's does
