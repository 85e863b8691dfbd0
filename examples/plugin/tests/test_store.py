"""The per-spider SQLite backend passes the store contract suite of scrapy_recrawl.testing."""

from __future__ import annotations

from pathlib import Path

import pytest
from recrawl_example_plugin import PerSpiderSqliteStore
from scrapy.settings import Settings

from scrapy_recrawl.api import HistoryStore, HistoryStoreError, Visit
from scrapy_recrawl.testing import StoreContract, fp


class TestPerSpiderStore(StoreContract):
    """The whole contract: one subclass that says how to make an open, empty store."""

    def make_store(self, tmp_path: Path, request: pytest.FixtureRequest) -> HistoryStore:
        settings = Settings({"EXAMPLE_STORE_DIR": str(tmp_path / "stores")})
        store = PerSpiderSqliteStore.from_settings(settings, spider="news", read_only=False)
        store.open()
        return store

    def make_read_only(
        self, store: HistoryStore, tmp_path: Path, request: pytest.FixtureRequest
    ) -> HistoryStore:
        """The same spider's store opened again for reading only, as an offline command
        (``scrapy recrawl-report``) opens it."""
        settings = Settings({"EXAMPLE_STORE_DIR": str(tmp_path / "stores")})
        reader = PerSpiderSqliteStore.from_settings(settings, spider="news", read_only=True)
        reader.open()
        return reader


def test_each_spider_has_a_file_of_its_own(tmp_path: Path) -> None:
    settings = Settings({"EXAMPLE_STORE_DIR": str(tmp_path)})
    for spider in ("news", "shop"):
        store = PerSpiderSqliteStore.from_settings(settings, spider=spider)
        store.open()
        store.record(Visit(fp(1), f"http://{spider}/", 0.0, 200))
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite3") == [
        "news.sqlite3",
        "shop.sqlite3",
    ]
    reader = PerSpiderSqliteStore.from_settings(settings, spider="shop", read_only=True)
    reader.open()
    try:
        rec = reader.get(fp(1))
        assert reader.read_only and len(reader) == 1 and rec is not None
        assert reader.urls([rec.id]) == ["http://shop/"]
    finally:
        reader.close()


def test_the_directory_setting_is_required() -> None:
    with pytest.raises(HistoryStoreError, match="EXAMPLE_STORE_DIR"):
        PerSpiderSqliteStore.from_settings(Settings())


def test_the_crawl_builds_it_from_recrawl_store_class(tmp_path: Path) -> None:
    from scrapy_recrawl.history import open_store

    settings = Settings(
        {
            "RECRAWL_STORE_CLASS": "recrawl_example_plugin.PerSpiderSqliteStore",
            "EXAMPLE_STORE_DIR": str(tmp_path),
        }
    )
    store = open_store(settings)
    assert type(store) is PerSpiderSqliteStore
