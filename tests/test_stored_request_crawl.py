"""Real crawls: a recrawl is rebuilt from the request as the spider made it, so what the
user configures now applies to it, and no credential is kept at rest (issue 27).

Each test crawls a local site that records every request's headers, one ``scrapy
crawl`` process per cycle, changing the settings between cycles, then reads the store
files (or every Redis key) for the old values.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from .helpers import LocalSite, Page, run_crawl

pytestmark = pytest.mark.slow

TOKEN = "Bearer OLD-TOKEN-3f9c"
SERVER_COOKIE = "session=SERVER-SECRET-77d1"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _site_pages(site: LocalSite, prefix: str = "") -> None:
    links = '<a href="/a">a</a> <a href="/b">b</a>'
    for path, body in (("/", links), ("/a", "<p>page a</p>"), ("/b", "<p>page b</p>")):
        html = f"<html><body><h1>{path}</h1>{body}</body></html>".encode()
        headers = {"Set-Cookie": f"{SERVER_COOKIE}; Path=/"} if path == "/" else {}
        site.pages[prefix + path] = Page(html, headers=headers)


def _all_recrawls(result: dict) -> bool:
    """Every page of the crawl was a recrawl, rebuilt from its stored request (ranked)."""
    return len(result["items"]) == 3 and all(i["rank"] is not None for i in result["items"])


def _settings(tmp_path: Path, redis_url: str | None = None, **extra) -> dict:
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_LEARN_BOILERPLATE": False,  # no second fetch of a pair in the log
        "RECRAWL_WARMUP_CYCLES": 5,  # every known page recrawled each cycle
    }
    if redis_url is not None:
        settings |= {
            "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
            "REDIS_URL": redis_url,
            "RECRAWL_STORE": redis_url,
        }
    return settings | extra


def _at_rest(tmp_path: Path, redis_url: str | None) -> bytes:
    """Every byte the history keeps: the store's files, or every key and value of the Redis."""
    if redis_url is None:
        return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("history.sqlite3*")))
    import redis

    client = redis.Redis.from_url(redis_url)
    out = []
    for key in client.scan_iter("*"):
        out.append(key)
        kind = client.type(key)
        if kind == b"string":
            out.append(client.get(key))
        elif kind == b"hash":
            out += [b for kv in client.hgetall(key).items() for b in kv]
        elif kind == b"zset":
            out += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == b"list":
            out += client.lrange(key, 0, -1)
        elif kind == b"set":
            out += list(client.smembers(key))
        elif kind == b"stream":
            out += [b for _, e in client.xrange(key) for kv in e.items() for b in kv]
    client.close()
    return b"".join(out)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_later_cycles_use_the_settings_of_their_own_crawl(backend, tmp_path, request):
    """Cycle 1 sends a token (DEFAULT_REQUEST_HEADERS), an old User-Agent, cookies and a
    long timeout; cycles 2 and 3 run without the token, with a new User-Agent, cookies
    off and a short timeout: none of their requests carries an old value, the spider's
    own header is still sent, and the token and cookie are nowhere in the store."""
    redis_url = request.getfixturevalue("redis_db").url if backend == "redis" else None
    old = _settings(
        tmp_path,
        redis_url,
        DEFAULT_REQUEST_HEADERS={"Authorization": TOKEN},
        USER_AGENT="OldBot/1.0",
        DOWNLOAD_TIMEOUT=170,
    )
    new = _settings(tmp_path, redis_url, USER_AGENT="NewBot/2.0", DOWNLOAD_TIMEOUT=42)
    new["COOKIES_ENABLED"] = False
    with LocalSite() as site:
        _site_pages(site)
        start = [site.url + "/"]
        first = run_crawl(start, old, tmp_path, follow=True, headers={"X-Spider": "mine"})
        assert sorted(e["path"] for e in site.log) == ["/", "/a", "/b"]
        # as configured then: the token, the old agent, the server's cookie on the links
        assert all(e["headers"]["authorization"] == TOKEN for e in site.log)
        assert all(e["headers"]["user-agent"] == "OldBot/1.0" for e in site.log)
        assert site.requests_for("/a")[0]["headers"]["cookie"] == SERVER_COOKIE
        assert {i["download_timeout"] for i in first["items"]} == {170}
        for cycle in (2, 3):
            site.log.clear()
            result = run_crawl(start, new, tmp_path, follow=True, headers={"X-Spider": "mine"})
            assert sorted(e["path"] for e in site.log) == ["/", "/a", "/b"], cycle
            assert _all_recrawls(result), cycle
            for entry in site.log:
                headers = entry["headers"]
                assert "authorization" not in headers and "cookie" not in headers, entry
                assert headers["user-agent"] == "NewBot/2.0", entry
            # the spider's own header and meta are what a recrawl keeps
            assert site.requests_for("/")[0]["headers"]["x-spider"] == "mine"
            assert {i["tag"] for i in result["items"]} == {"kept"}
            assert {i["download_timeout"] for i in result["items"]} == {42}
            assert not any(i["noted"] for i in result["items"])
    kept = _at_rest(tmp_path, redis_url)
    for secret in (b"OLD-TOKEN-3f9c", b"SERVER-SECRET-77d1", b"OldBot"):
        assert secret not in kept, secret


