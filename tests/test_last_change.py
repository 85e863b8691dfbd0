"""Seeing a change (issue 31, item 4): the body before a URL's last change kept through
side storage on both backends (history/previous_body.py), its readable element diff
(change/diff_view.py: the detector's counts, element by element), and ``recrawl-report
--url URL`` on real crawls of the reference shop: the diff of a real price change, the
trial of ignore and watch rules, and a user's mistakes in one line."""

from __future__ import annotations

import json
import math
import re
import urllib.request

import pytest

from example_project.reference import ReferenceSite, start_in_thread
from example_project.reference.crawl import crawl, make_project
from scrapy_recrawl.change import ChangeDetector
from scrapy_recrawl.change.diff_view import diff_bodies
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.previous_body import (
    TABLE,
    PreviousBodies,
    PreviousBody,
    previous_body,
)
from scrapy_recrawl.history.records import RecordError
from scrapy_recrawl.history.redis import RedisHistoryStore

from .cli_project import scrapy, scrapy_in_process
from .redis_server import RedisServer

#: what the reference site sends on every request (docs/example.md) but is no content
BOILERPLATE = [
    '//p[@class="rendered"]',
    '//p[@class="viewers"]',
    "//aside",
    '//div[@class="ad-slot"]',
    "//a/@href",  # session ids and ad links
    "//time",  # the relative review date
]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url) as r:
        return r.read()


# -- the record and the keeper, on both stores ---------------------------------------------


def test_a_record_goes_there_and_back_and_junk_is_refused():
    rec = PreviousBody(3, 1.5, 2, math.nan, "text/html", 5, b"<p>x</p>", b"h" * 16)
    back = PreviousBody.from_bytes(rec.to_bytes())
    assert back.body == b"<p>x</p>" and back.cycle == 3 and math.isnan(back.before_time)
    assert (
        PreviousBody.from_bytes(PreviousBody(3, 1.5, 2, 0.0, None, 9, None, b"").to_bytes()).body
        is None
    )
    for junk in (b"", b"\x01\x00\x00\x00", b"not a record at all"):
        with pytest.raises(RecordError):
            PreviousBody.from_bytes(junk)


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteHistoryStore(tmp_path / "history.sqlite3")
    else:
        s = RedisHistoryStore(request.getfixturevalue("redis_db").url, shards=1)
    s.open()
    yield s
    s.close()


def _visit(body: bytes, time: float, cycle: int) -> Visit:
    return Visit(
        b"f" * 20, "http://a.test/p", time, 200, body=body, cycle=cycle,
        headers={"Content-Type": ["text/html"], "Set-Cookie": ["sid=secret"]},
    )  # fmt: skip


def test_the_body_before_a_change_is_kept_bounded_and_only_when_it_is_that_version(store):
    d = ChangeDetector()
    keeper = PreviousBodies(store, 64, d.content_hash)
    old, new = b"<p>price 10</p>", b"<p>price 12</p>"
    rec = store.record(_visit(old, 100.0, 1))
    store.flush()
    kwargs = dict(before_cycle=1, before_time=100.0, cycle=2, time=200.0)
    assert keeper.changed(rec.id, rec.fingerprint, before=d.content_hash(old),
                          after=d.content_hash(new), **kwargs)  # fmt: skip
    kept = previous_body(store, rec.id)
    assert kept is not None and kept.body == old and kept.content_type == "text/html"
    assert (kept.cycle, kept.before_cycle, kept.after) == (2, 1, d.content_hash(new))
    # only the Content-Type of the headers: no cookie is copied aside
    assert b"secret" not in store.side_get(TABLE, [rec.id])[0]
    # the kept body is not the version the change was seen against: the stale record goes
    assert not keeper.changed(rec.id, rec.fingerprint, before=d.content_hash(b"other"),
                              after=d.content_hash(new), **kwargs)  # fmt: skip
    assert previous_body(store, rec.id) is None
    # over the bound: its size only
    big = b"<p>" + b"x" * 100 + b"</p>"
    store.record(_visit(big, 300.0, 3))
    store.flush()
    assert keeper.changed(rec.id, rec.fingerprint, before=d.content_hash(big),
                          after=d.content_hash(new), **kwargs)  # fmt: skip
    kept = previous_body(store, rec.id)
    assert kept is not None and kept.body is None and kept.size == len(big)


def test_a_damaged_previous_version_is_said_in_one_line_not_raised(store):
    from scrapy_recrawl.insight.last_change import NoPrevious, last_change

    rec = store.record(_visit(b"<p>price 10</p>", 100.0, 1))
    store.flush()
    store.side_put(TABLE, [(rec.id, b"\x00 not a record")])
    with pytest.raises(NoPrevious, match="unreadable"):
        last_change(store, rec.id, rec.url, rec.fingerprint, ChangeDetector())


