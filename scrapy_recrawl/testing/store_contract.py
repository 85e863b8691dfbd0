"""The store contract as tests: every backend passes the same suite.

As Scrapy's tests/test_downloadermiddleware_httpcache.py does for its cache
storages: :class:`StoreContract` holds every behaviour the middleware, the
schedulers and the plug-ins rely on (scrapy_recrawl.history.base.HistoryStore);
a backend's test is a short subclass that says how to make an open, empty store.
A third-party backend can subclass it too (docs/plugins.md):
:meth:`StoreContract.make_store` (an open, empty store) and
:meth:`StoreContract.make_read_only` (the same store, opened for reading only) are all
it says. The tests take the store as ``Any``: they call it as the crawl does, and read
a record they just wrote without a None check.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scrapy_recrawl.history import HistoryStore, HistoryStoreError, Visit
from scrapy_recrawl.history.base import (
    CAPABILITIES,
    capability_gaps,
    fenced,
    file_store,
    read_ahead,
)


def fp(i: int) -> bytes:
    return i.to_bytes(20, "big")


class StoreContract:
    """Subclass and implement :meth:`make_store` (an open, empty store)."""

    @pytest.fixture
    def store(self, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[HistoryStore]:
        store = self.make_store(tmp_path, request)
        yield store
        store.close()

    def make_store(
        self, tmp_path: Path, request: pytest.FixtureRequest
    ) -> HistoryStore:  # pragma: no cover
        raise NotImplementedError

    def make_read_only(
        self, store: Any, tmp_path: Path, request: pytest.FixtureRequest
    ) -> HistoryStore:  # pragma: no cover
        """``store``'s data opened again, for reading only (as the offline commands
        open it), while ``store`` stays open."""
        raise NotImplementedError

    # -- what the crawl and the commands read of any store ------------------------

    def test_is_a_history_store(self, store: Any) -> None:
        assert isinstance(store, HistoryStore)
        assert store.cycle == 0 and len(store) == 0 and store.location
        assert isinstance(store.label, str) and store.label  # a short name for messages
        assert store.read_only is False and isinstance(store.store_bodies, bool)
        assert store.buffered_visits == 0 and store.unreadable_values == 0

    def test_capabilities_are_declared_and_what_they_promise_is_there(self, store: Any) -> None:
        """Declared, never probed: a frozenset of known names, and each declared one's
        members present (the check RECRAWL_STORE_CLASS's loader makes too)."""
        assert isinstance(store.capabilities, frozenset)
        assert store.capabilities <= CAPABILITIES.keys()
        assert capability_gaps(store) == []
        assert (fenced(store) is store) == ("fenced" in store.capabilities)
        assert (file_store(store) is store) == ("file" in store.capabilities)
        assert (read_ahead(store) is store) == ("read_ahead" in store.capabilities)

    def test_reading_ahead_changes_nothing_read(self, store: Any) -> None:
        """A store declaring ``"read_ahead"``: records and bodies read after reading
        ahead (buffered, flushed, unknown ids among them) are those read without."""
        reader = read_ahead(store)
        if reader is None:
            pytest.skip("the store does not declare read_ahead")
        ids = [
            store.record(
                Visit(fp(i), f"http://h/{i}", float(i), 200, signature=b"s%d" % i, body=b"b%d" % i)
            ).id
            for i in range(1, 4)
        ]
        store.flush()
        store.record(Visit(fp(2), "http://h/2", 9.0, 200, body=b"new", changed=True))
        reader.read_ahead(np.array([*ids, max(ids) + 100], dtype=np.int64))
        for i, visits, body in ((1, 1, b"b1"), (2, 2, b"new"), (3, 1, b"b3")):
            rec = store.get(fp(i))
            assert rec is not None and (rec.visits, rec.signature) == (visits, b"s%d" % i)
            assert store.body(fp(i)).body == body
        assert store.get(fp(7)) is None

    def test_buffered_visits_count_what_is_not_written_yet(self, store: Any) -> None:
        for i in range(1, 3):
            store.record(Visit(fp(i), f"http://h/{i}", float(i), 200))
        assert 0 <= store.buffered_visits <= 2
        store.flush()
        assert store.buffered_visits == 0

    def test_a_read_only_store_reads_and_refuses_every_write(
        self, store: Any, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        store.record(Visit(fp(1), "http://h/a", 1.0, 200))
        store.claim("news")
        store.flush()
        reader = self.make_read_only(store, tmp_path, request)
        try:
            assert reader.read_only is True
            assert reader.knows(fp(1)) and len(reader) == 1 and reader.owner() == "news"
            writes = {
                "record": lambda: reader.record(Visit(fp(2), "http://h/b", 2.0, 200)),
                "advance_cycle": reader.advance_cycle,
                "claim": lambda: reader.claim("blog"),
                "push_frontier": lambda: reader.push_frontier([(fp(3), {"url": "http://h/c"}, 0)]),
                "side_put": lambda: reader.side_put("plugin_a", [(1, b"x")]),
                "side_push": lambda: reader.side_push("bags", 1, b"x", 2),
                "clear": reader.clear,
            }
            for name, write in writes.items():
                with pytest.raises(HistoryStoreError) as refused:
                    write()
                assert reader.location in str(refused.value), name  # it names the store
        finally:
            reader.close()
        assert len(store) == 1 and store.cycle == 0 and store.owner() == "news"
        assert not store.knows(fp(2)) and store.frontier_size() == 0
        assert list(store.side_items("plugin_a")) == []

    # -- the record of a URL -----------------------------------------------------

    def test_a_first_visit_makes_a_record_with_the_next_id(self, store: Any) -> None:
        a = store.record(Visit(fp(1), "http://h/a", 10.0, 200))
        b = store.record(Visit(fp(2), "http://h/b", 11.0, 200))
        # ids are given in order (1, 2 in SQLite; a sharded Redis counts per shard)
        assert 1 <= a.id != b.id >= 1 and len(store) == 2
        assert store.get(fp(1)).id == a.id
        assert store.knows(fp(1)) and not store.knows(fp(3))
        rec = store.get(fp(2))
        assert rec is not None and rec.url == "http://h/b" and rec.visits == 1 and rec.n == 0

    def test_observations_update_the_estimators(self, store: Any) -> None:
        store.record(Visit(fp(1), "http://h/a", 0.0, 200))
        for t, changed in enumerate((True, False, True), start=1):
            store.advance_cycle()
            store.record(Visit(fp(1), "http://h/a", float(t), 200, changed=changed))
        rec = store.get(fp(1))
        assert (rec.n, rec.X, rec.visits) == (3, 2, 4)
        assert rec.last_visit_cycle == 3 and rec.last_change_cycle == 3

    def test_validators_requests_and_bodies_come_back(self, store: Any) -> None:
        request = {"url": "http://h/a", "method": "GET", "meta": {"tag": "kept"}}
        store.record(
            Visit(
                fp(1), "http://h/a", 1.0, 200, etag='"v1"', last_modified="Mon", request=request,
                body=b"<html>x</html>", headers={"Content-Type": ["text/html"]},
            )
        )  # fmt: skip
        store.flush()
        rec = store.get(fp(1))
        assert rec.etag == '"v1"' and rec.last_modified == "Mon"
        assert store.requests(np.array([rec.id]))[0]["meta"] == {"tag": "kept"}
        body = store.body(fp(1))
        assert body is not None and body.body == b"<html>x</html>" and body.status == 200
        assert store.urls(np.array([rec.id])) == ["http://h/a"]

    def test_urls_of_an_id_the_store_never_gave_raise_keyerror(self, store: Any) -> None:
        rec = store.record(Visit(fp(1), "http://h/a", 1.0, 200))
        store.flush()
        with pytest.raises(KeyError):
            store.urls(np.array([rec.id, 10_000_019]))

    def test_arrays_have_every_column_by_id(self, store: Any) -> None:
        ids = [store.record(Visit(fp(i), f"http://h/{i}", float(i), 200)).id for i in range(1, 6)]
        store.record(Visit(fp(3), "http://h/3", 9.0, 404, gone=True))
        store.flush()
        arrays = store.arrays()
        assert arrays.ids.tolist() == sorted(ids) and arrays.cycle == store.cycle
        for name in ("n", "X", "sad", "aad_sum", "gad", "last_visit_cycle", "gone", "failures"):
            assert len(arrays.columns[name]) == 5, name
        gone = dict(zip(arrays.ids.tolist(), arrays.columns["gone"].tolist(), strict=True))
        assert [gone[i] for i in ids] == [False, False, True, False, False]

    def test_arrays_give_the_first_cycle_and_the_last_change_cycle(self, store: Any) -> None:
        """first_cycle: the cycle a URL was first recorded in; last_change_cycle: the
        cycle of the visit that last saw it changed (-1: none) -- what the `lam` and
        `tc` terminals read, with the simulator's meaning (core/simulate.py)."""
        store.record(Visit(fp(1), "http://h/a", 0.0, 200))
        store.advance_cycle()
        store.record(Visit(fp(2), "http://h/b", 1.0, 200))
        store.record(Visit(fp(1), "http://h/a", 1.0, 200, changed=True))
        for cycle in (2, 3):
            store.advance_cycle()
            store.record(Visit(fp(1), "http://h/a", float(cycle), 200, changed=False))
            store.record(Visit(fp(2), "http://h/b", float(cycle), 200, changed=False))
        store.advance_cycle()
        store.record(Visit(fp(3), "http://h/c", 4.0, 0))  # a failed first download
        store.flush()
        arrays = store.arrays()
        ids = [store.get(fp(i), signature=False).id for i in (1, 2, 3)]
        row = {int(u): r for r, u in enumerate(arrays.ids)}
        first = arrays.columns["first_cycle"]
        last_change = arrays.columns["last_change_cycle"]
        assert [int(first[row[i]]) for i in ids] == [0, 1, 4]
        assert [int(last_change[row[i]]) for i in ids] == [1, -1, -1]
        assert first.dtype == last_change.dtype == np.int64

    def test_the_visit_log_and_its_cycles(self, store: Any) -> None:
        a = store.record(Visit(fp(1), "http://h/a", 0.0, 200)).id
        for cycle in range(1, 4):
            store.advance_cycle()
            store.record(Visit(fp(1), "http://h/a", float(cycle), 200, changed=cycle % 2 == 1))
            b = store.record(Visit(fp(2), "http://h/b", float(cycle), 500)).id
        log = store.visit_log()
        assert log["url_id"].tolist() == [a, a, b, a, b, a, b]
        assert log["changed"].tolist() == [-1, 1, -1, 0, -1, 1, -1]
        recent = store.visit_log(since_cycle=2)
        assert recent["cycle"].tolist() == [2, 2, 3, 3]
        assert store.visit_log(url_ids=[b])["status"].tolist() == [500, 500, 500]
        np.testing.assert_array_equal(
            store.change_window(np.array([a, b]), 4),
            [[1, 0, 1, np.nan], [np.nan] * 4],
        )

    def test_failed_downloads_count_failed_cycles_and_an_answer_resets_them(
        self, store: Any
    ) -> None:
        """Schema version 4: status 0 is a failed download; attempts in one cycle are one
        failure (history/state.py: fold_failure); any answer resets the count."""
        a = store.record(Visit(fp(1), "http://h/a", 0.0, 200)).id
        b = store.record(Visit(fp(2), "http://h/never", 0.0, 0)).id  # a first fetch that failed
        rec = store.get(fp(2))
        assert (rec.failures, rec.last_failure_cycle, rec.last_visit_cycle) == (1, 0, -1)
        for cycle in (1, 2):
            store.advance_cycle()
            for attempt in range(3):  # Scrapy's retries within the cycle
                rec = store.record(Visit(fp(1), "http://h/a", cycle + attempt / 10, 0))
            assert (rec.failures, rec.last_failure_cycle) == (cycle, cycle)
        assert not rec.gone and rec.n == 0 and rec.last_visit_cycle == 0  # no observation
        store.record(Visit(fp(1), "http://h/a", 3.0, 0, gone=True, cycle=5))
        store.flush()
        arrays = store.arrays()
        order = [arrays.ids.tolist().index(i) for i in (a, b)]
        assert arrays.columns["failures"][order].tolist() == [3, 1]
        assert arrays.columns["last_failure_cycle"][order].tolist() == [5, 0]
        assert arrays.columns["gone"][order].tolist() == [True, False]
        store.advance_cycle()
        rec = store.record(Visit(fp(1), "http://h/a", 4.0, 503))  # an answer, if a bad one
        assert rec.failures == 0 and rec.last_failure_cycle == 5
        rec = store.record(Visit(fp(2), "http://h/never", 4.0, 200))
        assert (rec.failures, rec.gone, rec.last_visit_cycle) == (0, False, 3)
        store.flush()
        assert store.arrays().columns["failures"].tolist() == [0, 0]
        assert store.visit_log(url_ids=[a])["changed"].tolist() == [-1] * 9

    def test_cycles_advance(self, store: Any) -> None:
        assert store.advance_cycle() == 1 and store.advance_cycle() == 2 and store.cycle == 2

    # -- the frontier ----------------------------------------------------------

    def test_the_frontier_keeps_priority_then_age_and_no_duplicates(self, store: Any) -> None:
        items = [(fp(i), {"url": f"http://h/{i}"}, p) for i, p in ((1, 0), (2, 5), (3, 0))]
        assert store.push_frontier(items) == 3
        assert store.push_frontier(items[:1]) == 0 and store.frontier_size() == 3
        assert [d["url"] for d in store.pop_frontier(2)] == ["http://h/2", "http://h/1"]
        assert [d["url"] for d in store.pop_frontier(5)] == ["http://h/3"]
        assert store.frontier_size() == 0 and store.pop_frontier(1) == []

    # -- side storage --------------------------------------------------------------

    def test_a_store_remembers_the_spider_that_claimed_it_first(self, store: Any) -> None:
        assert store.owner() is None  # a new store is nobody's yet
        assert store.claim("news") == "news"
        assert store.claim("blog") == "news"  # the first claim wins; the owner is returned
        assert store.owner() == "news"

    def test_clear_forgets_the_owner(self, store: Any) -> None:
        store.claim("news")
        store.record(Visit(fp(1), "http://h/a", 0.0, 200))
        store.clear()
        assert store.owner() is None  # nobody's, as a new store: the next spider adopts it
        assert store.claim("blog") == "blog" and store.owner() == "blog"

    def test_side_storage_puts_gets_deletes_and_lists(self, store: Any) -> None:
        store.side_put("plugin_a", [(3, b"three"), (1, b"one")])
        store.side_put("plugin_b", [(1, b"other")])
        assert store.side_get("plugin_a", [1, 2, 3]) == [b"one", None, b"three"]
        assert list(store.side_items("plugin_a")) == [(1, b"one"), (3, b"three")]
        store.side_put("plugin_a", [(1, b"uno")])
        store.side_delete("plugin_a", [3, 4])
        assert list(store.side_items("plugin_a")) == [(1, b"uno")]
        assert list(store.side_items("plugin_b")) == [(1, b"other")]
        assert list(store.side_items("empty")) == []

    def test_side_push_keeps_the_newest_and_returns_what_was_there(self, store: Any) -> None:
        assert store.side_push("bags", 7, b"v1", 2) == []
        assert store.side_push("bags", 7, b"v2", 2) == [b"v1"]
        assert store.side_push("bags", 7, b"v3", 2) == [b"v2", b"v1"]
        assert store.side_push("bags", 7, b"", 2) == [b"v3", b"v2"]
        from scrapy_recrawl.history.records import unpack_list

        assert unpack_list(store.side_get("bags", [7])[0]) == [b"", b"v3"]

    @pytest.mark.parametrize("table", ["", "Upper", "1st", "a-b", "x" * 41, "a:b"])
    def test_side_storage_refuses_a_bad_table_name(self, store: Any, table: str) -> None:
        with pytest.raises(ValueError, match="side-storage table"):
            store.side_put(table, [(1, b"x")])

    # -- starting afresh (scrapy recrawl-reset) -------------------------------------

    def test_clear_empties_the_store_and_it_stays_usable(self, store: Any) -> None:
        store.record(Visit(fp(1), "http://h/a", 0.0, 200, body=b"<p>a</p>", headers={}))
        store.advance_cycle()
        store.record(Visit(fp(1), "http://h/a", 1.0, 200, changed=True))
        store.record(Visit(fp(2), "http://h/b", 1.0, 200))  # maybe still buffered
        store.push_frontier([(fp(3), {"url": "http://h/c"}, 0)])
        store.side_put("plugin_a", [(1, b"one")])
        store.side_push("bags", 1, b"v1", 2)
        store.clear()
        assert len(store) == 0 and store.cycle == 0 and store.frontier_size() == 0
        assert not store.knows(fp(1)) and store.get(fp(2)) is None and store.body(fp(1)) is None
        assert len(store.arrays()) == 0 and len(store.visit_log()["url_id"]) == 0
        assert list(store.side_items("plugin_a")) == [] and store.side_get("bags", [1]) == [None]
        # a new history starts again: its first id (1 in SQLite), cycle 1
        assert store.advance_cycle() == 1
        rec = store.record(Visit(fp(9), "http://h/z", 5.0, 200))
        store.flush()
        assert len(store) == 1 and store.visit_log()["cycle"].tolist() == [1]
        assert store.arrays().ids.tolist() == [rec.id] and store.urls([rec.id]) == ["http://h/z"]
