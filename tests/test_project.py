"""The add-on in a real Scrapy project (tests/project.py), as a new user meets it:
two spiders on two sites keep two histories; robots.txt, sitemaps, cached responses
and other bookkeeping never enter them; `scrapy fetch` / `parse` / `shell` never
write them; a project's old shared store is pointed out, never moved."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore

from .helpers import LocalSite, Page
from .pre_release import store_file
from .project import crawl, make_project, scrapy

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
PAGES = 6


def _site(prefix: str, version: int = 0) -> LocalSite:
    site = LocalSite()
    _publish(site, prefix, version)
    return site


def _publish(site: LocalSite, prefix: str, version: int) -> None:
    links = "".join(f'<a href="/{prefix}{i}">{prefix}{i}</a>' for i in range(PAGES))
    links += '<a href="/private/area">robots.txt forbids it: never fetched, never recorded</a>'
    site.pages["/"] = Page(f"<html><body><h1>{prefix}</h1>{links}</body></html>".encode())
    for i in range(PAGES):
        text = f"page {prefix}{i}: " + ("fresh news " * 20 if i % 2 and version else "same ") * 3
        site.pages[f"/{prefix}{i}"] = Page(f"<html><body><p>{text}</p></body></html>".encode())
    site.pages["/robots.txt"] = Page(
        b"User-agent: *\nDisallow: /private\n", content_type="text/plain"
    )
    urls = "".join(f"<url><loc>{site.url}/{prefix}{i}</loc></url>" for i in range(PAGES))
    site.pages["/sitemap.xml"] = Page(
        f'<?xml version="1.0" encoding="UTF-8"?><urlset '
        f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode(),
        content_type="application/xml",
    )


def _sqlite(project: Path, spider: str) -> SqliteHistoryStore:
    return SqliteHistoryStore(project / ".scrapy" / "recrawl" / spider / "history.sqlite3")


def _urls(store) -> list[str]:
    return store.urls(store.arrays().ids)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_two_spiders_with_default_settings_keep_two_histories(backend, tmp_path, request):
    project = make_project(tmp_path)
    settings = {}
    if backend == "redis":
        redis = request.getfixturevalue("redis_db")
        settings = {"SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler", "REDIS_URL": redis.url}
    with _site("a") as a, _site("b") as b:
        sites = {"alpha": (a, b, "a"), "beta": (b, a, "b")}
        for cycle in (1, 2, 3):
            for spider, (own, other, prefix) in sites.items():
                _publish(own, prefix, cycle)
                a.log.clear()
                b.log.clear()
                run = crawl(project, spider, own.url + "/", **settings)
                # its own site only: none of the other spider's pages as "recrawls"
                assert other.log == [], (spider, cycle, other.log)
                assert run.stats["recrawl/cycle"] == cycle
                assert run.items and all(i["url"].startswith(own.url) for i in run.items)
                fetched = Counter(e["path"] for e in own.log)
                assert fetched["/robots.txt"] == 1  # ROBOTSTXT_OBEY, as new projects have
                if cycle <= 2:  # warm-up: all of its own pages
                    assert {f"/{prefix}{i}" for i in range(PAGES)} <= set(fetched)
    assert not (project / ".scrapy" / "recrawl" / "history.sqlite3").exists()
    for spider, (own, _, _) in sites.items():
        if backend == "redis":
            store = RedisHistoryStore(redis.url, key=f"{spider}:history")
        else:
            store = _sqlite(project, spider)
        with store:
            urls = _urls(store)
            assert store.owner() == spider and store.cycle == 3
            assert len(urls) == PAGES + 1  # the index and its pages, nothing else
            assert all(u.startswith(own.url + "/") for u in urls), urls
            assert not any(u.endswith("/robots.txt") for u in urls)
    if backend == "redis":  # scrapy-redis's way: every key of a spider under its name
        # (the history store's keys carry hash tags: {alpha:history}, {alpha:history#3})
        keys = {k.decode().lstrip("{").split(":", 1)[0] for k in redis.client().keys("*")}
        assert keys == {"alpha", "beta"}, keys


def test_robots_txt_and_cached_responses_are_not_observations(tmp_path):
    project = make_project(tmp_path)
    warm = {"RECRAWL_WARMUP_CYCLES": 5}  # every cycle recrawls every page
    cache = {"HTTPCACHE_ENABLED": True, **warm}
    with _site("a") as site:
        first = crawl(project, "alpha", site.url + "/", **cache)
        warnings = [line for line in first.log.splitlines() if "HTTPCACHE_ENABLED is on" in line]
        assert len(warnings) == 1, first.log  # said once, at start-up
        assert first.stats["recrawl/not_recorded/no_callback"] == 1  # robots.txt
        assert first.stats["recrawl/visits"] == PAGES + 1
        _publish(site, "a", 1)  # half the pages change; the cache still has the old ones
        site.log.clear()
        second = crawl(project, "alpha", site.url + "/", **cache)
        assert site.log == []  # everything came from the cache
        assert second.stats["recrawl/not_recorded/cached"] == PAGES + 1
        assert second.stats["recrawl/not_recorded/no_callback"] == 1  # robots.txt, cached too
        assert "recrawl/visits" not in second.stats
        assert len(second.items) == PAGES + 1  # the spider got them all the same
        with _sqlite(project, "alpha") as store:
            log = store.visit_log()
            assert store.cycle == 2 and (log["cycle"] == 2).sum() == 0
            assert (log["changed"] >= 0).sum() == 0  # no observation from a cached copy
            assert not any("robots.txt" in u for u in _urls(store))
        third = crawl(project, "alpha", site.url + "/", **warm)  # no cache: the network again
        assert third.stats["recrawl/changed"] == PAGES // 2
    with _sqlite(project, "alpha") as store:
        assert len(store) == PAGES + 1
        assert not any("robots.txt" in u for u in _urls(store))


def test_sitemaps_head_post_and_dont_recrawl_requests_stay_out(tmp_path):
    project = make_project(tmp_path)
    with _site("m") as site:
        runs = []
        for _ in range(3):  # cycles 2 and 3 have a budget: the sitemaps are never part of it
            runs.append(crawl(project, "maps", site.url + "/", RECRAWL_WARMUP_CYCLES=1))
            assert runs[-1].stats["recrawl/not_recorded/sitemap"] == 1
            assert runs[-1].stats["recrawl/not_recorded/no_callback"] == 1  # robots.txt
        extras = crawl(project, "extras", site.url + "/")
    assert runs[0].stats["recrawl/enqueued_new"] == PAGES  # the pages, not the sitemap
    for run in runs:
        assert {i["url"] for i in run.items} <= {f"{site.url}/m{i}" for i in range(PAGES)}
    with _sqlite(project, "maps") as store:
        urls = _urls(store)
        assert sorted(urls) == sorted(f"{site.url}/m{i}" for i in range(PAGES))
        assert store.frontier_size() == 0
    others = [i for i in extras.items if i.get("other")]
    assert Counter(i["method"] for i in others) == {m: PAGES + 1 for m in ("HEAD", "POST", "GET")}
    assert extras.stats["recrawl/not_recorded/method"] == 2 * (PAGES + 1)
    assert extras.stats["recrawl/not_recorded/dont_recrawl"] == PAGES + 1
    with _sqlite(project, "extras") as store:
        log = store.visit_log()
        assert len(log["url_id"]) == len(store) == PAGES + 1  # one GET visit per page


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_scrapy_fetch_parse_and_shell_never_write_the_history(tmp_path):
    project = make_project(tmp_path)
    store_dir = project / ".scrapy" / "recrawl"
    with _site("a") as site:
        url = f"{site.url}/a1"
        # no history yet: looking at a URL creates none
        fetched = scrapy(project, "fetch", "--nolog", url)
        assert fetched.returncode == 0 and "page a1" in fetched.stdout
        assert not store_dir.exists()
        site.pages["/a1"].etag = '"v1"'  # the store keeps it: a crawl would send it back
        crawl(project, "alpha", site.url + "/")
        path = store_dir / "alpha" / "history.sqlite3"
        before = _digest(path)
        site.log.clear()
        runs = {
            "fetch": scrapy(project, "fetch", "--spider", "alpha", url),
            "fetch-redis": scrapy(  # not even a Redis is needed to look at a URL
                project,
                "fetch",
                "--spider",
                "alpha",
                url,
                settings={
                    "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
                    "REDIS_URL": "redis://127.0.0.1:1/0",
                },
            ),
            "parse": scrapy(project, "parse", "--spider", "alpha", "-c", "parse", url),
            "shell": scrapy(project, "shell", url, "-c", "response.status"),
        }
        for name, run in runs.items():
            assert run.returncode == 0, (name, run.log[-3000:])
            assert "Traceback" not in run.log, (name, run.log[-3000:])
            command = name.split("-")[0]
            assert f"recrawl: off under `scrapy {command}`" in run.log, (name, run.log[-3000:])
        assert "page a1" in runs["fetch"].stdout
        assert f"'url': '{url}'" in runs["parse"].stdout  # the spider's item, parsed
        assert runs["shell"].stdout.strip() == "200"
        # each fetched the URL, without the stored validators (off: nothing read either)
        assert [e["path"] for e in site.log if e["path"] != "/robots.txt"] == ["/a1"] * 4
        assert all(e["if_none_match"] is None for e in site.log)
    assert _digest(path) == before
    assert sorted(p.name for p in store_dir.iterdir()) == ["alpha"]


def test_an_old_shared_store_is_pointed_out_never_moved_and_refused(tmp_path):
    """The shared default store of the builds before stores knew their spider (schema
    version 2: nobody's) is pointed out, left as it is; pointed at, it is refused as
    every pre-release store is (tests/test_sqlite_baseline.py)."""
    project = make_project(tmp_path)
    old = project / ".scrapy" / "recrawl" / "history.sqlite3"
    old.parent.mkdir(parents=True)
    store_file(old, 2, owner=None)  # as such a build left it
    digest = _digest(old)
    with _site("a") as site:
        run = crawl(project, "alpha", site.url + "/")
        told = [line for line in run.log.splitlines() if ".scrapy/recrawl/history.sqlite3" in line]
        assert len(told) == 1, run.log
        assert ".scrapy/recrawl/alpha/history.sqlite3" in told[0] and "pre-release" in told[0]
        assert _digest(old) == digest  # neither moved nor upgraded nor written
        assert run.stats["recrawl/cycle"] == 1  # a history of its own, from scratch
        refused = scrapy(
            project,
            "crawl",
            "alpha",
            "-a",
            f"start_url={site.url}/",
            settings={"RECRAWL_STORE": str(old)},
        )
        assert refused.returncode == 1, refused.log[-3000:]
        assert "Traceback" not in refused.log, refused.log[-3000:]
        errors = [line for line in refused.log.splitlines() if "] ERROR:" in line]
        assert len(errors) == 1 and "pre-release build" in errors[0], refused.log[-3000:]
    assert _digest(old) == digest