def test_the_keeper_is_off_when_asked_or_when_no_body_is_kept(store):
    h = ChangeDetector.content_hash
    assert PreviousBodies.from_settings({}, store, h) is not None
    assert PreviousBodies.from_settings({"RECRAWL_KEEP_PREVIOUS": False}, store, h) is None
    assert PreviousBodies.from_settings({"RECRAWL_PREVIOUS_BODY_MAX_BYTES": 0}, store, h) is None
    store.store_bodies = False
    assert PreviousBodies.from_settings({}, store, h) is None


# -- the readable diff is the detector's ---------------------------------------------------


@pytest.fixture(scope="module")
def site():
    s = ReferenceSite(seed=1, sites=["shop"], products=12, categories=2, daily_products=3)
    url, stop = start_in_thread(s)
    yield s, url
    stop()


def test_the_readable_diff_counts_what_the_detector_counts(site):
    s, base = site
    paths = ["/shop/", "/shop/category/1", "/shop/product/1", "/shop/product/11"]
    before = {p: _get(base + p) for p in paths}
    s.advance()
    after = {p: _get(base + p) for p in paths}
    learned = ChangeDetector()  # learned-like: leave out the header link's key
    for d in (
        ChangeDetector(),
        ChangeDetector(ignore_xpaths=BOILERPLATE),
        ChangeDetector(watch_xpaths=["//article"]),
        ChangeDetector(watch_xpaths=["//nope"]),  # none there: the whole page
    ):
        for p in paths:
            url = base + p
            old, new = (d.signature(b[p], url, "text/html") for b in (before, after))
            r = d.compare(old, new)
            shown = diff_bodies(d, (before[p], "text/html"), (after[p], "text/html"), url)
            assert shown.counts() == (r.added, r.removed, r.modified, r.attributes), (d, p)
    # with the learned boilerplate left out, as the crawl compares
    from scrapy_recrawl.change import Ignore

    url = base + "/shop/product/1"
    keys = learned.elements_by_key(after["/shop/product/1"], url)
    aside = [k for k, els in keys.items() if els[0].getparent() is not None
             and els[0].getparent().tag == "aside"]  # fmt: skip
    import numpy as np

    ignore = Ignore(np.array(sorted(aside), dtype=np.uint64), np.array([], dtype=np.uint64))
    old, new = (learned.signature(b["/shop/product/1"], url, None) for b in (before, after))
    r = learned.compare(old, new, ignore=ignore)
    shown = diff_bodies(
        learned, (before["/shop/product/1"], None), (after["/shop/product/1"], None), url, ignore
    )
    assert shown.counts() == (r.added, r.removed, r.modified, r.attributes)


# -- recrawl-report --url on real crawls, SQLite and Redis --------------------------------


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def crawled(request, tmp_path_factory):
    """The reference shop (15 pages) crawled on day 0 and day 1, learning off, so the
    rotating boilerplate reads as a change: its store and the site's truth."""
    root = tmp_path_factory.mktemp(f"last-change-{request.param}")
    project = make_project(root / "proj", "RECRAWL_LEARN_BOILERPLATE = False\n")
    s = ReferenceSite(seed=1, sites=["shop"], products=12, categories=2, daily_products=3)
    base, stop = start_in_thread(s)
    server = None
    try:
        if request.param == "sqlite":
            store = str(root / "history.sqlite3")
            stats_file = None
        else:
            server = RedisServer()
            server.__enter__()
            store = server.url
            stats_file = root / "stats.json"
        stats = []
        for _ in range(2):
            stats.append(crawl(project, "shop", base + "/shop/", store, stats_file=stats_file))
            s.advance()
        truth = json.loads(_get(base + "/_truth/changes?day=1"))["pages"]
        yield project, store, base, stats, {p["path"]: p for p in truth}
    finally:
        stop()
        if server is not None:
            server.__exit__(None, None, None)


def report(crawled, *args: str):
    project, store, *_ = crawled
    return scrapy_in_process(
        project, "recrawl-report", "--spider", "shop", "-s", f"RECRAWL_STORE={store}", *args
    )


def _product(truth: dict, klass: str, validators: bool = False) -> str:
    return next(
        p for p, t in sorted(truth.items())
        if t.get("class") == klass and (t.get("validators") != "none") == validators
    )  # fmt: skip


