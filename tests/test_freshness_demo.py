"""The crawl's freshness estimate against the demo site's own truth (bench/freshness_estimate.py's
run, smaller): 15 real cron-style crawls of the example site (one simulated day each, the
demo project's settings), then recrawl-report's per-cycle estimate and the crawl's stat
beside the true freshness of the known pages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from example_project import truth
from example_project.site import RunningSite
from scrapy_recrawl.cycle_summary import FRESHNESS_CYCLE_STAT, FRESHNESS_STAT
from scrapy_recrawl.history.sqlite import SqliteHistoryStore
from scrapy_recrawl.insight.cycles import estimate_by_cycle
from scrapy_recrawl.insight.log import VisitLog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from freshness_estimate import crawl  # noqa: E402

pytestmark = pytest.mark.slow
CYCLES = 15


def test_the_estimate_tracks_the_demo_sites_truth(tmp_path):
    class Args:
        cycles, budget, seed = CYCLES, 0.05, 1

    with RunningSite(pages=1000, seed=1) as site:
        crawl(site, "gp4c", Args, tmp_path)
    stats = json.loads((tmp_path / "stats.json").read_text())
    docs = json.loads((tmp_path / "truth.json").read_text())
    true = truth.known_freshness_by_day(docs["changes"], docs["served"], list(range(CYCLES)))
    store = SqliteHistoryStore(tmp_path / "history.sqlite3", read_only=True)
    store.open()
    try:
        est = estimate_by_cycle(store, VisitLog.read(store), np.arange(1, CYCLES + 1))
    finally:
        store.close()
    err = [abs(est[c].share - true[c - 1][0]) for c in range(3, CYCLES + 1)]
    assert max(err) <= 0.05, err
    assert np.mean(err) <= 0.03, err
    assert true[2][0] - true[CYCLES - 1][0] > 0.05  # the truth falls: a constant fails
    # the crawl's own stat (each next cycle's opening) is the report's figure
    for s in stats[1:]:
        c = s[FRESHNESS_CYCLE_STAT]
        assert s[FRESHNESS_STAT] == pytest.approx(est[c].share, abs=2e-3), c
