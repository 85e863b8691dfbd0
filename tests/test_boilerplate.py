"""Boilerplate learned with no configuration (change/boilerplate.py, boilerplate_pairs.py):
the rule on hand-made signatures, then real crawls of a local site whose every response
carries a render time, a viewer counter, CSRF tokens, session ids in links and a rotating
block."""

from __future__ import annotations

import itertools
import json
import random
import time

import numpy as np
import pytest

from scrapy_recrawl.change import BoilerplateModel, ChangeDetector
from scrapy_recrawl.change.boilerplate import TABLE, SectionStats, section_of, touched
from scrapy_recrawl.history import SqliteHistoryStore

from .helpers import LocalSite, run_crawl

_serial = itertools.count()


def shop_page(
    prices: list[int], *, boilerplate: bool = True, seed: int | None = None, home: str = "Home"
) -> bytes:
    """A category page listing ``prices``; with ``boilerplate``, what changes on every
    request: a render time, a viewer counter, CSRF tokens, session ids, a rotation."""
    r = random.Random(next(_serial) if seed is None else seed)
    sid = f"?sid={r.randint(10000, 99999)}" if boilerplate else ""
    listing = "".join(
        f'<li><a href="/product/{i}{sid}">Product number {i}</a> '
        f'<span class="price">${p}.00</span></li>'
        for i, p in enumerate(prices)
    )
    parts = [
        "<html><head><title>Category</title>",
        f'<meta name="csrf-token" content="{r.getrandbits(64):x}">' if boilerplate else "",
        "</head><body><header><a href=",
        f'"/{sid}">{home}</a>',
        f'<span class="viewers">{r.randint(2, 90)} people are viewing this</span>'
        if boilerplate
        else "",
        f'</header><main><h1>All the products</h1><ul class="products">{listing}</ul>',
        f'<form><input type="hidden" name="csrf" value="{r.getrandbits(30):x}"></form>'
        if boilerplate
        else "",
        "</main>",
    ]
    if boilerplate:
        also = "".join(
            f'<li><a href="/product/{r.randint(50, 99)}">Also like {r.randint(1, 999)}</a></li>'
            for _ in range(3)
        )
        parts.append(f"<aside><h3>You may also like</h3><ul>{also}</ul></aside>")
        parts.append(f"<footer><p>Rendered at {time.time():.6f} by node {r.randint(1, 9)}</p>")
        parts.append("</footer>")
    parts.append("</body></html>")
    return "".join(parts).encode()


# -- the rule ------------------------------------------------------------------------------


def test_section_of_folds_digits_and_keeps_the_host():
    assert section_of("http://Shop.test:8080/shop/product/12?x=1") == (
        "shop.test:8080",
        "shop.test:8080/shop/product",
    )
    assert section_of("https://news.test/2024/05/slug")[1] == "news.test/N/N"
    assert section_of("https://news.test/")[1] == "news.test/"
    assert section_of("https://news.test/about.html")[1] == "news.test/"
    assert section_of("https://news.test/page/3")[1] == "news.test/page"
    assert section_of("https://news.test/news/")[1] == "news.test/news"
    assert section_of("https://news.test/a/b/c/d")[1] == "news.test/a/b"


def test_a_pair_learns_what_moves_and_later_comparisons_leave_it_out():
    d = ChangeDetector()
    url = "http://shop.test/category/1"
    sig = lambda prices: d.signature(shop_page(prices), url, "text/html")  # noqa: E731
    first, second = sig([10, 20, 30]), sig([10, 20, 30])
    # without what is learned, two requests a moment apart read as a change
    assert d.compare(first, second).changed
    model = BoilerplateModel(pairs=1)
    assert model.wants_pair(url, 1)  # a first fetch: nothing compared yet
    assert not model.wants_pair(url, 1, first, second)  # in flight: one is enough
    stats = model.add_pair(url, first, second)
    ignore = model.ignore_for(url)
    # the counter, the render time, the rotation's texts; the session ids' attributes
    assert ignore.text.size >= 3 and ignore.attrs.size >= 1
    assert not np.isin(ignore.text, ignore.attrs).any()
    assert stats.pairs == 1
    later = sig([10, 20, 30])
    assert not d.compare(second, later, ignore=ignore).changed
    priced = sig([10, 21, 30])
    result = d.compare(later, priced, ignore=ignore)
    assert result.changed and result.modified == 1 and result.added == result.removed == 0
    grown = sig([10, 21, 30, 40])
    result = d.compare(priced, grown, ignore=ignore)
    assert result.changed and result.added == 2  # the product's link and its price
    # a page of the same section and, before its own pair, the host's other sections
    assert model.ignore_for("http://shop.test/category/7").text.size == ignore.text.size
    assert model.ignore_for("http://shop.test/product/7").text.size == ignore.text.size
    assert not model.ignore_for("http://other.test/category/1")


