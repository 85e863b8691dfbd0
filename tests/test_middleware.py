"""The recording middleware in real crawls of a real local HTTP server."""

from __future__ import annotations

import pytest

from scrapy_recrawl.history import SqliteHistoryStore

from .helpers import LocalSite, Page, run_crawl

pytestmark = pytest.mark.slow


def html(title: str, paragraphs: list[str], links: list[str] = ()) -> bytes:
    ps = "".join(f"<p>{p}</p>" for p in paragraphs)
    ls = "".join(f'<a href="{h}">{h}</a>' for h in links)
    return (
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{ps}<nav>{ls}</nav>"
        "</body></html>"
    ).encode()


TEXT = [
    "The quick brown fox jumps over the lazy dog near the river bank today.",
    "Recrawl schedulers spend a budget of fetches on the pages most likely changed.",
    "Every visit after the first is one observation of whether the page changed.",
]


@pytest.fixture
def site():
    with LocalSite() as s:
        yield s


def settings_for(tmp_path, **extra):
    return {
        "DOWNLOADER_MIDDLEWARES": {"scrapy_recrawl.middleware.RecrawlMiddleware": 585},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        **extra,
    }


def by_url(result):
    return {item["url"].rsplit("/", 1)[1]: item for item in result["items"]}


def test_visits_changes_and_304_over_three_crawls(site, tmp_path):
    site.pages["/etag"] = Page(html("E", TEXT, ["/other"]), etag='"v1"')
    site.pages["/lm"] = Page(html("L", TEXT), last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    site.pages["/plain"] = Page(html("P", TEXT))
    site.pages["/gz"] = Page(html("G", TEXT), gzip=True)
    urls = [site.url + p for p in ("/etag", "/lm", "/plain", "/gz")]
    settings = settings_for(tmp_path)

    first = run_crawl(urls, settings, tmp_path)
    assert first["stats"]["recrawl/new"] == 4 and first["stats"]["recrawl/visits"] == 4
    assert all(i["recrawl"]["changed"] is False for i in first["items"])
    assert site.requests_for("/etag")[0]["if_none_match"] is None

    second = run_crawl(urls, settings, tmp_path)
    items = by_url(second)
    # conditional requests were sent, answered 304, and the spider got the stored page
    assert site.requests_for("/etag")[-1]["if_none_match"] == '"v1"'
    assert site.requests_for("/lm")[-1]["if_modified_since"] == "Mon, 01 Jan 2024 00:00:00 GMT"
    assert site.requests_for("/plain")[-1]["if_none_match"] is None
    for name in ("etag", "lm"):
        assert items[name]["status"] == 200
        assert "recrawl:not_modified" in items[name]["flags"]
        assert items[name]["tag"] == "kept"
    assert items["etag"]["links"] == ["/other"]  # outlinks survive the 304
    assert items["etag"]["size"] == len(site.pages["/etag"].body)
    assert second["stats"]["recrawl/not_modified"] == 2
    assert second["stats"]["recrawl/unchanged"] == 2  # /plain and /gz, compared in full
    assert "recrawl/changed" not in second["stats"]

    # a real text change on two pages; /gz unchanged (compared decompressed)
    site.pages["/etag"] = Page(
        html("E", TEXT + ["A brand new paragraph about something else."]), etag='"v2"'
    )
    site.pages["/plain"] = Page(
        html("P", TEXT[:1] + ["Completely different words replace the rest now."])
    )
    third = by_url(run_crawl(urls, settings, tmp_path))
    assert third["etag"]["recrawl"]["changed"] is True and third["etag"]["recrawl"]["added"] >= 1
    assert third["plain"]["recrawl"]["changed"] is True
    assert third["gz"]["recrawl"]["changed"] is False
    assert third["lm"]["recrawl"]["changed"] is False

    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        assert store.cycle == 3
        log = store.visit_log()
        assert len(log["status"]) == 12  # one record per response
        arr = store.arrays()
        assert sorted(arr.columns["n"].tolist()) == [2, 2, 2, 2]
        assert sorted(arr.columns["X"].tolist()) == [0, 0, 1, 1]


def test_change_after_304_is_compared_with_the_last_full_body(site, tmp_path):
    """apache/stormcrawler#418: a 304 must not refresh the signature."""
    site.pages["/p"] = Page(html("P", TEXT), etag='"a"')
    settings = settings_for(tmp_path)
    url = [site.url + "/p"]
    run_crawl(url, settings, tmp_path)
    assert "recrawl:not_modified" in run_crawl(url, settings, tmp_path)["items"][0]["flags"]
    site.pages["/p"] = Page(
        html("P", ["Only this sentence is left on the whole page now."]), etag='"b"'
    )
    assert run_crawl(url, settings, tmp_path)["items"][0]["recrawl"]["changed"] is True
    # and the same body again is no change
    assert run_crawl(url, settings, tmp_path)["items"][0]["recrawl"]["changed"] is False


def test_errors_gone_and_odd_bodies_never_crash(site, tmp_path):
    site.pages["/missing"] = Page(b"gone", status=410, content_type="text/plain")
    site.pages["/broken"] = Page(b"<html><body><p>oops", status=500)
    site.pages["/png"] = Page(bytes(range(256)) * 50, content_type="image/png")
    site.pages["/json"] = Page(b'{"a": 1}', content_type="application/json")
    site.pages["/latin"] = Page(
        "<p>caf\xe9 cr\xe8me</p>".encode("latin-1"), content_type="text/html; charset=utf-8"
    )
    site.pages["/junk"] = Page(bytes(range(256)) * 10, content_type="text/html")
    site.pages["/empty"] = Page(b"", content_type="text/html")
    site.pages["/huge"] = Page(html("H", TEXT * 200), etag='"h"')
    site.pages["/malformed"] = Page(
        b"<html><<<p>></div></td>text<b><i>unclosed", content_type="text/html"
    )
    paths = [
        "/missing",
        "/broken",
        "/png",
        "/json",
        "/latin",
        "/junk",
        "/empty",
        "/huge",
        "/malformed",
        "/nope",
    ]
    urls = [site.url + p for p in paths]
    settings = settings_for(tmp_path, RECRAWL_MAX_PARSE_BYTES=5000)
    first = run_crawl(urls, settings, tmp_path)
    assert "Traceback" not in first["log"], first["log"]
    assert first["stats"]["recrawl/gone"] == 2  # 410 and 404
    assert first["stats"]["recrawl/errors"] == 1  # the 500
    site.pages["/png"] = Page(bytes(range(255, -1, -1)) * 50, content_type="image/png")
    second = run_crawl(urls, settings, tmp_path)
    assert "Traceback" not in second["log"], second["log"]
    items = by_url(second)
    assert items["png"]["recrawl"]["changed"] is True
    for name in ("json", "latin", "junk", "empty", "huge", "malformed"):
        assert items[name]["recrawl"]["changed"] is False, name
    # a body over RECRAWL_MAX_PARSE_BYTES is not kept, so no conditional request for it
    assert site.requests_for("/huge")[-1]["if_none_match"] is None
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        arr = store.arrays()
        assert int(arr.columns["gone"].sum()) == 2
        # the 500 is no observation; 6 good pages observed once
        assert int(arr.columns["n"].sum()) == 7


def test_conditional_get_can_be_switched_off(site, tmp_path):
    site.pages["/p"] = Page(html("P", TEXT), etag='"a"')
    settings = settings_for(tmp_path, RECRAWL_CONDITIONAL_GET=False)
    for _ in range(2):
        run_crawl([site.url + "/p"], settings, tmp_path)
    # the first crawl's second fetch is the boilerplate pair (docs/detection.md)
    assert [r["if_none_match"] for r in site.requests_for("/p")] == [None, None, None]


def test_redirect_is_recorded_under_the_final_url(site, tmp_path):
    site.pages["/new"] = Page(html("N", TEXT), etag='"n"')
    site.pages["/old"] = Page(b"", status=301, headers={"Location": "/new"})
    settings = settings_for(tmp_path)
    run_crawl([site.url + "/new"], settings, tmp_path)
    result = run_crawl([site.url + "/old"], settings, tmp_path)
    assert result["items"][0]["url"].endswith("/new")
    # the validators of /new were not sent to /old
    assert site.requests_for("/old")[-1]["if_none_match"] is None


def test_unusable_store_fails_at_start_naming_the_setting(site, tmp_path):
    (tmp_path / "afile").write_text("x")
    settings = settings_for(tmp_path, RECRAWL_STORE=str(tmp_path / "afile" / "h.sqlite3"))
    with pytest.raises(AssertionError, match="RECRAWL_STORE"):
        run_crawl([site.url + "/p"], settings, tmp_path)


def test_first_visit_defers_the_signature_and_a_change_gets_full_counts(site, tmp_path):
    from scrapy_recrawl.change import ChangeDetector, Signature

    v1 = html("D", TEXT)
    v2 = html("D", TEXT[:2] + ["A new closing paragraph replaces the third one here."])
    site.pages["/d"] = Page(v1)
    settings = settings_for(tmp_path)
    run_crawl([site.url + "/d"], settings, tmp_path)
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        (rec_id,) = store.arrays().ids.tolist()
        fp = store.db.execute("SELECT fingerprint FROM urls").fetchone()[0]
        assert Signature.from_bytes(store.get(fp).signature).kind == "deferred"
    site.pages["/d"] = Page(v2)
    got = run_crawl([site.url + "/d"], settings, tmp_path)["items"][0]["recrawl"]
    det = ChangeDetector()
    full = det.compare(det.signature(v1, "u", "text/html"), det.signature(v2, "u", "text/html"))
    assert got == {
        "changed": True,
        "distance": full.distance,
        "added": full.added,
        "removed": full.removed,
        "modified": full.modified,
        "attributes": full.attributes,
    }
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        assert Signature.from_bytes(store.get(fp).signature).kind == "html"


def test_signature_of_an_older_version_is_made_again_from_the_stored_body(site, tmp_path):
    from scrapy_recrawl.change import ChangeDetector, Signature

    v1 = html("O", TEXT)
    v2 = html("O", TEXT[:2] + ["A new closing paragraph replaces the third one here."])
    site.pages["/o"] = Page(v1)
    settings = settings_for(tmp_path)
    run_crawl([site.url + "/o"], settings, tmp_path)
    run_crawl([site.url + "/o"], settings, tmp_path)  # same bytes again
    det = ChangeDetector()
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        (url_id,) = store.arrays().ids.tolist()
        # what an older scrapy-recrawl left: same layout, another version byte
        old = bytearray(det.signature(v1, "u", "text/html").to_bytes())
        old[4] = Signature._VERSION - 1
        store.db.execute("UPDATE signatures SET signature = ? WHERE url_id = ?", (old, url_id))
        store.db.commit()
    site.pages["/o"] = Page(v2)
    got = run_crawl([site.url + "/o"], settings, tmp_path)["items"][0]["recrawl"]
    full = det.compare(det.signature(v1, "u", "text/html"), det.signature(v2, "u", "text/html"))
    # compared with the stored v1 body, signed again: the full counts, not "start afresh"
    assert got["changed"] is True and (got["added"], got["removed"], got["modified"]) == (
        full.added,
        full.removed,
        full.modified,
    )
