"""Sitemaps and importance in real crawls: a local site whose sitemap tells the truth
for some pages and lies for others, crawled by a SitemapSpider with
SitemapEvidenceMixin, one ``scrapy crawl`` process per cycle (docs/evidence.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from .helpers import REPO, LocalSite, Page

SPIDER = Path(__file__).with_name("evidence_spider.py")
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def crawl(sitemap: str, settings: dict, cwd: Path) -> dict:
    """One crawl (one cycle) of the evidence spider in a fresh process: items, stats."""
    args = json.dumps({"sitemap_urls": [sitemap], "settings": settings})
    out = subprocess.run(
        [sys.executable, str(SPIDER), args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout)


def page(path: str, version: int) -> Page:
    # a new version rewrites the paragraph: a change for the detector, not a near-copy
    words = " ".join(WORDS[(version * 5 + i * 7) % len(WORDS)] for i in range(40))
    return Page(f"<html><body><h1>{path}</h1><p>{words} {version}</p></body></html>".encode())


def sitemap(entries: dict[str, tuple[str, str]]) -> Page:
    urls = "".join(
        f"<url><loc>{loc}</loc><lastmod>{lastmod}</lastmod><changefreq>{freq}</changefreq></url>"
        for loc, (lastmod, freq) in entries.items()
    )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    )
    return Page(body.encode(), content_type="application/xml")


def now() -> str:
    return datetime.now(timezone.utc).isoformat()  # microseconds: newer than any visit


def store_settings(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict:
    if kind == "sqlite":
        return {"RECRAWL_STORE": str(tmp_path / "history.sqlite3")}
    return {"RECRAWL_STORE": request.getfixturevalue("redis_db").url}


def fetched(result: dict) -> dict[str, dict]:
    """The pages the cycle recrawled, by path."""
    return {
        "/" + item["url"].split("/", 3)[-1]: item
        for item in result["items"]
        if item["kind"] == "recrawl"
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_truthful_lastmods_are_fetched_next_cycle_and_lying_ones_stop_being_trusted(
    kind, tmp_path, request
):
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        **store_settings(kind, tmp_path, request),
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 3,
        "RECRAWL_NEW_SHARE": 0.0,
        # the quiet pages weigh 10 (RECRAWL_IMPORTANCE): the scorer alone would never
        # pick an announced page in these few cycles, so each fetch of one is the
        # announcement's doing
        "RECRAWL_SCORER": "w_test*t",
        "RECRAWL_PLUGINS": {"tests.evidence_plugins.ImportanceForTests": 500},
        "RECRAWL_IMPORTANCE": "tests.evidence_plugins.weigh",
        "RECRAWL_SITEMAP_CHECKS": 2,
    }
    with LocalSite() as site:
        # truthful pages on one host name, the liars on another (one server): the trust
        # rule pools unconfirmed announcements per host
        honest, liars = site.url, site.url.replace("127.0.0.1", "localhost")
        quiet = [f"/w10-q{i}" for i in range(6)]
        version = dict.fromkeys([*quiet, "/t0", "/t1", "/l0", "/l1"], 0)
        for path in version:
            site.pages[path] = page(path, 0)
        old = "2020-01-01T00:00:00+00:00"
        said = {f"{honest}{p}": (old, "monthly") for p in [*quiet, "/t0", "/t1"]}
        said |= {f"{liars}{p}": (old, "hourly") for p in ("/l0", "/l1")}
        site.pages["/sitemap.xml"] = sitemap(said)
        results = []
        for cycle in range(1, 7):
            if cycle >= 2:
                # the liars say they changed before every crawl; they never do
                for p in ("/l0", "/l1"):
                    said[f"{liars}{p}"] = (now(), "hourly")
                # /t0 changes before crawls 2, 4, 6 and /t1 before 3, 5; both say so
                p = "/t0" if cycle % 2 == 0 else "/t1"
                version[p] += 1
                site.pages[p] = page(p, version[p])
                said[f"{honest}{p}"] = (now(), "monthly")
                site.pages["/sitemap.xml"] = sitemap(said)
            results.append(crawl(f"{honest}/sitemap.xml", settings, tmp_path))
    first, *_ = results
    # the warm-up fetched every page; the mixin carried each entry's dates into meta
    items = {i["url"]: i for i in first["items"]}
    assert len(items) == 10
    assert items[f"{liars}/l0"]["lastmod"] == old
    assert items[f"{liars}/l0"]["changefreq"] == "hourly"

    def cycle(n: int) -> tuple[dict[str, dict], dict]:
        return fetched(results[n - 1]), results[n - 1]["stats"]

    # crawl 2 announced /t0, /l0, /l1 (known URLs: the spider's requests are not fetched)
    picks, stats = cycle(2)
    assert stats["recrawl/sitemap/announced"] == 3
    assert not {"/t0", "/l0", "/l1"} & set(picks)
    # crawl 3: all three due now, ahead of the scored pages: the budget's three picks
    picks, stats = cycle(3)
    assert stats["recrawl/sitemap/due"] == 3
    assert set(picks) == {"/t0", "/l0", "/l1"}
    assert "recrawl:changed" in picks["/t0"]["flags"]
    assert all("recrawl:unchanged" in picks[p]["flags"] for p in ("/l0", "/l1"))
    # a recrawl is rebuilt from the stored request, which keeps no announcement
    assert picks["/t0"]["lastmod"] is None and picks["/l0"]["changefreq"] is None
    # crawl 4: the check of crawl 3's fetches: /t0 confirmed, both liars not; their
    # host has 2 unconfirmed announcements (RECRAWL_SITEMAP_CHECKS): no longer trusted
    picks, stats = cycle(4)
    assert (stats["recrawl/sitemap/confirmed"], stats["recrawl/sitemap/unconfirmed"]) == (1, 2)
    assert stats["recrawl/sitemap/due"] == 1
    assert picks["/t1"]["rank"] == 0 and "recrawl:changed" in picks["/t1"]["flags"]
    # crawls 5 and 6: each truthful change fetched first in the next cycle; the liars,
    # announced again, are untrusted and not fetched
    for n, p in ((5, "/t0"), (6, "/t1")):
        picks, stats = cycle(n)
        assert stats["recrawl/sitemap/due"] == 1
        assert stats["recrawl/sitemap/untrusted"] == 2
        assert picks[p]["rank"] == 0 and "recrawl:changed" in picks[p]["flags"]
        assert not {"/l0", "/l1"} & set(picks)
        assert len(picks) == 3  # the rest of the budget went to the scorer's picks
    if kind == "sqlite":
        # the cycle's kept cut-off is the scorer's (10 * t of a quiet page), not lowered
        # by the due pick's score (1 * t); a cycle of due picks only has none
        from scrapy_recrawl.history import SqliteHistoryStore
        from scrapy_recrawl.history.cycle_log import cycle_records

        store = SqliteHistoryStore(tmp_path / "history.sqlite3", read_only=True)
        store.open()
        plans = {r.cycle: r.plan for r in cycle_records(store)}
        store.close()
        assert plans[3].cutoff is None and plans[3].picks == 3
        assert plans[5].cutoff >= 10 and plans[6].cutoff >= 10


@pytest.mark.slow
def test_importance_reaches_scoring(tmp_path):
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 2,
        "RECRAWL_NEW_SHARE": 0.0,
        "RECRAWL_SCORER": "w_test",
        "RECRAWL_PLUGINS": {"tests.evidence_plugins.ImportanceForTests": 500},
        "RECRAWL_IMPORTANCE": "tests.evidence_plugins.weigh",
    }
    with LocalSite() as site:
        paths = ["/w5-a", "/w2-b", "/w1-c", "/w9-d", "/plain"]
        for p in paths:
            site.pages[p] = page(p, 0)
        site.pages["/sitemap.xml"] = sitemap({site.url + p: ("2020-01-01", "daily") for p in paths})
        first = crawl(f"{site.url}/sitemap.xml", settings, tmp_path)  # warm-up: all, weighed
        second = crawl(f"{site.url}/sitemap.xml", settings, tmp_path)
    picks = fetched(second)
    # the two heaviest, heaviest first
    assert sorted(picks, key=lambda p: picks[p]["rank"]) == ["/w9-d", "/w5-a"]
    # weights other than 1.0 kept at the first fetch (5, 2, 9); none to write again
    assert first["stats"]["recrawl/importance/set"] == 3
    assert "recrawl/importance/set" not in second["stats"]


@pytest.mark.slow
def test_an_importance_callable_that_does_not_import_stops_the_crawl_in_one_line(tmp_path):
    from .cli_project import make_project, scrapy

    project = make_project(tmp_path)
    run = scrapy(
        project,
        *("crawl", "pages", "-a", "start_url=http://127.0.0.1:9/"),
        *("-s", f"RECRAWL_STORE={project}/h.db", "-s", "RECRAWL_IMPORTANCE=myproject.weights.of"),
    )
    assert run.returncode == 1, run.stderr
    assert len(run.lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert "RECRAWL_IMPORTANCE='myproject.weights.of': cannot import it" in run.lines[0]
