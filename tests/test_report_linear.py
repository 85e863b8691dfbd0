"""``recrawl-report`` in one pass over the visit log (issue 29): the grouped report
gives what the per-URL and per-cycle definitions give, and reads the log's columns
a fixed number of times whatever the number of URLs and cycles.

The oracles below are the report's earlier code (a mask over the whole log per URL or
per cycle): the definition, slow but plain. The store is written through its API."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.insight import boilerplate
from scrapy_recrawl.insight.boilerplate import group_median, suspects
from scrapy_recrawl.insight.cycles import cycle_rows, estimate_by_cycle
from scrapy_recrawl.insight.log import VisitLog
from scrapy_recrawl.scoring.freshness import estimate_freshness


def _store(path, urls: int, cycles: int, seed: int = 3) -> None:
    """``urls`` pages over ``cycles`` cycles: some found late, each with its own change
    chance, a fifth boilerplate-like (a change of one element at most visits), with
    errors, failures, 304s and gone pages; several visits of one URL in a cycle."""
    rng = np.random.default_rng(seed)
    found = np.where(rng.random(urls) < 0.3, rng.integers(1, cycles + 1, urls), 1)
    p = rng.random(urls)
    boiler = rng.random(urls) < 0.2
    with SqliteHistoryStore(str(path)) as store:
        seen = np.zeros(urls, dtype=bool)
        for c in range(1, cycles + 1):
            store.advance_cycle()
            for i in np.flatnonzero(found <= c).tolist():
                for _ in range(1 + int(rng.random() < 0.1)):
                    r = rng.random()
                    status = 0 if r < 0.04 else 503 if r < 0.08 else 410 if r < 0.1 else 200
                    if status == 200 and seen[i] and rng.random() < 0.1:
                        status = 304
                    observed = status in (200, 304) and bool(seen[i])
                    changed = None
                    dist = elems = 0
                    if observed:
                        changed = status == 200 and rng.random() < (0.95 if boiler[i] else p[i])
                        if changed:
                            dist = int(rng.integers(1, 6 if boiler[i] else 20))
                            elems = int(rng.integers(0, 2 if boiler[i] else 5))
                    store.record(
                        Visit(
                            f"fp{i}".encode(),
                            f"http://h{i % 4}.example/{i}",
                            1000.0 * c + float(rng.random()),
                            status,
                            changed,
                            distance=dist,
                            modified=elems,
                            attributes=int(changed is True and rng.random() < 0.1),
                            gone=status == 410,
                        )
                    )
                    seen[i] |= status in (200, 304)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("linear") / "history.sqlite3"
    _store(path, 80, 9)
    with SqliteHistoryStore(str(path), read_only=True) as s:
        yield s


# -- the definitions (a mask per URL, per cycle) --------------------------------------


def _suspects_per_url(log: VisitLog) -> list[tuple[int, int, int, float, float]]:
    obs = log.observed
    out = []
    for url_id in np.unique(log["url_id"][obs]).tolist():
        rows = obs & (log["url_id"] == url_id)
        n = int(np.count_nonzero(rows))
        ch = rows & (log["changed"] == 1)
        x = int(np.count_nonzero(ch))
        if n < boilerplate.MIN_OBSERVATIONS or x < boilerplate.MIN_CHANGE_SHARE * n:
            continue
        elements = (
            log["added"][ch] + log["removed"][ch] + log["modified"][ch] + log["attributes"][ch]
        )
        dist, elem = float(np.median(log["distance"][ch])), float(np.median(elements))
        if elem <= boilerplate.MAX_ELEMENTS and dist <= boilerplate.MAX_DISTANCE:
            out.append((url_id, n, x, dist, elem))
    out.sort(key=lambda s: (-s[2], s[0]))
    return out


def _estimates_per_cycle(store, log: VisitLog, cycles) -> dict:
    from functools import partial

    from scrapy_recrawl.core.groups import group_codes
    from scrapy_recrawl.insight.cycles import _ages
    from scrapy_recrawl.last_modified import prior_ages

    ids, row = np.unique(log["url_id"], return_inverse=True)
    urls = store.urls(ids)
    group = group_codes([str(u) for u in urls])
    cyc, obs, good, gone = log["cycle"], log["changed"], log.good, log.gone
    out = {}
    for c in cycles:
        at = cyc <= c
        g = at & good
        n = np.bincount(row[g], weights=(obs[g] >= 0), minlength=ids.size)
        X = np.bincount(row[g], weights=(obs[g] == 1), minlength=ids.size)
        first = np.full(ids.size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, row[at], cyc[at])
        last = np.full(ids.size, -1, dtype=np.int64)
        np.maximum.at(last, row[g], cyc[g])
        last_gone = np.full(ids.size, -1, dtype=np.int64)
        np.maximum.at(last_gone, row[at & gone], cyc[at & gone])
        out[c] = estimate_freshness(
            n, X, first, last, c, known=last_gone < last, group=group,
            prior_age=_ages(partial(prior_ages, store), ids, urls, c),
        )  # fmt: skip
    return out


def _figures_per_cycle(log: VisitLog, c: int) -> dict:
    at = log["cycle"] == c
    changed, status = log["changed"][at], log["status"][at]
    times = log["time"][at]
    return {
        "fetched": int(np.count_nonzero(at)),
        "new": int(np.count_nonzero(log.first_of_url & at)),
        "changed": int(np.count_nonzero(changed == 1)),
        "unchanged": int(np.count_nonzero((changed == 0) & (status != 304))),
        "not_modified": int(np.count_nonzero(status == 304)),
        "errors": int(np.count_nonzero((log.errors | log.failed) & at)),
        "gone": int(np.count_nonzero(log.gone & at)),
        "seconds": float(times.max() - times.min()) if times.size else None,
    }


# -- the grouped report gives the same ------------------------------------------------


def test_boilerplate_suspects_are_the_per_url_definition(store):
    log = VisitLog.read(store)
    got = suspects(log)
    assert got == _suspects_per_url(log)
    assert len(got) >= 5  # the fixture has boilerplate pages to find
    # and the pages some but not all of whose changes are small are left out
    assert len(got) < len(np.unique(log["url_id"]))
    for url_id, n, _x, dist, elem in got:
        assert isinstance(url_id, int) and isinstance(n, int)
        assert isinstance(dist, float) and isinstance(elem, float)


def test_boilerplate_suspects_on_a_log_cut_by_cycle(store):
    full = VisitLog.read(store)
    for since in (3, 6, 9):
        keep = full["cycle"] >= since
        log = VisitLog({k: v[keep] for k, v in full.columns.items()})
        assert suspects(log) == _suspects_per_url(log)
    empty = VisitLog({k: v[:0] for k, v in full.columns.items()})
    assert suspects(empty) == []


def test_group_median_is_numpys_median_per_group():
    rng = np.random.default_rng(5)
    group = rng.integers(0, 40, 600)
    group[group == 7] = 8  # a code with no value: NaN
    values = rng.integers(0, 9, 600)
    got = group_median(group, values)
    for g in range(40):
        want = np.median(values[group == g]) if (group == g).any() else np.nan
        np.testing.assert_equal(got[g], want)
    assert group_median(np.array([], dtype=np.int64), np.array([])).size == 0


def test_freshness_by_cycle_is_the_per_cycle_definition(store):
    log = VisitLog.read(store)
    cycles = [int(c) for c in log.cycles()]
    want = _estimates_per_cycle(store, log, cycles)
    assert estimate_by_cycle(store, log, np.array(cycles)) == want
    # any order asked, any subset, a cycle past the log's end
    asked = [9, 2, 5, 12]
    got = estimate_by_cycle(store, log, np.array(asked))
    assert list(got) == asked
    assert got == _estimates_per_cycle(store, log, asked)


def test_cycle_rows_are_the_per_cycle_masks(store):
    log = VisitLog.read(store)
    rows = cycle_rows(store, log)
    assert [r.cycle for r in rows] == list(range(1, 10))
    for r in rows:
        assert r.source == "log"
        want = _figures_per_cycle(log, r.cycle)
        assert {k: getattr(r, k) for k in want} == want
    assert [r.cycle for r in cycle_rows(store, log, since=4)] == list(range(4, 10))


# -- a fixed number of column reads, whatever the size (the complexity guard) ---------


class _CountingLog(VisitLog):
    """A visit log that counts how often a column is read."""

    reads = 0

    def __getitem__(self, name: str) -> np.ndarray:
        type(self).reads += 1
        return super().__getitem__(name)


def _reads(fn, log: VisitLog) -> int:
    _CountingLog.reads = 0
    fn(_CountingLog(log.columns))
    return _CountingLog.reads


def test_the_report_reads_the_log_a_fixed_number_of_times(tmp_path):
    small, large = tmp_path / "small.sqlite3", tmp_path / "large.sqlite3"
    _store(small, 30, 6, seed=1)
    _store(large, 120, 12, seed=1)
    with (
        SqliteHistoryStore(str(small), read_only=True) as a,
        SqliteHistoryStore(str(large), read_only=True) as b,
    ):
        logs = VisitLog.read(a), VisitLog.read(b)
        # 4 times the URLs, twice the cycles: as many column reads (the per-URL
        # mask read the log once per URL; the per-cycle ones once per cycle)
        assert suspects(logs[0]) and suspects(logs[1])
        assert _reads(suspects, logs[0]) == _reads(suspects, logs[1])
        assert _reads(lambda log: cycle_rows(b, log), logs[1]) == _reads(
            lambda log: cycle_rows(a, log), logs[0]
        )


def test_cycle_rows_since_estimate_only_the_cycles_shown(store):
    log = VisitLog.read(store)
    full = {r.cycle: r for r in cycle_rows(store, log)}
    since = cycle_rows(store, log, since=6)
    assert [r.cycle for r in since] == [6, 7, 8, 9]
    assert all(r == full[r.cycle] for r in since)  # the estimate from the whole log up to it