def test_a_changed_password_is_the_one_recrawls_send(tmp_path):
    """http_user/http_pass: after the password is rotated on the server and in the spider,
    every recrawl authenticates with the new one; neither is kept in the store."""
    settings = _settings(tmp_path)
    with LocalSite() as site:
        _site_pages(site)
        site.auth = _basic("alice", "OLD-PASS-a1")
        start = [site.url + "/"]
        # Scrapy compares the domain with the URL's host and port
        spider = {"http_user": "alice", "http_auth_domain": site.url.split("//")[1]}
        run_crawl(
            start,
            settings,
            tmp_path,
            follow=True,
            spider_args=spider | {"http_pass": "OLD-PASS-a1"},
        )
        assert [e["headers"]["authorization"] for e in site.log] == [site.auth] * 3
        site.auth = _basic("alice", "NEW-PASS-b2")
        site.log.clear()
        result = run_crawl(
            start,
            settings,
            tmp_path,
            follow=True,
            spider_args=spider | {"http_pass": "NEW-PASS-b2"},
        )
        assert sorted(e["path"] for e in site.log) == ["/", "/a", "/b"]
        assert [e["headers"]["authorization"] for e in site.log] == [site.auth] * 3
        assert sorted(i["status"] for i in result["items"]) == [200] * 3  # no 401
        assert _all_recrawls(result)
    kept = _at_rest(tmp_path, None)
    for password in ("OLD-PASS-a1", "NEW-PASS-b2"):
        assert _basic("alice", password).split()[1].encode() not in kept
        assert password.encode() not in kept


def test_a_removed_proxy_is_not_used_by_recrawls(tmp_path):
    """Cycle 1 goes through a proxy with a password (http_proxy in the environment, as
    HttpProxyMiddleware reads it); cycle 2 has none and HTTPPROXY_ENABLED = False: every
    recrawl goes to the site itself, and the proxy's password is not in the store."""
    settings = _settings(tmp_path)
    with LocalSite() as site, LocalSite() as proxy:
        _site_pages(site)
        _site_pages(proxy, prefix=site.url)  # a proxy is asked for absolute URLs
        proxy_url = proxy.url.replace("http://", "http://puser:PROXY-PASS-c3@")
        start = [site.url + "/"]
        env = {"http_proxy": proxy_url, "no_proxy": ""}
        run_crawl(start, settings, tmp_path, follow=True, env=env)
        assert site.log == [] and len(proxy.log) == 3
        assert {e["headers"]["proxy-authorization"] for e in proxy.log} == {
            _basic("puser", "PROXY-PASS-c3")
        }
        result = run_crawl(start, settings | {"HTTPPROXY_ENABLED": False}, tmp_path, follow=True)
        assert len(proxy.log) == 3  # not asked again
        assert sorted(e["path"] for e in site.log) == ["/", "/a", "/b"]
        assert all("proxy-authorization" not in e["headers"] for e in site.log)
        assert _all_recrawls(result)
    kept = _at_rest(tmp_path, None)
    assert b"PROXY-PASS-c3" not in kept
    assert _basic("puser", "PROXY-PASS-c3").split()[1].encode() not in kept


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_header_unstored_later_leaves_the_stored_requests(backend, tmp_path, request):
    """A recrawl rebuilt from its stored request keeps that request rather than storing
    the same again (stored_request.py, META_REBUILT), unless this crawl's settings would
    store it otherwise: with ``RECRAWL_UNSTORED_HEADERS`` naming the spider's header from
    cycle 2 on, cycle 2 still sends it (its requests were stored with it) and stores them
    without it, and cycle 3 sends it no more."""
    redis_url = request.getfixturevalue("redis_db").url if backend == "redis" else None
    settings = _settings(tmp_path, redis_url)
    with LocalSite() as site:
        _site_pages(site)
        start = [site.url + "/"]
        headers = {"X-Spider": "mine"}
        run_crawl(start, settings, tmp_path, follow=True, headers=headers)
        # the start request's own header (the links followed have none)
        assert site.requests_for("/")[0]["headers"].get("x-spider") == "mine"
        later = settings | {"RECRAWL_UNSTORED_HEADERS": ["X-Spider"]}
        for cycle, sent in ((2, "mine"), (3, None)):
            site.log.clear()
            # the spider's own request for "/" (with its header) is a duplicate of the
            # recrawl: the rebuilt one is what is sent
            result = run_crawl(start, later, tmp_path, follow=True, headers=headers)
            assert _all_recrawls(result), cycle
            assert sorted(e["path"] for e in site.log) == ["/", "/a", "/b"], cycle
            assert site.requests_for("/")[0]["headers"].get("x-spider") == sent, cycle
