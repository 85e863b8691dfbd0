"""Stores written by earlier releases open and upgrade, losing nothing.

The fixtures in tests/fixtures/ (see its README.md): schema version 1, written by
scrapy-recrawl 0.1.0 with make_v1_stores.py; schema version 2, written by the
release before stores knew their spider (commit d96f17e) with make_v2_stores.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.change.bow import bag_from_text
from scrapy_recrawl.content.store import BagStore
from scrapy_recrawl.estimate.probes import ProbeStore
from scrapy_recrawl.history import SCHEMA_VERSION, HistoryStoreError, SqliteHistoryStore, Visit
from scrapy_recrawl.history.ownership import claim_store
from scrapy_recrawl.history.request_scrub import scrub_previous

from .fixtures.v3_requests import request as _v3_request
from .fixtures.v5_requests import SECRETS as V5_SECRETS
from .fixtures.v5_requests import spider_part as v5_spider_part

FIXTURES = Path(__file__).parent / "fixtures"


def _expected_bags(u: int) -> list:
    # as make_v1_stores.py wrote them, newest first, three kept
    return [bag_from_text(f"page {u} words version {v} " * (v + 1)) for v in (2, 1, 0)]


def _check_history(store) -> None:
    arrays = store.arrays()
    assert len(arrays) == 3 and arrays.cycle == 3
    assert arrays.columns["n"].tolist() == [2, 2, 2]
    log = store.visit_log()
    assert len(log["url_id"]) == 9
    assert store.requests(np.array([1]))[0]["url"] == "http://h/0"
    bags = BagStore(store, keep=3, window=3)
    for u in (1, 2):
        assert bags.bags(u) == _expected_bags(u)
    # the last visit measured D1, D2 against the two older bags (no third yet)
    assert np.isfinite(bags.d_columns(np.array([1, 2]))[:, :2]).all()
    assert bags.bags(3) == []


def test_a_version_1_sqlite_store_upgrades(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v1.sqlite3", path)
    with SqliteHistoryStore(path) as store:
        _check_history(store)
        probes = ProbeStore(store)
        active = probes.active()
        assert [st.url_id for st in active] == [1]
        assert active[0].first_sig == b"sig-first" and active[0].prev_sig == b"sig-prev"
        np.testing.assert_array_equal(active[0].features, np.arange(64, dtype=float))
        ids, baskets = probes.baskets()
        assert ids.tolist() == [2] and baskets.tolist() == [3]
        # kept up to version 3, then dropped by version 4: models were pickles
        assert store.side_get("basket_model", [1]) == [None]
    db = sqlite3.connect(path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    db.close()
    assert int(version) == SCHEMA_VERSION == 8
    assert not tables & {"content_bags", "basket_probes", "basket_model"}


def test_a_failed_migration_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    from scrapy_recrawl.history import sqlite_schema

    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v1.sqlite3", path)

    def broken(db):
        db.execute("DROP TABLE content_bags")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setitem(sqlite_schema.MIGRATIONS, 1, broken)
    with pytest.raises(Exception, match="disk I/O error"):
        SqliteHistoryStore(path).open()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM content_bags").fetchone()[0] == 2
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    db.close()


# -- schema version 2: the store did not know its spider ------------------------------


def _check_v2(store) -> None:
    arrays = store.arrays()
    assert len(arrays) == 3 and arrays.cycle == 3 and store.cycle == 3
    assert arrays.columns["n"].tolist() == [2, 2, 2]
    assert arrays.columns["X"].tolist() == [1, 1, 1]
    assert len(store.visit_log()["url_id"]) == 9
    assert store.requests(np.array([2]))[0] == {
        "url": "http://h/1",
        "method": "GET",
        "callback": "parse_page",
    }
    assert store.frontier_size() == 1
    bags = BagStore(store, keep=3, window=3)
    for u in (1, 2):
        assert bags.bags(u) == _expected_bags(u)
    active = ProbeStore(store).active()
    assert [st.url_id for st in active] == [1] and active[0].prev_sig == b"sig-prev"
    np.testing.assert_array_equal(active[0].features, np.arange(8, dtype=float))
    assert store.side_get("basket_model", [1]) == [None]  # dropped by version 4


def test_a_version_2_sqlite_store_upgrades_and_is_adopted_by_its_first_spider(tmp_path, caplog):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v2.sqlite3", path)
    with SqliteHistoryStore(path) as store:
        _check_v2(store)
        assert store.owner() is None  # written before stores knew their spider
        with caplog.at_level("WARNING"):
            claim_store(store, "news", {})
        assert store.owner() == "news"
    adopted = [r.getMessage() for r in caplog.records if "adopts" in r.getMessage()]
    assert len(adopted) == 1 and "'news'" in adopted[0] and str(path) in adopted[0]
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    db.close()
    caplog.clear()
    with SqliteHistoryStore(path) as store:
        _check_v2(store)
        claim_store(store, "news", {})  # its own: nothing said
        assert not caplog.records
        with pytest.raises(HistoryStoreError, match="belongs to the spider 'news', not 'blog'"):
            claim_store(store, "blog", {})
        claim_store(store, "blog", {"RECRAWL_SHARED_STORE": True})  # shared on purpose
        assert store.owner() == "news"
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "RECRAWL_SHARED_STORE" in errors[0].getMessage()


def test_a_new_store_is_claimed_silently(tmp_path, caplog):
    with SqliteHistoryStore(tmp_path / "new.sqlite3") as store, caplog.at_level("INFO"):
        claim_store(store, "news", {})
        assert store.owner() == "news"
    assert not caplog.records


# -- schema version 3: requests and the basket model were pickles ----------------------


class _Marker:
    """A pickle that would create a file when unpickled (os.system)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.path}",))


