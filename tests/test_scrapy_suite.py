"""RecrawlScheduler against Scrapy's own tests, and against Scrapy's scheduler on JOBDIR.

Scrapy's scheduler, engine and crawl tests (tests/scrapy_suite/run.py lists the
modules) run in a subprocess with ``SCHEDULER`` set to RecrawlScheduler, every
``RECRAWL_*`` setting at its default and a fresh history store per crawler;
docs/scheduler.md has the how and the why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from .scrapy_suite import run as suite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scrapy_tests():
    tests_dir, how = suite.locate_scrapy_tests()
    if tests_dir is None:
        pytest.skip(f"Scrapy's own tests are not available: {how}")
    pytest.importorskip("pytest_twisted", reason="Scrapy's tests need pytest-twisted")
    return tests_dir


@pytest.mark.parametrize("middleware", [False, True], ids=["scheduler", "scheduler+middleware"])
def test_scrapys_own_tests_pass_with_recrawl_scheduler(scrapy_tests, tmp_path, middleware):
    report = tmp_path / "opened.txt"
    out = suite.run(
        tests_dir=scrapy_tests, middleware=middleware, report=report, timeout=900, capture=True
    )
    tail = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, tail
    summary = re.search(r"(\d+) passed", out.stdout)
    assert summary and int(summary.group(1)) >= 200, tail
    assert not re.search(r"\d+ (failed|error)", out.stdout), tail
    # the plugin really swapped the scheduler in (not a silent run of Scrapy's own)
    opened = sum(int(n) for n in report.read_text().split())
    assert opened >= 100, f"RecrawlScheduler opened only {opened} times\n{tail}"


SPIDER = textwrap.dedent(
    """
    import scrapy

    class S(scrapy.Spider):
        name = "s"
        custom_settings = {"CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "INFO"}

        async def start(self):
            yield scrapy.Request("data:,start")

        def parse(self, response):
            self.logger.info("GOT %s", response.url)
            if response.url == "data:,start":
                for i in range(20):
                    yield scrapy.Request(f"data:,{i}", priority=i % 3)
    """
)


def _crawl(tmp_path, scheduler, *settings):
    args = [sys.executable, "-m", "scrapy", "runspider", "spider.py"]
    args += ["-s", f"SCHEDULER={scheduler}", "-s", f"RECRAWL_STORE={tmp_path / 'h.sqlite3'}"]
    for s in settings:
        args += ["-s", s]
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return re.findall(r"GOT (\S+)", out.stderr)


@pytest.fixture(scope="module")
def scrapy_jobdir_run(tmp_path_factory):
    """What Scrapy's own scheduler fetches in the paused and the resumed run: the same
    for both cases below (no RECRAWL_* setting reaches it), so crawled once."""
    d = tmp_path_factory.mktemp("scrapy")
    (d / "spider.py").write_text(SPIDER)
    return _paused_and_resumed(d, "scrapy.core.scheduler.Scheduler")


def _paused_and_resumed(d, scheduler):
    budget = ["RECRAWL_BUDGET=100", "RECRAWL_NEW_SHARE=1.0"]
    first = _crawl(d, scheduler, *budget, f"JOBDIR={d / 'job'}", "CLOSESPIDER_PAGECOUNT=5")
    second = _crawl(d, scheduler, *budget, f"JOBDIR={d / 'job'}")
    return first, second


# one worker crawls scrapy_jobdir_run (module-scoped) for both (--dist loadgroup)
@pytest.mark.xdist_group("scrapy_jobdir")
@pytest.mark.parametrize("warmed_up", [False, True], ids=["warm-up cycle", "budgeted cycle"])
def test_jobdir_pause_and_resume_fetches_what_scrapys_scheduler_does(
    tmp_path, warmed_up, scrapy_jobdir_run
):
    """A crawl stopped early (CLOSESPIDER_PAGECOUNT) and resumed from JOBDIR fetches
    the pending requests, as with Scrapy's scheduler; the persisted dupefilter must
    not drop them (it holds every request the job enqueued)."""
    scheduler = "scrapy_recrawl.scheduler.RecrawlScheduler"
    d = tmp_path / "recrawl"
    d.mkdir()
    (d / "spider.py").write_text(SPIDER)
    if warmed_up:
        for _ in range(2):  # the two warm-up cycles, so the next one has a budget
            assert len(_crawl(d, scheduler, "RECRAWL_BUDGET=100", "RECRAWL_NEW_SHARE=1.0")) == 21
    fetched = {"scrapy": scrapy_jobdir_run, "recrawl": _paused_and_resumed(d, scheduler)}
    scrapy_first, scrapy_second = fetched["scrapy"]
    first, second = fetched["recrawl"]
    assert len(first) == len(scrapy_first)
    assert set(first) | set(second) == set(scrapy_first) | set(scrapy_second), json.dumps(fetched)
    assert len(second) == len(scrapy_second), json.dumps(fetched)
