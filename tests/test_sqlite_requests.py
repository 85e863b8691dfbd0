"""SqliteHistoryStore.requests(): a cycle's picks read chunk by chunk in id order and
decoded as they are read, each put back in the order asked; buffered requests newer
than the file's, an id asked twice, a value that is not a request."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit


def _visit(i: int, **request) -> Visit:
    return Visit(
        fingerprint=i.to_bytes(20, "big"),
        url=f"https://example.com/{i}",
        time=1000.0 + i,
        status=200,
        request={"url": f"https://example.com/{i}", "meta": {"n": i}, "headers": {}, **request},
    )


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "history.sqlite3")


def test_requests_in_the_order_asked_over_many_chunks(path):
    with SqliteHistoryStore(path) as store:
        for i in range(2500):  # three chunks of bound parameters
            store.record(_visit(i))
        store.flush()
        ids = np.random.default_rng(3).permutation(np.arange(1, 2501))[:2000]
        got = store.requests(np.append(ids, [99999]))
    assert [d and d["meta"]["n"] for d in got] == [int(i) - 1 for i in ids] + [None]
    assert got[0] == {
        "url": f"https://example.com/{ids[0] - 1}",
        "meta": {"n": int(ids[0]) - 1},
        "headers": {},
    }


def test_a_buffered_request_is_newer_than_the_files(path):
    with SqliteHistoryStore(path, flush_every=10_000, flush_seconds=3600) as store:
        store.record(_visit(1))
        store.record(_visit(2))
        store.flush()
        store.record(_visit(2, method="POST"))  # buffered: not in the file yet
        store.record(_visit(3))  # a new URL, buffered only
        got = store.requests([3, 2, 1])
    assert [d["meta"]["n"] for d in got] == [3, 2, 1]
    assert got[1]["method"] == "POST" and "method" not in got[2]


def test_an_id_asked_twice_gets_two_requests_of_its_own(path):
    with SqliteHistoryStore(path) as store:
        store.record(_visit(1))
        store.record(_visit(2))
        store.flush()
        got = store.requests([2, 1, 2, 2])
    assert [d["meta"]["n"] for d in got] == [2, 1, 2, 2]
    for a in (got[0], got[2]):
        assert a == got[3] and a is not got[3]
        assert a["meta"] is not got[3]["meta"] and a["headers"] is not got[3]["headers"]
    got[0]["meta"]["n"] = 7
    assert got[2]["meta"]["n"] == got[3]["meta"]["n"] == 2


def test_a_stored_value_that_is_not_a_request_is_skipped_and_counted(path, caplog):
    with SqliteHistoryStore(path) as store:
        for i in range(3):
            store.record(_visit(i))
    db = sqlite3.connect(path)
    db.execute("UPDATE requests SET request = x'c1' WHERE url_id = 2")
    db.commit()
    db.close()
    with SqliteHistoryStore(path) as store:
        got = store.requests([3, 2, 1])
        assert [d and d["meta"]["n"] for d in got] == [2, None, 0]
        assert store.unreadable_values == 1
    assert "requests row 2 of the history store" in caplog.text
