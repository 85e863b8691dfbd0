"""Real crawls of the example site with the add-on: several cycles, both modes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from example_project import demo, truth
from example_project.site import RunningSite
from scrapy_recrawl.core.simulate import simulate
from scrapy_recrawl.history import SqliteHistoryStore

pytestmark = pytest.mark.slow


def test_per_run_cycles_follow_the_budget_and_agree_with_the_replay(tmp_path):
    """Six real cycles of gp4c (``make demo``'s way: one `scrapy crawl` a day), each
    budgeted cycle within its 5%; what the crawl found, scored on the site's truth, is
    what ``simulate()`` finds on the same truth (freshness day by day, ChangeRate on
    average): so the replay's claims (tests/test_example_replay.py: gp4c finds more
    than 1.5 times random's changed pages) are the crawl's. Measured, ChangeRate by
    day: crawl 0.37 0.60 0.74 0.70 (mean 0.60) and 0.37 0.58 0.60 0.74 (0.57), replay
    0.30 0.65 0.80 0.75 (0.625); freshness 0.91 0.86 0.84 0.83 in the crawl and the
    replay."""
    store = str(tmp_path / "gp4c.sqlite3")
    with RunningSite(pages=400, seed=3) as site:
        for cycle in range(1, 7):
            stats = demo.crawl_cycle(site.base_url, store, "gp4c", 0.05, seed=1)
            assert stats["recrawl/cycle"] == cycle
            if cycle > 2:
                known = stats["recrawl/scored_urls"]
                budget = math.ceil(0.05 * (known + 5))
                # budgeted pages plus the start request (and retries of the site's 500s)
                assert stats["recrawl/scheduled"] <= budget
                assert stats["downloader/response_count"] <= budget + 1 + 3 * 2
            demo.post(site.base_url + "/_admin/advance")
        changes_doc, served_doc = truth.fetch_truth(site.base_url)
    with SqliteHistoryStore(store) as s:
        assert s.cycle == 6
    crawl = truth.score(changes_doc, served_doc, first_day=2, last_day=5)
    changes = np.asarray(truth.change_matrix(changes_doc, 6)[1], dtype=np.uint8)
    replay = simulate(changes, "gp4c", k=0.05)
    crawled = [d.change_rate for d in crawl.days]
    fresh = [d.freshness for d in crawl.days]
    assert len(crawled) == len(replay.change_rate) == 4
    # close, not equal: the crawl's budget counts the index and error pages the replay
    # has not (21 pages of 20), and ties among unchanged pages fall by the URL ids the
    # order of the downloads gave (one day's rate moves by 0.2 from run to run)
    why = (crawled, replay.change_rate, fresh, replay.freshness)
    assert abs(crawl.mean_change_rate - replay.mean_change_rate) <= 0.1, why
    assert np.allclose(fresh, replay.freshness, atol=0.05), why
    # and gp4c's lead over random holds in the crawl itself (random's replay: 0.21)
    rand = simulate(changes, "rand", k=0.05).mean_change_rate
    assert crawl.mean_change_rate > 1.5 * rand, (crawl.mean_change_rate, rand)


def test_continuous_crawl_of_the_site(tmp_path):
    store = tmp_path / "history.sqlite3"
    with RunningSite(pages=150, seed=2, day_seconds=3.0) as site:
        cmd = [
            sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={site.base_url}/",
            "-s", f"RECRAWL_STORE={store}", "-s", "RECRAWL_CONTINUOUS=True",
            "-s", "RECRAWL_CYCLE_SECONDS=3", "-s", "RECRAWL_CYCLE_PERIOD=3", "-s", "RECRAWL_MAX_CYCLES=5",
            "-s", "RECRAWL_BUDGET=20", "-s", "LOG_LEVEL=WARNING",
        ]  # fmt: skip
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(demo.PROJECT_DIR.parent), str(demo.PROJECT_DIR)]),
        }
        out = subprocess.run(
            cmd, cwd=demo.PROJECT_DIR, env=env, capture_output=True, text=True, timeout=240
        )
        assert out.returncode == 0, out.stderr[-3000:]
        served = json.load(
            __import__("urllib.request").request.urlopen(site.base_url + "/_truth/served")
        )
    with SqliteHistoryStore(store) as s:
        assert s.cycle == 5
        log = s.visit_log()
    per_cycle = {c: int((log["cycle"] == c).sum()) for c in range(1, 6)}
    # warm-up cycles (no budget, but still 3 s each): every page fetched at least once
    warm = set(log["url_id"][(log["cycle"] <= 2) & (log["status"] == 200)].tolist())
    assert len(warm) >= 148  # 150 pages, less the site's error pages, plus index pages
    assert all(1 <= per_cycle[c] <= 20 for c in (3, 4, 5)), per_cycle  # the budget
    assert len(served["served"]) >= 150


def test_the_demo_keeps_its_history_for_recrawl_report(tmp_path, monkeypatch, capsys):
    # `make demo`, then `scrapy recrawl-report` in example_project/ (docs/changes.md)
    kept = tmp_path / "site" / "history.sqlite3"
    monkeypatch.setattr(demo, "PROJECT_STORE", str(kept))
    demo.main(["--pages", "60", "--cycles", "3", "--scorers", "gp4c"])
    assert "recrawl-report" in capsys.readouterr().out
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(demo.PROJECT_DIR.parent), str(demo.PROJECT_DIR)]),
    }
    cmd = [sys.executable, "-m", "scrapy", "recrawl-report", "--format", "json",
           "-s", f"RECRAWL_STORE={kept}"]  # fmt: skip
    out = subprocess.run(cmd, cwd=demo.PROJECT_DIR, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    cycles = json.loads(out.stdout)["cycles"]
    assert [c["cycle"] for c in cycles] == [1, 2, 3]
    assert all(c["scorer"] == "gp4c" for c in cycles)  # from the crawl's own record
