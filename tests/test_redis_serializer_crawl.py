"""A queue serializer that cannot carry a request, in real ``scrapy crawl`` runs on a
real Redis: scrapy-redis's documented ``SCHEDULER_SERIALIZER = "json"`` is refused at
start-up in one line; a request that cannot be queued mid-crawl stops the crawl with
exit status 1 (it used to lose the first page's links, with a traceback, and exit 0)."""

from __future__ import annotations

import pytest

from .cli_project import make_project, scrapy
from .helpers import LocalSite, Page
from .redis_server import RedisServer

pytestmark = pytest.mark.slow

# passes the start-up check (a request like any), fails on the pages' links
FAILING_SERIALIZER = """
from scrapy_recrawl.frontier import serializer as codec

loads = codec.loads


def dumps(obj):
    if "/p" in obj["url"]:
        raise ValueError("this one does not fit")
    return codec.dumps(obj)
"""


@pytest.fixture
def site():
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(3))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for i in range(3):
            site.pages[f"/p{i}"] = Page(f"<html><body><p>page {i}</p></body></html>".encode())
        yield site


def crawl(project, site, server, serializer):
    return scrapy(
        project, "crawl", "pages", "-a", f"start_url={site.url}/",
        "-s", "SCHEDULER=scrapy_recrawl.RedisRecrawlScheduler",
        "-s", f"REDIS_URL={server.url}", "-s", f"SCHEDULER_SERIALIZER={serializer}",
    )  # fmt: skip


def test_a_json_serializer_is_refused_at_start_up_in_one_line(tmp_path, site):
    project = make_project(tmp_path)
    with RedisServer() as server:
        run = crawl(project, site, server, "json")
    errors = [line for line in run.lines if "ERROR" in line]
    assert run.returncode == 1, run.stderr[-3000:]
    assert len(errors) == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "SCHEDULER_SERIALIZER='json' cannot encode a Scrapy request" in errors[0]
    assert site.log == []  # nothing fetched


def test_a_request_that_cannot_be_queued_stops_the_crawl_non_zero(tmp_path, site):
    project = make_project(tmp_path)
    (project / "failing_serializer.py").write_text(FAILING_SERIALIZER)
    with RedisServer() as server:
        run = crawl(project, site, server, "failing_serializer")
    errors = [line for line in run.lines if "ERROR" in line]
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert len(errors) == 1, run.stderr[-3000:]
    assert "could not queue" in errors[0] and "/p" in errors[0]
    assert "ValueError: this one does not fit" in errors[0]
    assert all(site.requests_for(f"/p{i}") == [] for i in range(3))  # never queued