def test_a_page_without_boilerplate_learns_nothing():
    d = ChangeDetector()
    url = "http://plain.test/category/1"
    body = shop_page([1, 2], boilerplate=False)
    a, b = d.signature(body, url, "text/html"), d.signature(body, url, "text/html")
    present, text, attrs = touched(a, b)
    assert present.size and not text.size and not attrs.size
    model = BoilerplateModel(pairs=1)
    assert model.wants_pair(url, 1, a, b)
    model.add_pair(url, a, b)
    assert not model.ignore_for(url)


def test_changes_on_keys_no_pair_saw_ask_for_one_more_pair_once_per_cycle():
    d = ChangeDetector()
    url = "http://shop.test/category/1"
    sig = lambda prices, **kw: d.signature(shop_page(prices, **kw), url, "text/html")  # noqa: E731
    model = BoilerplateModel(pairs=1)
    a = sig([1, 2], boilerplate=False, seed=1)
    assert model.wants_pair(url, 1, a, a)
    model.add_pair(url, a, a)
    # a known key changes (a price): no new pair
    assert not model.wants_pair(url, 2, a, sig([1, 3], boilerplate=False))
    # a block no pair had (the rotation, the counter ...): one pair, in this cycle only
    moved = sig([1, 2])
    assert model.wants_pair(url, 2, a, moved)
    model.pair_failed(url)
    assert not model.wants_pair(url, 2, a, moved)
    assert model.wants_pair(url, 3, a, moved)


def test_sections_round_trip_as_bytes_and_bad_records_are_named():
    d = ChangeDetector()
    url = "http://shop.test/category/1"
    model = BoilerplateModel()
    a, b = d.signature(shop_page([1]), url, "text/html"), d.signature(shop_page([1]), url, "")
    assert model.wants_pair(url, 1, a, b)
    model.add_pair(url, a, b)
    records = model.records()
    assert len(records) == 1 and model.records() == []  # only what changed since
    again = BoilerplateModel()
    assert again.load(records) == []
    (stats,) = list(again)
    assert stats.section == "shop.test/category" and stats.pairs == 1
    assert np.array_equal(stats.ignore().text, model.ignore_for(url).text)
    problems = again.load([(7, b"RCBP\x01junk"), (8, b"nope")])
    assert len(problems) == 2 and "boilerplate record 7" in problems[0]
    with pytest.raises(ValueError):
        SectionStats.from_bytes(records[0][1][:-3])


def test_a_signature_made_under_other_ignore_rules_is_known():
    url = "http://shop.test/category/1"
    body = shop_page([1], boilerplate=False)
    plain, pinned = ChangeDetector(), ChangeDetector(ignore_xpaths=["//footer"])
    sig = plain.signature(body, url, "text/html")
    assert plain.same_rules(sig) and not pinned.same_rules(sig)
    assert pinned.same_rules(plain.deferred(body))
    # reused only under the same rules, even for the same bytes
    assert pinned.signature(body, url, "text/html", previous=sig) is not sig


# -- real crawls -------------------------------------------------------------------------


class LivePage:
    """A page rendered anew at every request (what LocalSite serves)."""

    status = 200
    content_type = "text/html; charset=utf-8"
    etag = None
    last_modified = None
    gzip = False

    def __init__(self, prices: list[int], boilerplate: bool = True) -> None:
        self.prices, self.boilerplate, self.headers, self.home = prices, boilerplate, {}, "Home"

    @property
    def body(self) -> bytes:
        return shop_page(self.prices, boilerplate=self.boilerplate, home=self.home)


@pytest.fixture
def shop():
    with LocalSite() as site:
        for i in range(8):
            site.pages[f"/category/{i}"] = LivePage([10 * i + k for k in range(4)])
        yield site


def _changed(result) -> dict[str, bool | None]:
    return {
        item["url"].rsplit("/", 1)[1]: (item["recrawl"] or {}).get("changed")
        for item in result["items"]
    }