def _evil(path) -> bytes:
    import pickle

    return pickle.dumps({"url": "http://h/evil", "meta": {"x": _Marker(path)}}, protocol=4)


def _check_v3(store, caplog) -> None:
    assert len(store) == 3 and store.cycle == 3
    assert store.arrays().columns["n"].tolist() == [2, 2, 2]
    # kept as data by version 4; what the downloader middlewares added (the Accept
    # header) and the cookies dropped by version 6 (history/request_scrub.py)
    want = [scrub_previous(_v3_request(u)) for u in range(3)]
    assert store.requests(np.array([1, 2, 3])) == want
    assert all("cookies" not in d and b"Accept" not in d["headers"] for d in want)
    assert want[0]["cb_kwargs"] == {"n": 0} and want[0]["headers"] == {b"X-Page": [b"0"]}
    assert store.owner() == "books"
    assert store.side_get("basket_model", [1]) == [None]
    dropped = [r.getMessage() for r in caplog.records if "basket model" in r.getMessage()]
    assert len(dropped) == 1 and "recrawl-baskets" in dropped[0] and "pickle" in dropped[0]
    assert ProbeStore(store).active()[0].prev_sig == b"sig-prev"
    assert BagStore(store, keep=3, window=3).bags(1) == _expected_bags(1)
    assert store.pop_frontier(10) == [scrub_previous(_v3_request(9))]


def test_a_version_3_sqlite_store_keeps_its_requests_as_data(tmp_path, caplog):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v3.sqlite3", path)
    with caplog.at_level("WARNING"), SqliteHistoryStore(path) as store:
        _check_v3(store, caplog)
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    blobs = [r[0] for r in db.execute("SELECT request FROM requests")]
    db.close()
    assert blobs and not any(b.startswith(b"\x80") for b in blobs)  # no pickle left


