"""The two Redis deployments the distributed tests run on: one redis-server, and a
three-master Redis Cluster (tests/redis_cluster.py).

``redis_deployment`` is a fixture parametrized ``single`` / ``cluster``: a test that
takes it runs once on each, with settings and clients from :class:`Deployment`
instead of a hard-coded ``REDIS_URL`` and key names.

The history store of the cluster runs: the frontier (cycle state, budget, queues,
dupefilter) is on the cluster, while the store is on a single redis-server
(:class:`SingleRedisStore`, through ``RECRAWL_STORE_CLASS``) until the Redis
history store is cluster-ready (the "store" branch of issue 19); then
:data:`STORE_ON_CLUSTER` turns True and both live on the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scrapy_recrawl.history.redis import RedisHistoryStore

from .redis_cluster import RedisCluster, shared_cluster
from .redis_server import RedisServer

#: the history store of the cluster runs is on the cluster too (module docstring)
STORE_ON_CLUSTER = False


class SingleRedisStore(RedisHistoryStore):
    """The Redis history store on the single redis-server ``TEST_STORE_REDIS_URL``
    (key ``TEST_STORE_REDIS_KEY``), while the crawl's other Redis is a cluster."""

    @classmethod
    def from_settings(cls, settings: Any, url: str | None = None, **options: Any) -> Any:
        store = cls(settings.get("TEST_STORE_REDIS_URL"), key=settings.get("TEST_STORE_REDIS_KEY"))
        store.open()  # RECRAWL_STORE_CLASS's check reads its properties
        return store


@dataclass
class Deployment:
    """Where a distributed test's Redis is: ``kind`` is ``single`` or ``cluster``."""

    kind: str
    frontier: RedisServer | RedisCluster
    store_server: RedisServer | RedisCluster
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """REDIS_URL: the single server, or a seed node of the cluster."""
        return self.frontier.url

    def settings(self, spider: str) -> dict[str, Any]:
        """The crawl's settings for this deployment (the scheduler not included)."""
        out: dict[str, Any] = {"REDIS_URL": self.url}
        if self.kind == "cluster":
            out["RECRAWL_REDIS_CLUSTER"] = True
            if self.store_server is not self.frontier:
                out |= {
                    "RECRAWL_STORE_CLASS": f"{__name__}.SingleRedisStore",
                    "TEST_STORE_REDIS_URL": self.store_server.url,
                    "TEST_STORE_REDIS_KEY": f"{spider}:history",
                }
        return out

    def store(self, key: str) -> RedisHistoryStore:
        """The history store the crawls wrote, to read back (a context manager)."""
        if isinstance(self.store_server, RedisCluster):
            return RedisHistoryStore(
                self.store_server.url, key=key, client=self.store_server.client()
            )
        return RedisHistoryStore(self.store_server.url, key=key)

    def client(self) -> Any:
        """A client of the frontier's Redis (a RedisCluster on the cluster)."""
        return self.frontier.client()

    def frontier_key(self, spider: str, name: str) -> str:
        """The name of a key of the spider's shared cycle (``RECRAWL_REDIS_SCHEDULER_KEY``)."""
        tagged = "{" + spider + "}" if self.kind == "cluster" else spider
        return f"{tagged}:recrawl:{name}"

    def flush(self) -> None:
        for server in {
            id(self.frontier): self.frontier,
            id(self.store_server): self.store_server,
        }.values():
            if isinstance(server, RedisCluster):
                server.flushall()
            else:
                client = server.client()
                client.flushall()
                client.close()


@pytest.fixture(scope="module")
def _deploy_single():
    with RedisServer() as server:
        yield server


def deployment(kind: str, single: RedisServer) -> Deployment:
    """The deployment ``kind`` (``single``, ``cluster``), emptied; ``single`` is the
    test's redis-server (the cluster runs' store, until it is cluster-ready)."""
    if kind == "single":
        out = Deployment("single", single, single)
    else:
        cluster = shared_cluster()
        out = Deployment("cluster", cluster, cluster if STORE_ON_CLUSTER else single)
    out.flush()
    return out


@pytest.fixture(params=["single", "cluster"])
def redis_deployment(request, _deploy_single):
    """The test runs on a single redis-server and on a three-master cluster, emptied first."""
    return deployment(request.param, _deploy_single)


__all__ = ["Deployment", "STORE_ON_CLUSTER", "SingleRedisStore", "deployment", "redis_deployment"]
