"""What a spider sees of a change: response flags (and Scrapy's "Crawled" log lines),
and RECRAWL_SKIP_UNCHANGED. A real local site, crawled twice by `scrapy crawl`."""

from __future__ import annotations

import json
import re

import pytest

from scrapy_recrawl.history import SqliteHistoryStore

from .cli_project import make_project, scrapy
from .helpers import LocalSite, Page

pytestmark = pytest.mark.slow


def page(text: str, links: str = "", etag: str | None = None) -> Page:
    return Page(f"<html><body><p>{text}</p>{links}</body></html>".encode(), etag=etag)


def build(site: LocalSite, etags: bool = False) -> None:
    tag = (lambda v: f'"{v}"') if etags else (lambda v: None)
    links = "".join(f'<a href="/{p}">{p}</a>' for p in "abc")
    site.pages["/"] = page("the index", links, etag=tag("i1"))
    for p in "abc":
        site.pages[f"/{p}"] = page(f"page {p} as it was on the first day", etag=tag(f"{p}1"))


def twice(tmp_path, site: LocalSite, *settings: str, etags: bool = False):
    """Crawl, change /b, crawl again; the second crawl's items, stats and log."""
    project = make_project(tmp_path, 'RECRAWL_STORE = "h.sqlite3"\n')
    build(site, etags)
    args = ["crawl", "pages", "-a", f"start_url={site.url}/", "-s", "LOG_LEVEL=DEBUG"]
    for s in settings:
        args += ["-s", s]
    first = scrapy(project, *args, "-O", "first.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    site.pages["/b"] = page(
        "page b has <b>news</b> today, a whole new paragraph", etag='"b2"' if etags else None
    )
    second = scrapy(project, *args, "-O", "second.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    items = {
        item["url"].rsplit("/", 1)[-1] or "/": item["flags"]
        for item in map(json.loads, (project / "second.jsonl").read_text().splitlines())
    }
    stats = dict((k, int(v)) for k, v in re.findall(r"'([a-z_]+/[a-z_/]+)': (\d+)", second.stderr))
    first_items = [json.loads(x) for x in (project / "first.jsonl").read_text().splitlines()]
    assert all(item["flags"] == ["recrawl:new"] for item in first_items) and len(first_items) == 4
    return project, items, stats, second.stderr


def test_flags_say_what_changed_in_the_items_and_the_crawled_lines(tmp_path):
    with LocalSite() as site:
        _, items, stats, log = twice(tmp_path, site)
    assert items == {
        "/": ["recrawl:unchanged"],
        "a": ["recrawl:unchanged"],
        "b": ["recrawl:changed"],
        "c": ["recrawl:unchanged"],
    }
    assert re.search(r"Crawled \(200\) <GET http://[^>]+/b> .*\['recrawl:changed'\]", log)
    assert re.search(r"Crawled \(200\) <GET http://[^>]+/a> .*\['recrawl:unchanged'\]", log)
    assert stats["recrawl/changed"] == 1 and stats["recrawl/unchanged"] == 3


def test_skip_items_drops_an_unchanged_pages_items_and_follows_its_links(tmp_path):
    with LocalSite() as site:
        _, items, stats, _ = twice(tmp_path, site, "RECRAWL_SKIP_UNCHANGED=items")
        # still fetched and recorded in the second crawl (its items skipped below); a
        # crawl may fetch it once more: the boilerplate learner's confirmation pairs
        # (pair_fetches) go to pages picked by response order (here 3 of 4 pages had one)
        assert len(site.requests_for("/a")) in (2, 3)
    assert items == {"b": ["recrawl:changed"]}
    assert stats["recrawl/skipped_items"] == 3
    # the unchanged index's callback ran: its three links reached the scheduler (which
    # filtered them: the cycle's recrawls already hold them)
    assert stats["dupefilter/filtered"] == 3


@pytest.mark.parametrize("etags", [False, True], ids=["compared", "304"])
def test_skip_all_keeps_an_unchanged_page_from_the_spider(tmp_path, etags):
    with LocalSite() as site:
        project, items, stats, log = twice(
            tmp_path, site, "RECRAWL_SKIP_UNCHANGED=all", etags=etags
        )
    assert items == {"b": ["recrawl:changed"]}
    assert stats["recrawl/skipped_unchanged"] == 3
    assert "dupefilter/filtered" not in stats  # the index's callback never ran
    assert "Traceback" not in log and "ERROR" not in log
    with SqliteHistoryStore(project / "h.sqlite3") as store:
        log_ = store.visit_log()
    assert int((log_["cycle"] == 2).sum()) == 4  # every visit recorded all the same