def test_a_pickle_needing_code_is_dropped_by_the_migration_never_run(tmp_path, caplog):
    marker = tmp_path / "ran"
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v3.sqlite3", path)
    db = sqlite3.connect(path)
    db.execute("UPDATE requests SET request = ? WHERE url_id = 3", (_evil(marker),))
    db.execute("UPDATE frontier SET request = ?", (_evil(marker),))
    db.commit()
    db.close()
    for store in [SqliteHistoryStore(path)]:
        caplog.clear()
        with caplog.at_level("WARNING"), store:
            assert store.requests(np.array([1, 2, 3])) == [
                scrub_previous(_v3_request(u)) for u in (0, 1)
            ] + [None]
            assert store.frontier_size() == 0 and store.pop_frontier(10) == []
            assert store.urls(np.array([3])) == ["http://h/2"]  # the URL stays
        said = [r.getMessage() for r in caplog.records if "needed code" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("recrawl: 2 stored request(s)")
    assert not marker.exists()


# -- schema version 4: failed downloads are counted ------------------------------------


def test_a_version_3_sqlite_store_gains_failure_counts_and_keeps_every_row(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v3.sqlite3", path)
    db = sqlite3.connect(path)
    before = db.execute("SELECT * FROM urls ORDER BY id").fetchall()
    visits = db.execute("SELECT * FROM visits ORDER BY id").fetchall()
    db.close()
    assert len(before) == 3
    with SqliteHistoryStore(path) as store:
        assert store.owner() == "books" and store.cycle == 3
        arrays = store.arrays()
        assert arrays.columns["failures"].tolist() == [0, 0, 0]
        assert arrays.columns["last_failure_cycle"].tolist() == [-1, -1, -1]
        assert arrays.columns["n"].tolist() == [2, 2, 2]
        rec = store.record(Visit(bytes([0]) * 20, "http://h/0", 2000.0, 0))
        assert (rec.failures, rec.last_failure_cycle, rec.n) == (1, 3, 2)
    db = sqlite3.connect(path)
    # the change window (version 7) is the last column: the columns before it here
    after = [r[:-1] for r in db.execute("SELECT * FROM urls ORDER BY id")]
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert db.execute("SELECT * FROM visits ORDER BY id").fetchall()[: len(visits)] == visits
    db.close()
    # every old column as it was (the visit above changed row 1's visits, status, failures)
    assert [r[:-2] for r in after[1:]] == before[1:] and [r[-2:] for r in after[1:]] == [
        (0, -1)
    ] * 2


# -- schema version 6: no credential kept at rest -----------------------------------


def _v5_ids(store) -> list[int]:
    return [store.get(bytes([u]) * 20, signature=False).id for u in range(4)]


def _secrets_in(data: bytes) -> list[bytes]:
    return [s for s in V5_SECRETS if s in data]


def _check_v5(store) -> None:
    """What version 6 keeps of the requests version 5 stored (tests/fixtures/v5_requests):
    the spider's own header and meta, never a credential, cookie, User-Agent, timeout
    or proxy of the crawl that stored it."""
    assert len(store) == 4 and store.cycle == 3 and store.owner() == "books"
    assert store.requests(_v5_ids(store)) == [v5_spider_part(u) for u in range(4)]
    assert store.arrays().columns["n"].tolist() == [2, 2, 2, 2]  # the history kept
    assert store.pop_frontier(5) == [v5_spider_part(8), v5_spider_part(9)]


def test_a_version_5_sqlite_store_is_scrubbed_of_credentials(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v5.sqlite3", path)
    path.chmod(0o644)  # as the previous release created it
    assert _secrets_in(path.read_bytes()) == list(V5_SECRETS)  # the fixture holds them all
    with SqliteHistoryStore(path) as store:
        _check_v5(store)
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    db.close()
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.lock")):
        if name.exists():  # free pages and the WAL included: the file was rebuilt
            assert _secrets_in(name.read_bytes()) == [], name
            assert name.stat().st_mode & 0o077 == 0, name  # its owner's only now


def test_a_version_5_sqlite_store_read_by_an_offline_command_is_scrubbed_in_memory(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v5.sqlite3", path)
    with SqliteHistoryStore(path, read_only=True) as store:
        assert store.requests(np.arange(1, 5)) == [v5_spider_part(u) for u in range(4)]
    assert store.file_schema_version == 5  # the file left as it was, for the next crawl
