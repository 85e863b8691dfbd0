"""The fixtures shared by the test modules, found by pytest here (no imports needed).

Redis: ``redis_server`` (one real redis-server per test module) and ``redis_db``
(that server, emptied before the test); ``redis_cluster`` (one three-master Redis
Cluster per session) and ``redis_cluster_db`` (emptied before the test);
``redis_deployment`` (each test runs on a single server and on the cluster).
The servers themselves are tests/redis_server.py, tests/redis_cluster.py and
tests/redis_deploy.py.

The markers ``planning``, ``ml`` and ``plot`` (tests/extras.py): a test that needs an
optional extra is skipped, with the command that installs it, where it is missing.
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import NodeId

from .extras import EXTRAS, missing_extra
from .redis_cluster import shared_cluster
from .redis_deploy import deployment
from .redis_server import RedisServer


@pytest.hookimpl(trylast=True)  # after pytest-xdist's, which marks the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules that hold a ``slow`` test (a real crawl, a subprocess, a whole suite)
    run first; each module's tests stay together, in their order. And ``xdist_group``
    holds again (:func:`_hold_xdist_groups`).

    ``--dist loadgroup`` hands the tests to the two workers in this order as they free
    up (a group's tests, ``xdist_group``, before the rest), so what is handed out last
    decides how long one worker waits for the other at the end. By name, the last
    modules hold crawls of 15-18 s (``test_store_outage.py``,
    ``test_stored_request_crawl.py``; two to four times that on a loaded machine); with
    the thousand short tests last, the two workers finish together. One process runs
    the same tests, in another module order."""
    slow = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in slow)
    _hold_xdist_groups(items)


def _hold_xdist_groups(items: list[pytest.Item]) -> None:
    """pytest-xdist (3.8) marks a test of an ``xdist_group`` for ``--dist loadgroup`` by
    setting ``item._nodeid`` to ``<nodeid>@<group>``, but since pytest 9 a node's id is
    ``item._id`` and that attribute is ignored: every group was split over both workers,
    each crawling a grouped module's module-scoped stores again (``test_report.py``,
    ``test_offline_spider_settings.py``: four crawls where two do). The id xdist meant
    is set where pytest reads it; where xdist's own works, nothing changes."""
    for item in items:
        meant = getattr(item, "_nodeid", None)
        if isinstance(meant, str) and meant != item.nodeid:
            item._id = NodeId.parse(meant)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for extra in EXTRAS:
        if item.get_closest_marker(extra) is not None:
            reason = missing_extra(extra)
            if reason is not None:
                pytest.skip(reason)


@pytest.fixture(scope="module")
def redis_server():
    """One redis-server per test module; tests clean their own keys (``flushdb``)."""
    with RedisServer() as server:
        yield server


def _emptied(server: RedisServer) -> RedisServer:
    """``server`` running (started again if a test killed it) and emptied."""
    server.ensure_running()
    client = server.client()
    client.flushall()
    client.close()
    return server


@pytest.fixture
def redis_db(redis_server):
    """The module's server (started again if a test killed it), emptied before each test."""
    yield _emptied(redis_server)


@pytest.fixture(scope="module")
def redis_aof_server():
    """One redis-server per test module that keeps its data across a restart (AOF,
    fsync on each write): a test stops it and starts it again on the same port."""
    with RedisServer(appendonly=True) as server:
        yield server


@pytest.fixture
def redis_aof(redis_aof_server):
    """The module's AOF server, running and emptied before each test."""
    return _emptied(redis_aof_server)


@pytest.fixture(scope="session")
def redis_cluster():
    """One three-master Redis Cluster per test session; tests empty it (``redis_cluster_db``)."""
    return shared_cluster()


@pytest.fixture
def redis_cluster_db(redis_cluster):
    """The session's cluster (a node that died started again), emptied before each test."""
    redis_cluster.ensure_running()
    redis_cluster.flushall()
    yield redis_cluster


@pytest.fixture(scope="module")
def _deploy_single():
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["single", "cluster"])
def redis_deployment(request, _deploy_single):
    """The test runs on a single redis-server and on a three-master cluster, emptied first."""
    _deploy_single.ensure_running()
    if request.param == "cluster":
        shared_cluster().ensure_running()
    return deployment(request.param, _deploy_single)
