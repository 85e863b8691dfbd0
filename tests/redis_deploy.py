"""The two Redis deployments the distributed tests run on: one redis-server, and a
three-master Redis Cluster (tests/redis_cluster.py).

``redis_deployment`` (tests/conftest.py) is a fixture parametrized ``single`` / ``cluster``: a test that
takes it runs once on each, with settings and clients from :class:`Deployment`
instead of a hard-coded ``REDIS_URL`` and key names. On the cluster, everything the
crawl keeps in Redis is there: the history store and the frontier (cycle state,
budget, queues, dupefilter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy_recrawl.history.redis import RedisHistoryStore

from .redis_cluster import RedisCluster, shared_cluster
from .redis_server import RedisServer


@dataclass
class Deployment:
    """Where a distributed test's Redis is: ``kind`` is ``single`` or ``cluster``."""

    kind: str
    server: RedisServer | RedisCluster

    @property
    def url(self) -> str:
        """REDIS_URL: the single server, or a seed node of the cluster."""
        return self.server.url

    def settings(self, spider: str) -> dict[str, Any]:
        """The crawl's settings for this deployment (the scheduler not included)."""
        out: dict[str, Any] = {"REDIS_URL": self.url}
        if self.kind == "cluster":
            out["RECRAWL_REDIS_CLUSTER"] = True
        return out

    def store(self, key: str) -> RedisHistoryStore:
        """The history store the crawls wrote, to read back (a context manager)."""
        if isinstance(self.server, RedisCluster):
            return RedisHistoryStore(self.url, key=key, client=self.server.client())
        return RedisHistoryStore(self.url, key=key)

    def client(self) -> Any:
        """A client of the Redis (a RedisCluster on the cluster)."""
        return self.server.client()

    def frontier_key(self, spider: str, name: str) -> str:
        """The name of a key of the spider's shared cycle (``RECRAWL_REDIS_SCHEDULER_KEY``)."""
        tagged = "{" + spider + "}" if self.kind == "cluster" else spider
        return f"{tagged}:recrawl:{name}"

    def flush(self) -> None:
        if isinstance(self.server, RedisCluster):
            self.server.flushall()
        else:
            client = self.server.client()
            client.flushall()
            client.close()


def deployment(kind: str, single: RedisServer) -> Deployment:
    """The deployment ``kind`` (``single``: the test's redis-server ``single``;
    ``cluster``: the session's cluster), emptied."""
    out = (
        Deployment("single", single)
        if kind == "single"
        else Deployment("cluster", shared_cluster())
    )
    out.flush()
    return out


__all__ = ["Deployment", "deployment"]
