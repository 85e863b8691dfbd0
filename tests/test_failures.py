"""Only real observations count: failed downloads back off and end gone, a 304 with
no stored copy is fetched again (issue 16, item 7)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from scrapy_recrawl.core.cycle import CycleConfig, plan_cycle
from scrapy_recrawl.core.selection import backed_off, candidate_mask, select_recrawls
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.scoring import Scorer

from .helpers import LocalSite, Page, history_arrays, run_crawl


def _arrays(failures, last_failure, cycle, gone=None):
    size = len(failures)
    return history_arrays(
        np.ones(size),
        np.zeros(size),
        np.zeros(size),
        gone=gone,
        cycle=cycle,
        failures=np.asarray(failures, dtype=np.int64),
        last_failure_cycle=np.asarray(last_failure, dtype=np.int64),
    )


# -- the back-off rule, once, in the cycle core -----------------------------------------


@pytest.mark.parametrize(
    ("failures", "skipped_cycles"),
    [(0, []), (1, [11]), (2, [11, 12]), (3, [11, 12, 13, 14]), (40, list(range(11, 30)))],
)
def test_k_failed_cycles_skip_the_next_2_to_the_k_minus_1(failures, skipped_cycles):
    for cycle in range(11, 30):  # the last failure was in cycle 10
        a = _arrays([failures], [10], cycle)
        assert bool(backed_off(a.columns, cycle)[0]) == (cycle in skipped_cycles), cycle


def test_backed_off_urls_are_no_candidates_in_either_selection_path():
    a = _arrays([0, 1, 2, 1, 0], [-1, 10, 10, 8, 3], cycle=11, gone=[0, 0, 0, 0, 1])
    live, waiting = candidate_mask(a)
    assert live.tolist() == [True, False, False, True, False] and waiting == 2
    sel = select_recrawls(a, Scorer.from_spec("age"), None, now=0.0)
    assert sorted(sel.ids.tolist()) == [1, 4] and sel.backed_off == 2

    class TakeAll:  # a selector plug-in (plan mode): it is handed the same candidates
        def select(self, arrays, budget, candidates, pending_new):
            self.seen = candidates.copy()
            ids = arrays.ids[candidates]
            sel = select_recrawls(arrays, Scorer.from_spec("age"), 0, now=0.0)
            sel.ids, sel.scores = ids, np.zeros(len(ids))
            return sel, 0

    selector = TakeAll()
    plan = plan_cycle(
        a, CycleConfig(budget=5, warmup_cycles=0), Scorer.from_spec("age"), pending_new=0,
        selector=selector,
    )  # fmt: skip
    assert selector.seen.tolist() == live.tolist() and plan.selection.backed_off == 2


def test_a_history_without_failure_columns_backs_nothing_off():
    a = _arrays([0, 0], [-1, -1], cycle=3)
    del a.columns["failures"], a.columns["last_failure_cycle"]
    assert backed_off(a.columns, 3).tolist() == [False, False]


# -- real crawls --------------------------------------------------------------------------


def _closed_port() -> int:
    """A local port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_failing_urls_back_off_then_go_gone_and_a_success_resets(tmp_path):
    dead = f"http://127.0.0.1:{_closed_port()}/dead"
    small = Page(b"<html><body><p>small page, fits the size limit</p></body></html>")
    big = Page(b"<html><body>" + b"<p>too big</p>" * 2000 + b"</body></html>")
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_WARMUP_CYCLES": 100,  # every live candidate, every cycle
        "DOWNLOAD_MAXSIZE": 10_000,
        "RETRY_ENABLED": True,  # two retries of each failure: still one failed cycle
        "RETRY_TIMES": 2,
    }
    fetched: dict[str, list[int]] = {"dead": [], "big": [], "flaky": []}
    with LocalSite() as site:
        links = "".join(f'<a href="{h}">x</a>' for h in (dead, "/big", "/flaky"))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        site.pages["/big"] = big
        site.pages["/flaky"] = big
        results = []
        for cycle in range(1, 8):
            if cycle == 3:
                site.pages["/flaky"] = small  # answers again: its count starts over
            if cycle == 6:
                site.pages["/flaky"] = big
            before = {p: len(site.requests_for(p)) for p in ("/big", "/flaky")}
            result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
            results.append(result["stats"])
            for p in ("/big", "/flaky"):
                if len(site.requests_for(p)) > before[p]:
                    fetched[p[1:]].append(cycle)
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        log = store.visit_log()
        arrays = store.arrays()
        fps = dict(zip(store.urls(arrays.ids), arrays.ids.tolist(), strict=True))
        dead_id = fps[dead]
        dead_cycles = sorted(set(log["cycle"][log["url_id"] == dead_id].tolist()))
        rec = store.get(_fp_of(store, dead_id))
        cols = {int(i): k for k, i in enumerate(arrays.ids)}
        assert rec is not None
        # 1 failed cycle: skip 1; 2: skip 2; 3 (RECRAWL_MAX_FAILURES): gone
        assert dead_cycles == [1, 3, 6] and fetched["big"] == [1, 3, 6]
        assert int((log["url_id"] == dead_id).sum()) == 9  # 3 attempts per cycle, all logged
        assert (log["changed"][log["url_id"] == dead_id] == -1).all()
        assert arrays.columns["gone"][cols[dead_id]] and rec.failures == 3
        big_row = cols[fps[site.url + "/big"]]
        assert arrays.columns["gone"][big_row] and arrays.columns["failures"][big_row] == 3
        flaky_row = cols[fps[site.url + "/flaky"]]
        # failed in 1, skipped in 2, fetched fine in 3, 4, 5, failed in 6, skipped in 7
        assert fetched["flaky"] == [1, 3, 4, 5, 6]
        assert arrays.columns["failures"][flaky_row] == 1
        assert not arrays.columns["gone"][flaky_row]
    # dead: 3 attempts a cycle (retried); over DOWNLOAD_MAXSIZE: 1 (Scrapy does not retry it)
    assert [s.get("recrawl/failed", 0) for s in results] == [5, 0, 4, 0, 0, 5, 0]
    assert [s.get("recrawl/backed_off", 0) for s in results] == [0, 3, 0, 2, 2, 0, 1]
    assert [s.get("recrawl/gone_after_failures", 0) for s in results] == [0, 0, 0, 0, 0, 2, 0]


