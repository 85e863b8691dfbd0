"""A failing test fails alone: a test that kills a Redis Cluster node, one whose
crawl fails, one that stops the Twisted reactor, each followed by tests that need
the same cluster, crawls and process. Run as an inner pytest session with this
suite's configuration (setup.cfg) and fixtures (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from .helpers import REPO

pytestmark = pytest.mark.slow

INNER = textwrap.dedent(
    """
    import signal

    from tests.helpers import LocalSite, Page, run_crawl


    def settings(tmp_path, **extra):
        return {
            "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
            "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
            **extra,
        }


    def test_1_stops_the_reactor():
        # what an in-process crawl does once it is over (CrawlerProcess), or Twisted's
        # SIGTERM handler: with the reactor shared by the session (pytest-twisted runs
        # every test in it), every later test failed with "twisted reactor has stopped"
        from twisted.internet import reactor

        reactor.stop()


    def test_2_kills_a_cluster_node(redis_cluster_db):
        node = redis_cluster_db.node_of("k")
        node.stop(signal.SIGKILL)
        client = redis_cluster_db.client(cluster_error_retry_attempts=1)
        client.set("k", 1)  # its master is gone: this test fails


    def test_3_the_cluster_is_whole_again(redis_cluster_db):
        client = redis_cluster_db.client()
        for i in range(60):  # keys on every master
            client.set(f"k{i}", i)
        assert [int(client.get(f"k{i}")) for i in range(60)] == list(range(60))
        client.close()


    def test_4_a_crawl_that_fails(tmp_path):
        with LocalSite() as site:
            site.pages["/"] = Page(b"<html><body>home</body></html>")
            # refused at start-up inside the crawl: exit status 1, run_crawl raises
            run_crawl([site.url + "/"], settings(tmp_path, RECRAWL_BUDGET="lots"), tmp_path)


    def test_5_the_next_crawl_runs(tmp_path):
        with LocalSite() as site:
            site.pages["/"] = Page(b"<html><body>home</body></html>")
            result = run_crawl([site.url + "/"], settings(tmp_path), tmp_path)
        assert [item["url"] for item in result["items"]] == [site.url + "/"]


    def test_6_and_the_process_goes_on():
        assert True
    """
)


#: the outer pytest's options and an xdist worker's identity (under `make test`): the
#: inner session is a plain one-process session, as tests/scrapy_suite/run.py runs Scrapy's
OUTER = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
         "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")  # fmt: skip


def test_a_failing_test_fails_alone(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_inner.py").write_text(INNER)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "setup.cfg"), "--rootdir", str(tmp_path)]
        + ["-p", "no:cacheprovider", "-rA", "-q", str(tmp_path / "test_inner.py")],
        cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if k not in OUTER}, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=400,
    )
    outcomes = dict(
        (name, outcome)
        for outcome, name in re.findall(r"^(PASSED|FAILED|ERROR) \S+::(test_\w+)", out.stdout, re.M)
    )
    assert outcomes == {
        "test_1_stops_the_reactor": "FAILED",
        "test_2_kills_a_cluster_node": "FAILED",
        "test_3_the_cluster_is_whole_again": "PASSED",
        "test_4_a_crawl_that_fails": "FAILED",
        "test_5_the_next_crawl_runs": "PASSED",
        "test_6_and_the_process_goes_on": "PASSED",
    }, out.stdout[-6000:] + out.stderr[-2000:]