def _settings(tmp_path, **extra):
    return {
        "DOWNLOADER_MIDDLEWARES": {"scrapy_recrawl.middleware.RecrawlMiddleware": 585},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        **extra,
    }


@pytest.mark.slow
def test_zero_configuration_boilerplate_reads_as_unchanged_and_real_changes_still_show(
    shop, tmp_path
):
    urls = [shop.url + f"/category/{i}" for i in range(8)]
    settings = _settings(tmp_path)
    first = run_crawl(urls, settings, tmp_path)
    # at the section's first fetches, two of its pages are fetched again at once (two
    # pairs), counted apart from the visits
    assert first["stats"]["recrawl/boilerplate/pair_fetches"] == 2
    assert first["stats"]["recrawl/boilerplate/pairs"] == 2
    assert first["stats"]["recrawl/visits"] == 8 and len(shop.log) == 8 + 2
    # so the first comparisons already leave the boilerplate out
    second = run_crawl(urls, settings, tmp_path)
    assert set(_changed(second).values()) == {False}, _changed(second)
    assert "recrawl/boilerplate/pair_fetches" not in second["stats"]  # kept in the store
    assert len(shop.log) == 8 + 2 + 8
    third = run_crawl(urls, settings, tmp_path)
    assert set(_changed(third).values()) == {False}, _changed(third)
    shop.pages["/category/3"].prices[1] += 1
    shop.pages["/category/5"].prices.append(99)
    fourth = run_crawl(urls, settings, tmp_path)
    assert {k for k, v in _changed(fourth).items() if v} == {"3", "5"}, _changed(fourth)
    assert "recrawl/boilerplate/pair_fetches" not in fourth["stats"]  # known parts changed
    with SqliteHistoryStore(str(tmp_path / "history.sqlite3"), read_only=True) as store:
        (stats,) = [SectionStats.from_bytes(v) for _, v in store.side_items(TABLE)]
    assert stats.section.endswith("/category") and stats.pairs == 2


@pytest.mark.slow
def test_learning_off_sends_no_second_fetch(shop, tmp_path):
    urls = [shop.url + f"/category/{i}" for i in range(3)]
    settings = _settings(tmp_path, RECRAWL_LEARN_BOILERPLATE=False)
    run_crawl(urls, settings, tmp_path)
    assert set(_changed(run_crawl(urls, settings, tmp_path)).values()) == {True}
    assert len(shop.log) == 6


@pytest.mark.slow
@pytest.mark.parametrize("bodies", [True, False])
def test_an_edited_ignore_list_is_no_change(shop, tmp_path, bodies):
    """Pinning a part that moved (here the header) is no change: the kept copy is signed
    again under the new rules; with no copy kept, the visit is recorded without a change
    observation (a new baseline)."""
    for page in shop.pages.values():
        page.boilerplate = False
    urls = [shop.url + f"/category/{i}" for i in range(4)]
    settings = _settings(tmp_path, RECRAWL_STORE_BODIES=bodies)
    run_crawl(urls, settings, tmp_path)
    for page in shop.pages.values():
        page.prices[0] += 1  # a real change: every signature is a full one from now on
    assert set(_changed(run_crawl(urls, settings, tmp_path)).values()) == {True}
    for page in shop.pages.values():
        page.home = "Back to the shop"
    edited = {**settings, "RECRAWL_IGNORE_XPATHS": ["//header"]}
    result = run_crawl(urls, edited, tmp_path)
    assert "recrawl/changed" not in result["stats"]
    assert result["stats"]["recrawl/resigned"] == 4
    if bodies:
        assert set(_changed(result).values()) == {False}
        assert "recrawl/rebaselined" not in result["stats"]
    else:
        # nothing to compare with, as at a first fetch
        assert all("recrawl:new" in item["flags"] for item in result["items"])
        assert result["stats"]["recrawl/rebaselined"] == 4
    # and from then on, compared as usual under the new rules
    shop.pages["/category/2"].prices[0] += 5
    again = _changed(run_crawl(urls, edited, tmp_path))
    assert {k for k, v in again.items() if v} == {"2"}, again


