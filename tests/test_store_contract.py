"""The store contract suite (scrapy_recrawl.testing) against each backend."""

from __future__ import annotations

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.testing import StoreContract


class TestSqliteStore(StoreContract):
    def make_store(self, tmp_path, request):
        store = SqliteHistoryStore(tmp_path / "history.sqlite3", flush_every=3)
        store.open()
        return store


class TestRedisStore(StoreContract):
    def make_store(self, tmp_path, request):
        server = request.getfixturevalue("redis_db")
        # one shard: ids are given in order, as the contract's examples spell them
        store = RedisHistoryStore(server.url, shards=1)
        store.open()
        return store


class SqliteUnderAnotherName(SqliteHistoryStore):
    """A third-party backend, as RECRAWL_STORE_CLASS names one (here: SQLite inside)."""

    @classmethod
    def from_settings(cls, settings):
        return cls(settings["MY_STORE_PATH"])


class TestThirdPartyStore(StoreContract):
    def make_store(self, tmp_path, request):
        from scrapy.settings import Settings

        from scrapy_recrawl.history import open_store

        store = open_store(
            Settings(
                {
                    "RECRAWL_STORE_CLASS": f"{__name__}.SqliteUnderAnotherName",
                    "MY_STORE_PATH": str(tmp_path / "mine.sqlite3"),
                }
            )
        )
        assert type(store) is SqliteUnderAnotherName
        store.open()
        return store


def test_a_store_class_missing_the_contract_is_refused():
    import pytest
    from scrapy.settings import Settings

    from scrapy_recrawl.history import open_store
    from scrapy_recrawl.settings import RecrawlSettingError

    with pytest.raises(RecrawlSettingError, match=r"RECRAWL_STORE_CLASS=.*lacks .*side_get"):
        open_store(Settings({"RECRAWL_STORE_CLASS": "builtins.dict"}))


class TestRedisStoreSharded(StoreContract):
    """16 shards (RECRAWL_REDIS_SHARDS's default): a URL's id comes from its shard's
    counter, so the contract's examples are read with the ids the store gave."""

    def make_store(self, tmp_path, request):
        server = request.getfixturevalue("redis_db")
        store = RedisHistoryStore(server.url, shards=16)
        store.open()
        return store


class TestRedisClusterStore(StoreContract):
    """The one code path on a real three-master Redis Cluster (tests/redis_cluster.py):
    every script's keys in one slot, the shards spread over the nodes."""

    def make_store(self, tmp_path, request):
        cluster = request.getfixturevalue("redis_cluster_db")
        store = RedisHistoryStore(client=cluster.client(), key="books:history", shards=16)
        store.open()
        return store
