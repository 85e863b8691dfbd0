"""The per-cycle record (history/cycle_log.py): written by the crawl, read by the report."""

import numpy as np
import pytest

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.cycle_log import (
    KEEP_PICK_CYCLES,
    LOG_TABLE,
    CyclePlan,
    CycleSummary,
    cycle_records,
    pick_of,
    picks,
    push_summary,
    save_plan,
)
from scrapy_recrawl.history.records import RecordError, pack_record
from scrapy_recrawl.history.redis import RedisHistoryStore


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteHistoryStore(tmp_path / "h.sqlite3")
    else:
        s = RedisHistoryStore(request.getfixturevalue("redis_db").url, key="t:history")
    with s:
        yield s


def test_plans_and_summaries_of_many_processes_add_up(store):
    save_plan(
        store,
        CyclePlan(1, 10.0, 5, "gp4c", 40, 0.25, 3),
        np.array([7, 3, 9]),
        np.array([0.9, 0.5, 0.25]),
    )
    push_summary(store, CycleSummary(1, 11.0, 20.0, recrawl=2, new=1, changed=1, unchanged=2))
    push_summary(store, CycleSummary(1, 12.0, 25.0, recrawl=1, not_modified=1, gone=1))
    push_summary(store, CycleSummary(2, 30.0, 31.0, new=4))
    [one, two] = cycle_records(store)
    assert one.plan == CyclePlan(1, 10.0, 5, "gp4c", 40, 0.25, 3) and one.processes == 2
    s = one.summary
    assert (s.started, s.ended, s.recrawl, s.new, s.fetched) == (11.0, 25.0, 3, 1, 4)
    assert (s.changed, s.unchanged, s.not_modified, s.gone) == (1, 2, 1, 1)
    assert two.plan is None and two.summary.new == 4
    assert [r.cycle for r in cycle_records(store, since=2)] == [2]
    assert pick_of(store, 1, 3) == (2, 0.5) and pick_of(store, 1, 4) is None


def test_picks_are_kept_for_the_last_cycles_only(store):
    for c in range(1, KEEP_PICK_CYCLES + 3):
        save_plan(store, CyclePlan(c, c, 1, "age", 1, 1.0, 1), np.array([c]), np.array([1.0]))
    assert picks(store, 1) is None and picks(store, 2) is None
    assert picks(store, 3) is not None
    assert len(cycle_records(store)) == KEEP_PICK_CYCLES + 2  # the plans themselves stay


def test_a_record_that_is_not_ours_is_refused_naming_the_cycle(store):
    store.side_push(LOG_TABLE, 4, pack_record({"cycle": 4, "started": "x"}), 8)
    with pytest.raises(RecordError, match="cycle_log.*cycle 4"):
        cycle_records(store)