@pytest.mark.slow
def test_the_report_shows_a_real_price_change_readably(crawled):
    _, _, base, stats, truth = crawled
    assert stats[1]["recrawl/previous_kept"] >= 3
    path = _product(truth, "daily", validators=True)
    assert truth[path]["changes"] == [1]
    run = report(crawled, "--url", base + path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    out = run.stdout
    assert "Last change, seen in cycle 2:" in out and "as the crawl compares now: a change" in out
    # the price line: its XPath, the old and the new price
    at = out.index('/html/body/main/article/p[@class="price"]')
    old, new = re.findall(r"^\s+[-+] (.*)$", out[at:], re.M)[:2]
    assert re.fullmatch(r"\$\d+\.\d\d", old) and re.fullmatch(r"\$\d+\.\d\d", new) and old != new
    data = json.loads(report(crawled, "--url", base + path, "--format", "json").stdout)
    last = data["last_change"]
    assert last["now"]["changed"] and last["change_cycle"] == 2 and last["trial"] is None
    lines = [ln for s in last["now"]["sections"] for ln in s["lines"]]
    price = [ln for ln in lines if ln["path"].endswith('p[@class="price"]')]
    assert price == [{"kind": "modified", "path": price[0]["path"], "old": old, "new": new}]


@pytest.mark.slow
def test_ignoring_the_boilerplate_turns_a_boilerplate_only_change_into_none(crawled):
    _, _, base, _, truth = crawled
    path = _product(truth, "never")  # no validators: refetched whole, boilerplate moved
    assert truth[path]["changes"] == []
    url = base + path
    plain = report(crawled, "--url", url)
    assert "as the crawl compares now: a change" in plain.stdout
    args = [a for x in BOILERPLATE for a in ("--ignore", x)]
    run = report(crawled, "--url", url, *args)
    assert run.returncode == 0, run.stderr
    assert "under the trial rules: no change" in run.stdout
    assert "verdict: no longer a change under the trial rules" in run.stdout
    # one rule short (the rotating block): still a change, and the diff says where
    fewer = [a for x in BOILERPLATE if x != "//aside" for a in ("--ignore", x)]
    run = report(crawled, "--url", url, *fewer)
    assert "verdict: still a change under the trial rules" in run.stdout
    trial = run.stdout[run.stdout.index("under the trial rules") :]
    assert "/html/body/aside/ul/li/a" in trial and "Rendered at" not in trial
    # watching the price: a boilerplate change is none; the real change stays one
    run = report(crawled, "--url", url, "--watch-css", "p.price", "--format", "json")
    assert json.loads(run.stdout)["last_change"]["trial"]["changed"] is False
    daily = base + _product(truth, "daily", validators=True)
    run = report(crawled, "--url", daily, "--watch", '//p[@class="price"]', "--format", "json")
    trial = json.loads(run.stdout)["last_change"]["trial"]
    assert trial["changed"] is True and trial["modified"] == 1
    assert trial["rules"] == 'watching //p[@class="price"]'


@pytest.mark.slow
def test_mistakes_are_one_line_and_exit_1(crawled):
    _, _, base, _, truth = crawled
    url = base + _product(truth, "daily", validators=True)
    cases = [
        (["--url", base + "/shop/nope", "--ignore", "//p"], "not in the history store"),
        (["--url", url, "--ignore", "//p["], "--ignore: bad XPath '//p['"),
        (["--url", url, "--watch", "//p[@"], "--watch: bad XPath"),
        (["--url", url, "--watch-css", "p..x"], "--watch-css: bad CSS selector"),
        # a product with validators that never changes: 304s, no change, nothing kept
        (["--url", base + _product(truth, "never", validators=True), "--ignore", "//p"],
         "no version before its last change is kept"),
    ]  # fmt: skip
    for args, said in cases:
        run = report(crawled, *args)
        assert run.returncode == 1, (args, run.stdout, run.stderr)
        assert len(run.lines) == 1 and said in run.stderr, (args, run.stderr)
        assert "Traceback" not in run.stderr
    # without a trial, a URL with nothing kept still shows its story, and says why
    run = report(crawled, "--url", base + _product(truth, "never", validators=True))
    assert run.returncode == 0 and "note: last change: no version before" in run.stdout
    # as a user types it: the command line, a new process
    project, store, *_ = crawled
    run = scrapy(project, "recrawl-report", "--spider", "shop", "-s", f"RECRAWL_STORE={store}", "--url", url,
                 "--ignore", "//p[")  # fmt: skip
    assert run.returncode == 1 and len(run.lines) == 1 and "Traceback" not in run.stderr
    run = report(crawled, "--ignore", "//p")
    assert run.returncode == 2 and "add --url" in run.stderr


def _data_page(price: str) -> bytes:
    return (
        "<html><head><title>Lamp</title>"
        f'<meta property="og:price" content="{price}">'
        '<script type="application/ld+json">'
        f'{{"@type": "Product", "offers": [{{"price": "{price}"}}]}}</script></head>'
        f'<body><p class="price" data-price="{price}">A lamp for {price}</p></body></html>'
    ).encode()


def test_data_parts_are_named_by_what_they_are():
    d = ChangeDetector()
    url = "http://shop.test/lamp"
    shown = diff_bodies(d, (_data_page("10"), None), (_data_page("12"), None), url)
    r = d.compare(*(d.signature(_data_page(p), url, None) for p in ("10", "12")))
    assert shown.counts() == (r.added, r.removed, r.modified, r.attributes)
    lines = {(a.path, a.shown, b.shown) for a, b in shown.modified}
    assert ("<meta og:price>", "10", "12") in lines
    assert ("application/ld+json.offers[].price", "10", "12") in lines
    assert ('/html/body/p[@class="price"]', "A lamp for 10", "A lamp for 12") in lines
    assert ('/html/body/p[@class="price"] data-*', "data-price=10", "data-price=12") in lines