@pytest.mark.slow
def test_the_report_names_what_was_learned_and_reset_forgets_it(shop, tmp_path):
    from .cli_project import make_project, scrapy

    project = make_project(tmp_path, 'RECRAWL_STORE = "history.sqlite3"\n')
    links = "".join(f'<a href="/category/{i}">c{i}</a>' for i in range(8))

    class Home(LivePage):
        @property
        def body(self) -> bytes:
            return f"<html><body><nav>{links}</nav></body></html>".encode()

    shop.pages["/"] = Home([])  # the home page links every category
    for _ in range(2):
        run = scrapy(project, "crawl", "pages", "-a", f"start_url={shop.url}/")
        assert run.returncode == 0, run.stderr
    run = scrapy(project, "recrawl-report", "--format", "json")
    assert run.returncode == 0, run.stderr
    learned = {s["section"].split("/", 1)[1]: s for s in json.loads(run.stdout)["learned"]}
    assert set(learned) == {"", "category"}  # the home page's section learned nothing
    assert learned[""]["volatile"] == learned[""]["attributes"] == []
    section = learned["category"]
    assert section["section"].endswith("/category") and section["pairs"] == 2
    assert {"/html/body/footer/p", "/html/body/header/span"} <= set(section["volatile"])
    assert "/html/body/aside/ul/li/a" in section["volatile"]
    # the session ids: those links are compared without their attributes
    assert "/html/body/main/ul/li/a" in section["attributes"]
    assert section["named_from"].startswith(shop.url + "/category/")
    assert section["pin_line"].startswith("RECRAWL_IGNORE_XPATHS = [")
    # the line does what was learned: the session ids' attributes are pinned too
    assert "'/html/body/main/ul/li/a/@*'" in section["pin_line"]
    assert "'/html/body/footer/p'" in section["pin_line"]
    run = scrapy(project, "recrawl-report")
    assert "Boilerplate learned" in run.stdout and "/html/body/footer/p" in run.stdout

    run = scrapy(project, "recrawl-reset", "pages", "--boilerplate", "--yes")
    assert run.returncode == 0 and "Forgot the boilerplate learned for 2 sections" in run.stdout
    with SqliteHistoryStore(str(project / "history.sqlite3"), read_only=True) as store:
        assert list(store.side_items(TABLE)) == [] and len(store) > 9  # the history stays


def test_a_relative_date_in_a_time_element_is_not_read_its_datetime_is():
    d = ChangeDetector()
    url = "http://news.test/article/1"

    def page(text: str, when: str = "2026-01-01T10:00:00Z", tail: str = "") -> bytes:
        return (
            f'<html><body><p>Published <time datetime="{when}">{text}</time>{tail}</p>'
            "<p>The article's text stays the same from day to day.</p></body></html>"
        ).encode()

    base = d.signature(page("3 hours ago"), url, "text/html")
    assert not d.compare(base, d.signature(page("yesterday"), url, "text/html")).changed
    # a new date is a change, and so is the text around the element
    assert d.compare(base, d.signature(page("3 hours ago", "2026-01-02"), url, "")).changed
    assert d.compare(base, d.signature(page("3 hours ago", tail=" by Ann"), url, "")).changed
    # a <time> without a datetime attribute is read as any element
    plain = lambda text: f"<html><body><p><time>{text}</time></p></body></html>".encode()  # noqa: E731
    assert d.compare(
        d.signature(plain("May 1"), url, "text/html"), d.signature(plain("May 2"), url, "")
    ).changed


def test_section_of_reads_a_url_as_urlsplit_does():
    """section_of's own reading of the common URL is urlsplit's, on URLs made of the
    parts that could tell them apart (ports, user info, IPv6, case, query before path,
    fragments, whitespace, non-ASCII); a bad port is the same ValueError."""
    from scrapy_recrawl.change import boilerplate

    parts = ["http://", "https://", "HTTP://", "ftp://", "http:/", "", "a.com", "A.Com",
             "127.0.0.1", ":80", ":080", ":65536", ":", "x@h", "[::1]", ":8080", "/",
             "/page/12.html", "/2024/05/slug", "?q=1", "#f", "/a#b?c", "?x/y", "/a/b/c/d",
             " ", "\t", "\u00e9", "\\", "/%41", "//", "/a//b/"]  # fmt: skip
    rng = random.Random(3)

    def read(f, url):
        try:
            return f(url)
        except ValueError as exc:
            return type(exc)

    for _ in range(20_000):
        url = "".join(rng.choice(parts) for _ in range(rng.randint(1, 6)))
        want = read(boilerplate._section_by_urlsplit, url)
        assert read(boilerplate.section_of.__wrapped__, url) == want, url
