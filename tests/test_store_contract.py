"""The store contract suite (scrapy_recrawl.testing) against each backend, and how a
backend of one's own (RECRAWL_STORE_CLASS) is built: with the spider's name and the
read-only flag of the offline commands."""

from __future__ import annotations

import hashlib
import os

import pytest
from scrapy.settings import Settings

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.settings import RecrawlSettingError
from scrapy_recrawl.stores import open_store
from scrapy_recrawl.testing import StoreContract, fp

from .cli_project import make_project, scrapy_in_process


class TestSqliteStore(StoreContract):
    def make_store(self, tmp_path, request):
        store = SqliteHistoryStore(tmp_path / "history.sqlite3", flush_every=3)
        store.open()
        return store

    def make_read_only(self, store, tmp_path, request):
        reader = SqliteHistoryStore(store.path, read_only=True)
        reader.open()
        return reader

    def test_its_label_is_the_file_name_and_it_is_a_file_store(self, store):
        assert store.label == "history.sqlite3"
        assert store.capabilities == {"file", "read_ahead"}


class TestRedisStore(StoreContract):
    def make_store(self, tmp_path, request):
        server = request.getfixturevalue("redis_db")
        # one shard: ids are given in order, as the contract's examples spell them
        store = RedisHistoryStore(server.url, shards=1)
        store.open()
        return store

    def make_read_only(self, store, tmp_path, request):
        server = request.getfixturevalue("redis_db")
        reader = RedisHistoryStore(server.url, shards=1, read_only=True)
        reader.open()
        return reader


class SqliteUnderAnotherName(SqliteHistoryStore):
    """A third-party backend, as RECRAWL_STORE_CLASS names one (here: SQLite inside):
    one file per spider under MY_STORE_DIR, named from the spider it is built for."""

    #: (spider, read_only) of every store built, in order: what the loader handed it
    built: list[tuple[str | None, bool]] = []

    @classmethod
    def from_settings(cls, settings, *, spider, read_only):
        cls.built.append((spider, read_only))
        path = os.path.join(settings["MY_STORE_DIR"], f"{spider or 'nobody'}.sqlite3")
        return cls(path, read_only=read_only)


def _third_party_settings(tmp_path, **more):
    return Settings(
        {
            "RECRAWL_STORE_CLASS": f"{__name__}.SqliteUnderAnotherName",
            "MY_STORE_DIR": str(tmp_path),
            **more,
        }
    )


class TestThirdPartyStore(StoreContract):
    def make_store(self, tmp_path, request):
        store = open_store(_third_party_settings(tmp_path), "books")
        assert type(store) is SqliteUnderAnotherName
        assert SqliteUnderAnotherName.built[-1] == ("books", False)
        assert store.label == "books.sqlite3"
        store.open()
        return store

    def make_read_only(self, store, tmp_path, request):
        reader = open_store(_third_party_settings(tmp_path), "books", read_only=True)
        assert SqliteUnderAnotherName.built[-1] == ("books", True)
        reader.open()
        return reader


class NoFromSettings:
    """Every method of the contract but the class method that builds it."""


def test_a_store_class_missing_the_contract_is_refused():
    with pytest.raises(RecrawlSettingError, match=r"RECRAWL_STORE_CLASS=.*lacks .*side_get"):
        open_store(Settings({"RECRAWL_STORE_CLASS": "builtins.dict"}))


@pytest.mark.parametrize(
    "path, said",
    [
        ("no_such_module_anywhere.Store", "cannot load it: No module named"),
        (f"{__name__}.NoSuchClass", "cannot load it: module .* has no attribute 'NoSuchClass'"),
        ("Store", "cannot load it: 'Store' is not a full class path"),
        (f"{__name__}.NoFromSettings", "lacks .*from_settings"),
    ],
)
def test_a_bad_store_class_is_one_line_naming_the_setting(path, said):
    with pytest.raises(RecrawlSettingError, match=rf"^RECRAWL_STORE_CLASS='{path}'.*{said}"):
        open_store(Settings({"RECRAWL_STORE_CLASS": path}), "books")


class DeclaresTooMuch(SqliteUnderAnotherName):
    """Says it is shared and fenced, and has none of what that promises."""

    capabilities = frozenset({"file", "fenced", "telepathy"})


def test_a_store_declaring_a_capability_it_lacks_is_refused(tmp_path):
    settings = _third_party_settings(tmp_path, RECRAWL_STORE_CLASS=f"{__name__}.DeclaresTooMuch")
    with pytest.raises(RecrawlSettingError) as refused:
        open_store(settings, "books")
    message = str(refused.value)
    assert message.startswith("RECRAWL_STORE_CLASS=")
    assert "capability 'telepathy' is unknown" in message
    assert "capability 'fenced' lacks check_epoch, epoch, hold, holders, on_lost" in message


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()  # noqa: SIM115


def test_recrawl_report_builds_a_third_party_store_for_its_spider_read_only(tmp_path):
    """The toy backend learns whose history it holds (the spider's name picks its file)
    and that recrawl-report opened it for reading only; the report leaves it as it was."""
    project = make_project(
        tmp_path,
        f"RECRAWL_STORE_CLASS = '{__name__}.SqliteUnderAnotherName'\n"
        f"MY_STORE_DIR = {str(tmp_path)!r}\n",
    )
    with SqliteUnderAnotherName(tmp_path / "pages.sqlite3") as store:
        store.claim("pages")
        for cycle in range(1, 3):
            store.advance_cycle()
            for i in range(1, 4):
                store.record(Visit(fp(i), f"http://h/{i}", float(cycle), 200, changed=cycle > 1))
    digest, files = _digest(tmp_path / "pages.sqlite3"), sorted(os.listdir(tmp_path))
    SqliteUnderAnotherName.built.clear()
    run = scrapy_in_process(project, "recrawl-report", "--spider", "pages", "--format", "json")
    assert run.returncode == 0, run.stderr
    assert SqliteUnderAnotherName.built == [("pages", True)]
    assert "pages.sqlite3" in run.stdout  # the report names the store it read
    assert _digest(tmp_path / "pages.sqlite3") == digest  # nothing written to it
    # no other store made; at most a WAL reader's files beside it (sqlite_readonly.py)
    assert set(os.listdir(tmp_path)) - set(files) <= {"pages.sqlite3-wal", "pages.sqlite3-shm"}


class TestRedisStoreSharded(StoreContract):
    """16 shards (RECRAWL_REDIS_SHARDS's default): a URL's id comes from its shard's
    counter, so the contract's examples are read with the ids the store gave."""

    def make_store(self, tmp_path, request):
        server = request.getfixturevalue("redis_db")
        store = RedisHistoryStore(server.url, shards=16)
        store.open()
        return store

    def make_read_only(self, store, tmp_path, request):
        server = request.getfixturevalue("redis_db")
        reader = RedisHistoryStore(server.url, shards=16, read_only=True)
        reader.open()
        return reader


class TestRedisClusterStore(StoreContract):
    """The one code path on a real three-master Redis Cluster (tests/redis_cluster.py):
    every script's keys in one slot, the shards spread over the nodes."""

    def make_store(self, tmp_path, request):
        cluster = request.getfixturevalue("redis_cluster_db")
        store = RedisHistoryStore(client=cluster.client(), key="books:history", shards=16)
        store.open()
        return store

    def make_read_only(self, store, tmp_path, request):
        cluster = request.getfixturevalue("redis_cluster_db")
        reader = RedisHistoryStore(
            client=cluster.client(), key="books:history", shards=16, read_only=True
        )
        reader.open()
        return reader
