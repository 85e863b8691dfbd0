"""The reference site (example_project/reference): deterministic, its truth agrees with
what it serves over real HTTP, validators, news arrivals and removals, the truth
scores on hand-made inputs, the spiders' parsing; one slow real crawl."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from scrapy.http import HtmlResponse, Request

from example_project.recrawl_demo.spiders.news import NewsSpider
from example_project.recrawl_demo.spiders.shop import ShopSpider
from example_project.reference import (
    KINDS,
    PageTruth,
    ReferenceSite,
    RunningReferenceSite,
    Visit,
    detection,
    expected_freshness_by_day,
    freshness_by_day,
    new_page_latency,
    start_in_thread,
    strip,
    true_freshness,
    truth_from_doc,
    visits_from_served,
    visits_from_store,
)
from example_project.reference.crawl import make_project, run_cycles

from .helpers import REPO

SMALL = {"products": 40, "categories": 4, "articles": 12}


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def post(url: str) -> dict:
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', html)


# --------------------------------------------------------------------------- the model


def test_same_seed_same_site_and_another_seed_another():
    a, b, c = ReferenceSite(7, **SMALL), ReferenceSite(7, **SMALL), ReferenceSite(8, **SMALL)
    for s in (a, b, c):
        s.advance(10)
    assert a.changes() == b.changes()
    assert a.pages() == b.pages()
    assert all(a.content(p) == b.content(p) for p in a.pages())
    assert a.changes() != c.changes()
    assert a.content("/shop/product/12") != c.content("/shop/product/12")
    # the truth of a past day does not depend on how far the site has run since
    fresh = ReferenceSite(7, **SMALL)
    assert fresh.changes(4) == a.changes(4)


def test_shop_rates_are_heterogeneous_and_categories_follow_their_prices():
    site = ReferenceSite(1)
    site.advance(12)
    truth = site.changes()
    assert len(site.pages()) == 215 + len([p for p in site.pages() if p.startswith("/news/")])
    assert len([p for p in truth if p.startswith("/shop/")]) == 215
    days = tuple(range(1, 13))
    for i in range(1, 11):  # products 1-10 change every day
        assert truth[f"/shop/product/{i}"].changes == days
    others = [truth[f"/shop/product/{i}"] for i in range(11, 201)]
    never = [t for t in others if t.meta["class"] == "never"]
    assert 40 < len(never) < 120 and not any(t.changes for t in never)  # many never change
    assert len([t for t in others if 0 < len(t.changes) < 4]) > 20  # many rarely
    assert any(len(t.changes) > 4 for t in others)  # some often
    assert truth["/shop/"].changes == ()
    shop = site.sections["shop"]
    for k in range(1, 15):  # a category changes exactly when one of its prices does
        union = set()
        for i in shop.members[k]:  # type: ignore[attr-defined]
            union |= set(truth[f"/shop/product/{i}"].changes)
        assert truth[f"/shop/category/{k}"].changes == tuple(sorted(union))
    assert truth["/shop/product/3"].meta["class"] == "daily"


def test_every_kind_of_boilerplate_can_be_switched_alone():
    for kind in (*KINDS, "none"):
        site = ReferenceSite(4, sites=["shop"], boilerplate=kind, products=20, categories=2)
        assert site.kinds == (frozenset() if kind == "none" else {kind})
        # a product that never changes, in a category without validators
        truth = site.changes(3)
        path = next(
            p
            for p, t in truth.items()
            if t.kind == "product" and t.validators == "none" and not t.changes  # fmt: skip
        )
        one, two = site.render(path), site.render(path)
        site.advance()
        three = site.render(path)
        assert strip(one) == strip(two) == strip(three) == site.content(path)
        if kind == "none":
            assert one == two == three
        elif kind == "reldate":  # moves with the simulated day, not per request
            assert one == two != three
            assert re.search(r"<time [^>]*>\d+ days ago</time>", one)
        else:  # drawn at each request: two renders may still agree by chance (a viewer
            # count is one of 59), eight all alike would not
            assert len({one, two, *(site.render(path) for _ in range(6))}) > 1
    with pytest.raises(ValueError, match="bogus"):
        ReferenceSite(1, boilerplate="csrf,bogus")


def test_boilerplate_looks_like_a_real_sites():
    site = ReferenceSite(2, products=20, categories=2)
    html = site.render("/shop/category/1")
    assert re.search(r'<meta name="csrf-token" content="[0-9a-f]{32}">', html)
    assert re.search(r'<input type="hidden" name="csrf_token" value="[0-9a-f]{32}">', html)
    assert re.search(r"Rendered at \d{4}-\d\d-\d\dT", html)
    assert re.search(r"\d+ people are viewing this", html)
    assert "You may also like" in html and 'class="ad-slot"' in html
    internal = [h for h in hrefs(html) if h.startswith("/")]
    assert internal and all(re.search(r"\?sid=[0-9a-z]{6}$", h) for h in internal)


# --------------------------------------------------------------------------- over HTTP


def test_the_truth_agrees_with_what_is_served_over_http():
    with RunningReferenceSite(seed=3, products=60, categories=5, articles=12) as running:
        site, base = running.site, running.base_url
        seen: dict[int, dict[str, str]] = {}
        for day in range(4):
            assert post(base + "/_admin/advance?days=0")["day"] == day
            seen[day] = {}
            for path in site.pages():
                status, _, body = get(base + path)
                assert status == 200, path
                seen[day][path] = strip(body)
                assert seen[day][path] == site.content(path)  # only the boilerplate differs
                again = get(base + path)[2]
                assert again != body  # ... and it does differ at every request
            post(base + "/_admin/advance")
        truth = site.changes(3)
        changed = unchanged = 0
        for day in range(1, 4):
            for path, text in seen[day].items():
                if path not in seen[day - 1]:
                    assert truth[path].created == day
                    continue
                really = truth[path].version(day) != truth[path].version(day - 1)
                assert (text != seen[day - 1][path]) == really, (path, day)
                changed += really
                unchanged += not really
        assert changed > 30 and unchanged > 60  # both sides are exercised
        served = site.served()
        assert len(served) == 2 * sum(len(s) for s in seen.values())
        for s in served:
            assert s.status == 200 and s.version == truth[s.path].version(s.day)


def test_validators_on_some_sections_and_304():
    with RunningReferenceSite(seed=5, **SMALL) as running:
        site, base = running.site, running.base_url
        # products of odd categories: ETag and Last-Modified
        status, headers, _ = get(base + "/shop/product/1")  # category 1, changes daily
        assert status == 200 and "ETag" in headers and "Last-Modified" in headers
        etag = headers["ETag"]
        assert get(base + "/shop/product/1", {"If-None-Match": etag})[0] == 304
        lm = headers["Last-Modified"]
        assert get(base + "/shop/product/1", {"If-Modified-Since": lm})[0] == 304
        # products of even categories, categories, listings: none, never a 304
        for path in ("/shop/product/40", "/shop/category/1", "/shop/", "/news/"):
            status, headers, _ = get(base + path, {"If-None-Match": '"x"', "If-Modified-Since": lm})
            assert status == 200 and "ETag" not in headers and "Last-Modified" not in headers
        # articles: Last-Modified only
        status, headers, _ = get(base + "/news/article/3")
        assert "ETag" not in headers
        assert (
            get(base + "/news/article/3", {"If-Modified-Since": headers["Last-Modified"]})[0] == 304
        )
        post(base + "/_admin/advance")  # product 1 really changed: the old validators miss
        assert get(base + "/shop/product/1", {"If-None-Match": etag})[0] == 200
        assert get(base + "/shop/product/1", {"If-Modified-Since": lm})[0] == 200
        served = [s for s in site.served() if s.path == "/shop/product/1"]
        assert [s.status for s in served] == [200, 304, 304, 200, 200]
        assert [s.version for s in served] == [0, 0, 0, 1, 1]


def test_new_articles_appear_on_the_index_and_the_older_pages():
    with RunningReferenceSite(seed=6, sites=["news"], articles=12, removal_rate=0.0) as running:
        site, base = running.site, running.base_url

        def listed(path: str) -> list[int]:
            status, _, body = get(base + path)
            assert status == 200
            return [
                int(m)
                for m in re.findall(r'href="/news/article/(\d+)\?sid=', body.split("<aside")[0])
            ]

        day0 = listed("/news/") + listed("/news/page/2")
        assert day0 == list(range(12, 0, -1))  # newest first
        assert get(base + "/news/page/3")[0] == 404
        post(base + "/_admin/advance")
        index = listed("/news/")
        assert set(index[:2]) == {13, 14} and len(index) == 10  # two new articles, on top
        assert listed("/news/page/2") == list(range(4, 0, -1))  # the hub gained links
        for _ in range(4):
            post(base + "/_admin/advance")
        assert 0 < len(listed("/news/page/3"))  # a new listing page appeared
        truth = site.changes()
        assert truth["/news/article/13"].created == 1
        assert truth["/news/page/3"].created > 0
        assert truth["/news/"].changes == (1, 2, 3, 4, 5)
        assert site.pages(0) == sorted(
            ["/news/", "/news/page/2"] + [f"/news/article/{i}" for i in range(1, 13)]
        )


def test_corrections_are_real_changes_and_removed_articles_are_gone():
    site = ReferenceSite(9, sites=["news"], articles=20, removal_rate=0.6, correction_rate=0.5)
    site.advance(10)
    truth = site.changes()
    corrected = [t for t in truth.values() if t.kind == "article" and t.changes]
    assert corrected
    t = corrected[0]
    before, after = site.content(t.path, t.changes[0] - 1), site.content(t.path, t.changes[0])
    assert "Correction" not in (before or "") and "Correction" in (after or "")
    removed = [t for t in truth.values() if t.kind == "article" and t.removed is not None]
    assert len(removed) >= 3
    for t in removed:
        assert t.removed is not None and t.removed >= t.created + 2
        resp = site.respond(t.path)
        assert resp is not None and resp.status == (
            410 if int(t.path.rsplit("/", 1)[1]) % 2 else 404
        )
        assert t.path not in site.pages()
        assert all(f'href="{t.path}"' not in (site.content(p) or "") for p in site.pages())
        assert t.version(t.removed) is None and t.version(t.removed - 1) is not None
    assert site.served()[-1].status in (404, 410) and site.served()[-1].version is None


def test_truth_endpoints_return_the_in_process_truth():
    site = ReferenceSite(11, **SMALL)
    base, stop = start_in_thread(site)
    try:
        assert post(base + "/_admin/advance?days=3") == {"day": 3}
        get(base + "/shop/product/2?sid=abc123")
        status, _, body = get(base + "/_admin/day")
        doc = json.loads(body)
        assert doc["day"] == 3 and doc["seed"] == 11 and doc["boilerplate"] == sorted(KINDS)
        changes = json.loads(get(base + "/_truth/changes")[2])
        assert truth_from_doc(changes) == site.changes()
        assert json.loads(get(base + "/_truth/changes?day=1")[2])["pages"] == [
            t.to_json() for t in site.changes(1).values()
        ]
        assert json.loads(get(base + "/_truth/pages?day=2")[2]) == {
            "day": 2,
            "pages": site.pages(2),
        }
        served = json.loads(get(base + "/_truth/served")[2])
        assert served["next"] == 1
        row = served["served"][0]
        assert (row["url"], row["path"], row["day"], row["status"]) == (
            "/shop/product/2?sid=abc123", "/shop/product/2", 3, 200)  # fmt: skip
        assert row["version"] == site.version("/shop/product/2", 3)
        assert json.loads(get(base + "/_truth/served?since=1")[2])["served"] == []
        assert get(base + "/_truth/served?since=-1")[0] == 400
        assert get(base + "/_admin/advance")[0] == 405
        assert post(base + "/_admin/reset") == {"day": 0}
        assert site.served() == []
    finally:
        stop()


def test_the_cli_names_a_bad_argument_in_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "example_project.reference", "--boilerplate", "csrf,bogus"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "bogus" in out.stderr


# --------------------------------------------------------------------------- scoring


def _t(path: str, live: tuple, changes: tuple, kind: str = "product") -> PageTruth:
    return PageTruth(path, "shop", kind, "none", live, changes)


TRUTH = {
    "/a": _t("/a", ((0, None),), (2, 4)),  # versions: d0-1: 0, d2-3: 1, d4+: 2
    "/b": _t("/b", ((0, 3),), (), "category"),  # removed on day 3
    "/c": _t("/c", ((2, None),), (3,)),  # new on day 2
    "/d": _t("/d", ((3, None),), ()),  # new on day 3, never fetched
}


def test_detection_against_hand_made_truth():
    visits = [
        Visit("http://h/a?sid=x", 0),  # first fetch: no comparison
        Visit("/a", 1, True),  # FP (0 -> 0)
        Visit("/a", 3, True),  # TP (0 -> 1)
        Visit("/a", 4, False, 304),  # FN (1 -> 2): a 304 on a changed page
        Visit("/a", 5, False),  # TN (2 -> 2)
        Visit("/b", 0),
        Visit("/b", 2, None),  # unjudged
        Visit("/b", 3, True, 404),  # gone: not a fetch
        Visit("/c", 2),
        Visit("/c", 3, True),  # TP
        Visit("/zzz", 3, True),  # not a page of the site
    ]
    d = detection(TRUTH, visits)
    assert (d.tp, d.fp, d.fn, d.tn, d.unjudged) == (2, 1, 1, 1, 1)
    assert d.precision == pytest.approx(2 / 3) and d.recall == pytest.approx(2 / 3)
    late = detection(TRUTH, visits, from_day=3)  # earlier visits still set the version
    assert (late.tp, late.fp, late.fn, late.tn) == (2, 0, 1, 1)
    only_b = detection(TRUTH, visits, kinds={"category"})
    assert only_b.compared == 0 and only_b.precision is None and only_b.recall is None


def test_true_freshness_against_hand_made_truth():
    visits = [Visit("/a", 0), Visit("/b", 0), Visit("/c", 2), Visit("/a", 3)]
    by_day = freshness_by_day(TRUTH, visits, range(6))
    # d0-1: a, b fresh; d2: a stale (v1 vs v0), b fresh, c fresh; d3: a fresh (refetched),
    # b gone, c stale; d4: a stale, c stale; d5: same
    assert by_day == {0: 1.0, 1: 1.0, 2: pytest.approx(2 / 3), 3: 0.5, 4: 0.0, 5: 0.0}
    assert true_freshness(TRUTH, [], 3) is None
    assert true_freshness(TRUTH, visits, 2, kinds={"category"}) == 1.0


def test_chance_floor_against_hand_made_truth():
    visits = [Visit("/a", 0), Visit("/b", 0), Visit("/c", 2), Visit("/a", 3)]
    half = lambda path, since, day: 0.5 ** (day - since)  # noqa: E731
    by_day = expected_freshness_by_day(half, TRUTH, visits, range(5))
    # the same known pages as the true freshness (b gone from day 3), each page's chance
    # from the day of its last fetch
    assert by_day == {
        0: 1.0,
        1: 0.5,
        2: pytest.approx((0.25 + 0.25 + 1.0) / 3),
        3: pytest.approx((1.0 + 0.5) / 2),
        4: pytest.approx((0.5 + 0.25) / 2),
    }
    unknown = lambda path, since, day: None if path == "/b" else 1.0  # noqa: E731
    assert expected_freshness_by_day(unknown, TRUTH, visits, [1, 3]) == {1: None, 3: 1.0}
    assert expected_freshness_by_day(half, TRUTH, [], [2]) == {2: None}


def test_the_sites_change_chances_follow_its_model():
    site = ReferenceSite(seed=3, **SMALL)
    shop, news = site.sections["shop"], site.sections["news"]
    assert site.unchanged_chance("/shop/", 0, 30) == 1.0
    daily = next(p for p in shop.products if p.klass == "daily")
    assert site.unchanged_chance(f"/shop/product/{daily.id}", 0, 1) == 0.0
    never = next(p for p in shop.products if p.klass == "never")
    assert site.unchanged_chance(f"/shop/product/{never.id}", 0, 9) == 1.0
    k = daily.category  # a category listing a daily product changes every day
    assert site.unchanged_chance(f"/shop/category/{k}", 2, 3) == 0.0
    assert site.unchanged_chance(f"/shop/category/{k}", 2, 2) == 1.0
    news.simulate(1)
    old = news.articles[0]  # published days before day 0: past its correction window
    assert site.unchanged_chance(f"/news/article/{old.id}", 0, 5) == 1.0
    young = news.articles[-1]  # published on day 1: corrected on days 2-4 at most
    assert young.created == 1
    window = (1.0 - news.correction_rate) ** news.correction_window
    assert site.unchanged_chance(f"/news/article/{young.id}", 1, 9) == pytest.approx(window)
    # fetched on day 3: only day 4 of its window is left
    assert site.unchanged_chance(f"/news/article/{young.id}", 3, 9) == pytest.approx(0.8)
    assert site.unchanged_chance("/news/", 0, 1) == 0.0  # new articles every day
    assert site.unchanged_chance("/elsewhere/", 0, 1) is None


def test_the_chance_floor_is_calibrated_against_the_sites_draws():
    """The model's chances against its own draws, over five seeds: each product fetched
    on day 0 and looked at on day 5, each article fetched the day it appeared and looked
    at four days later (past its window); pages independent, so the number still
    current is within three standard deviations of the chances' sum. And the floor's
    whole-site figure (categories too) after every page was fetched on day 0."""
    outcomes: dict[str, list[tuple[float, bool]]] = {"product": [], "article": []}
    for seed in range(1, 6):
        site = ReferenceSite(seed=seed)
        for _ in range(12):
            site.advance()
        truth = site.changes()
        for path, t in truth.items():
            created = t.created if "/news/article/" in path else 0
            later = created + (4 if "/news/" in path else 5)
            if t.kind not in outcomes or created < 0 or later > 12 or t.version(later) is None:
                continue
            chance = site.unchanged_chance(path, created, later)
            assert chance is not None
            outcomes[t.kind].append((chance, t.version(later) == t.version(created)))
        visits = [Visit(path, 0) for path, t in truth.items() if t.version(0) is not None]
        true = freshness_by_day(truth, visits, range(1, 13))
        floor = expected_freshness_by_day(site.unchanged_chance, truth, visits, range(1, 13))
        for d in range(1, 13):
            assert floor[d] is not None and true[d] is not None
            assert abs(floor[d] - true[d]) <= 0.1, (seed, d)
    for kind, pairs in outcomes.items():
        expected = sum(c for c, _ in pairs)
        sd = sum(c * (1 - c) for c, _ in pairs) ** 0.5
        current = sum(ok for _, ok in pairs)
        assert len(pairs) > 100 and sd > 2, (kind, len(pairs), sd)
        assert abs(current - expected) <= 3 * sd, (kind, current, expected, sd)


def test_new_page_latency_against_hand_made_truth():
    visits = [Visit("/a", 0), Visit("/c", 4), Visit("/c", 5)]
    lat = new_page_latency(TRUTH, visits, up_to=5)
    assert lat.latency == {"/c": 2} and lat.never == ["/d"]
    assert lat.mean == 2 and lat.max == 2
    assert new_page_latency(TRUTH, visits, up_to=2).never == ["/c"]
    assert new_page_latency(TRUTH, visits, up_to=5, after=2).latency == {}


def test_scores_from_the_served_log():
    site = ReferenceSite(12, **SMALL)
    for _ in range(3):
        for path in site.pages():
            site.respond(path)
        site.advance()
    visits = visits_from_served(site.served())
    assert all(v.changed is None for v in visits)
    assert freshness_by_day(site.changes(), visits, range(3)) == {0: 1.0, 1: 1.0, 2: 1.0}
    assert true_freshness(site.changes(), visits, 3) < 1.0  # day 3 was never fetched
    assert new_page_latency(site.changes(), visits, up_to=2).max == 0


# --------------------------------------------------------------------------- spiders


def test_the_spiders_parse_and_drop_session_ids():
    site = ReferenceSite(13, **SMALL)

    def response(path: str) -> HtmlResponse:
        url = "http://127.0.0.1:1" + path
        return HtmlResponse(url, body=site.render(path).encode(), request=Request(url))

    shop = ShopSpider(start_url="http://127.0.0.1:1/shop/")
    (item,) = shop.parse_product(response("/shop/product/7"))
    assert item.name.endswith(" 7") and item.name in (site.content("/shop/product/7") or "")
    assert f"${item.price:.2f}" in (site.content("/shop/product/7") or "")
    assert isinstance(item.stock, int)
    links = [
        lnk.url
        for rule in shop.rules
        for lnk in rule.link_extractor.extract_links(response("/shop/category/1"))
    ]
    assert links and all("sid=" not in u for u in links)
    news = NewsSpider(start_url="http://127.0.0.1:1/news/")
    (art,) = news.parse_article(response("/news/article/5"))
    assert art.title.endswith(" 5") and art.published.startswith("20")


# --------------------------------------------------------------------------- a real crawl


@pytest.mark.slow
def test_three_cycles_of_scrapy_crawl_shop_scored_against_the_truth(tmp_path):
    project = make_project(tmp_path / "project")
    store = str(tmp_path / "history.sqlite3")
    with RunningReferenceSite(seed=1) as running:
        stats = run_cycles(running.site, running.base_url, "shop", 3, project, store)
        truth = running.site.changes()
    assert stats[0]["item_scraped_count"] == 200  # every product, once
    from scrapy_recrawl.history import SqliteHistoryStore

    with SqliteHistoryStore(store) as s:
        visits = visits_from_store(s)
    assert {v.day for v in visits} == {0, 1, 2}
    shop = detection(truth, visits, kinds={"product", "category"})
    assert shop.compared > 200  # cycle 2 compares every page, cycle 3 a budget's worth
    assert shop.recall is not None and shop.recall >= 0.95  # issue 26: real changes are seen
    fresh = freshness_by_day(truth, visits, range(3))
    print(
        f"\nshop, 3 cycles, only the add-on line: precision {shop.precision:.3f} recall "
        f"{shop.recall:.3f} (tp {shop.tp} fp {shop.fp} fn {shop.fn} tn {shop.tn}); "
        f"true freshness by day {fresh}"
    )