def _fp_of(store, url_id: int) -> bytes:
    row = store.db.execute("SELECT fingerprint FROM urls WHERE id = ?", (url_id,)).fetchone()
    return bytes(row[0])


@pytest.mark.slow
def test_a_304_with_no_stored_copy_is_fetched_again_and_never_counted(tmp_path):
    """A server answering 304 to requests without validators: six such visits used to
    give n = 6, X = 0 (a page that looks static forever)."""
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
    }
    with LocalSite() as site:
        site.pages["/bare"] = Page(b"", status=304, etag='"e"')
        site.pages["/ok"] = Page(b"<html><body><p>fine</p></body></html>", etag='"v"')
        urls = [site.url + "/bare", site.url + "/ok"]
        stats = [run_crawl(urls, settings, tmp_path)["stats"] for _ in range(3)]
        bare = site.requests_for("/bare")
        ok = site.requests_for("/ok")
    # each crawl: the 304, then one re-fetch, without validators both
    assert len(bare) == 6 and all(r["if_none_match"] is None for r in bare)
    assert [s.get("recrawl/304_without_copy") for s in stats] == [2, 2, 2]
    # a real 304 to our validators still is an unchanged observation (the first crawl's
    # second fetch: the boilerplate pair of the section, docs/detection.md)
    assert [r["if_none_match"] for r in ok] == [None, None, '"v"', '"v"']
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        arrays = store.arrays()
        n = dict(zip(store.urls(arrays.ids), arrays.columns["n"].tolist(), strict=True))
        assert n == {site.url + "/bare": 0, site.url + "/ok": 2}
        log = store.visit_log()
        assert int((log["status"] == 304).sum()) == 3 + 2  # 3 bare visits, 2 real 304s
