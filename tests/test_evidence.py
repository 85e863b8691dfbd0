"""Importance and sitemaps as evidence, without a crawl: the announcement rules, the
trust rule, the core's due-now ranking, and the plug-in on a real SQLite and a real
Redis store (docs/evidence.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_recrawl.core.selection import DUE_NOW, select_recrawls
from scrapy_recrawl.evidence import announce, importance
from scrapy_recrawl.evidence.plugin import EvidencePlugin
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.plugins import check_plugins
from scrapy_recrawl.scoring import ExpressionScorer
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import history_arrays

# -- reading what a sitemap says ---------------------------------------------------


def test_lastmod_reads_w3c_datetimes_dates_and_numbers():
    assert announce.parse_lastmod("2024-05-01") == 1714521600.0  # midnight UTC
    assert announce.parse_lastmod("2024-05-01T02:00:00+02:00") == 1714521600.0
    assert announce.parse_lastmod("2024-05-01T00:00:00Z") == 1714521600.0
    assert announce.parse_lastmod("2024-05-01T00:00:00.250Z") == 1714521600.25
    assert announce.parse_lastmod(1714521600) == 1714521600.0
    for bad in ("yesterday", "", None, True, float("nan"), [1]):
        assert announce.parse_lastmod(bad) is None


def test_changefreq_words_become_periods():
    assert announce.parse_changefreq("Daily ") == 86400.0
    assert announce.parse_changefreq("never") == math.inf
    assert announce.parse_changefreq("fortnightly") is None
    rate = announce.rate_per_cycle(np.array([3600.0, 86400.0, math.inf, np.nan]), 7200.0)
    assert rate[:3].tolist() == [2.0, 1 / 12, 0.0] and math.isnan(rate[3])


def test_the_cycle_length_comes_from_the_recent_openings():
    assert announce.cycle_seconds(np.zeros((0, 2)), 3600.0) == 3600.0
    assert announce.cycle_seconds(np.array([[3.0, 100.0]]), 3600.0) == 3600.0
    # cycles 3 and 7 opened 800 s apart: 200 s per cycle
    assert announce.cycle_seconds(np.array([[3.0, 100.0], [7.0, 900.0]]), 3600.0) == 200.0


# -- an announcement, its check, the trust rule ---------------------------------------


def test_an_announced_change_waits_for_the_next_observation():
    rec = announce.empty_record()
    # older than the last visit: kept, but no change announced
    changed, pending = announce.announce(
        rec, lastmod=50.0, period=None, n=4, X=1, last_visit_time=100.0
    )
    assert (changed, pending) == (True, False) and rec["pending"] == 0
    changed, pending = announce.announce(
        rec, lastmod=150.0, period=86400.0, n=4, X=1, last_visit_time=100.0
    )
    assert (changed, pending) == (True, True)
    assert (int(rec["n0"]), int(rec["X0"])) == (4, 1)
    # announced again before the fetch: still one pending check, against the same n0
    changed, pending = announce.announce(
        rec, lastmod=160.0, period=86400.0, n=4, X=1, last_visit_time=100.0
    )
    assert (changed, pending) == (True, False) and int(rec["n0"]) == 4
    # the same again: nothing to write
    assert announce.announce(
        rec, lastmod=160.0, period=86400.0, n=4, X=1, last_visit_time=100.0
    ) == (False, False)


def test_resolve_confirms_only_what_the_detector_saw_change():
    recs = np.stack([announce.empty_record() for _ in range(3)])
    recs["pending"] = 1
    recs["n0"] = [4, 4, 4]
    recs["X0"] = [1, 1, 1]
    # row 0: observed since, changed; row 1: observed, unchanged; row 2: not observed yet
    recs["lastmod"] = [150.0, 300.0, 150.0]
    visited = np.array([200.0, 200.0, 100.0])
    confirmed, unconfirmed = announce.resolve(
        recs, np.array([5, 5, 4]), np.array([2, 1, 1]), visited
    )
    assert confirmed.tolist() == [True, False, False]
    assert unconfirmed.tolist() == [False, True, False]
    assert recs["ok"].tolist() == [1, 0, 0] and recs["bad"].tolist() == [0, 1, 0]
    # row 1 was announced again after that fetch (lastmod 300 > 200): pending anew from
    # its current counts; row 2 still waits for its first check
    assert recs["pending"].tolist() == [0, 1, 1]
    assert recs["n0"].tolist() == [4, 5, 4] and recs["X0"].tolist() == [1, 1, 1]


def test_trust_is_the_urls_own_share_then_its_hosts_then_one():
    ok = np.array([0, 3, 0, 0, 1])
    bad = np.array([3, 0, 2, 0, 0])
    hosts = np.array([0, 1, 0, 0, 2])  # rows 0, 2, 3 on one host
    share = announce.trust(ok, bad, hosts, checks=3)
    assert share[0] == 0.0  # its own 3 checks, none confirmed
    assert share[1] == 1.0  # its own 3 checks, all confirmed
    # few checks of their own: their host's pooled share (0 of 5)
    assert share[2] == 0.0 and share[3] == 0.0
    assert share[4] == 1.0  # a host with 1 check: nothing against it yet


def test_records_survive_bytes_and_foreign_bytes_are_reset():
    rec = announce.empty_record()
    rec["lastmod"], rec["ok"] = 12.5, 7
    recs, corrupt = announce.unpack_many([announce.pack(rec), b"not a record"])
    assert corrupt.tolist() == [False, True]
    assert recs[0]["lastmod"] == 12.5 and recs[0]["ok"] == 7
    assert math.isnan(recs[1]["lastmod"]) and recs[1]["ok"] == 0


# -- the core takes the due-now URLs first ---------------------------------------------


def test_due_now_urls_come_first_within_the_budget_and_the_host_cap():
    arrays = history_arrays(n=[5] * 6, X=[0, 1, 2, 3, 4, 5], last=[0] * 6)
    arrays.columns[DUE_NOW] = np.array([True, False, True, False, False, False])
    scorer = ExpressionScorer("X")
    sel = select_recrawls(arrays, scorer, 3, now=0.0)
    # (ids are rows + 1) the two due ones, best score first among them, then the best
    # of the rest
    assert sel.ids.tolist() == [3, 1, 6]
    assert sel.scores.tolist() == [2.0, 0.0, 5.0]  # the picks keep their own scores
    assert sel.due == 2  # the scorer's own picks (its cut-off) start after them
    # budget below the due count: the best-scored due URLs
    assert select_recrawls(arrays, scorer, 1, now=0.0).ids.tolist() == [3]
    # the per-host cap holds for due URLs too: ids 1 and 3 share a host
    urls = {i: f"http://{'a' if i in (1, 3) else f'h{i}'}.test/" for i in range(1, 7)}
    sel = select_recrawls(
        arrays, scorer, 3, now=0.0, max_per_domain=1, urls_of=lambda ids: [urls[i] for i in ids]
    )
    assert sel.ids.tolist() == [3, 6, 5]
    # without the column: the scorer's order alone
    del arrays.columns[DUE_NOW]
    sel = select_recrawls(arrays, scorer, 3, now=0.0)
    assert sel.ids.tolist() == [6, 5, 4] and sel.due == 0


# -- changefreq as the rate prior ------------------------------------------------------


def test_nadc_takes_the_changefreq_as_the_prior_mean():
    from scrapy_recrawl.plugin_terminals import default_registry
    from scrapy_recrawl.scoring import Scorer, compute_terminals

    reg = default_registry()  # the evidence plug-in's terminals
    nan = float("nan")
    state = {
        "n": np.array([0, 10, 10, 0, 4]),
        "X": np.array([0, 1, 1, 0, 2]),
        # daily on daily cycles twice, none announced, never, none announced
        "cfreq": np.array([1.0, 1.0, nan, 0.0, nan]),
    }
    a, b = 1.0, 10.0
    got = compute_terminals(state, 5, prior=(a, b), needed=("NADc", "NADp"), registry=reg)
    p = 1.0 - math.exp(-1.0)  # a change within a cycle at one change per cycle
    expected = [10 * p / 10, (1 + 10 * p) / 20, 2 / 20, 0.0, 3 / 14]
    assert got["NADc"].tolist() == pytest.approx(expected, rel=1e-12)
    # where no changefreq was announced: NADp exactly
    none = np.isnan(state["cfreq"])
    assert np.array_equal(got["NADc"][none], got["NADp"][none])
    # the prior weighs b pseudo-observations: 200 quiet visits outweigh "daily"
    quiet = compute_terminals(
        {"n": np.array([200]), "X": np.array([0]), "cfreq": np.array([1.0])},
        5,
        prior=(a, b),
        needed=("NADc",),
        registry=reg,
    )["NADc"]
    assert quiet[0] == pytest.approx(10 * p / 210)
    # the docs' scorer, and a scorer using it turns the plug-in on
    scorer = Scorer.from_spec("1 - exp(-NADc*t)", registry=reg)
    assert "NADc" in scorer.terminals_needed
    assert "EvidencePlugin" in [
        c.__name__ for c in check_plugins(Settings({}), frozenset({"NADc", "t"}))
    ]


# -- settings --------------------------------------------------------------------------


def test_the_plugin_is_on_when_asked_or_needed():
    names = lambda s, t=frozenset(): [c.__name__ for c in check_plugins(Settings(s), t)]  # noqa: E731
    assert "EvidencePlugin" not in names({})
    assert "EvidencePlugin" in names({"RECRAWL_EVIDENCE": True})
    assert "EvidencePlugin" in names({}, frozenset({"w", "t"}))
    assert "EvidencePlugin" in names({}, frozenset({"cfreq"}))
    assert "EvidencePlugin" in names({"RECRAWL_IMPORTANCE": f"{__name__}.weigh_by_path"})
    assert "EvidencePlugin" not in names({"RECRAWL_EVIDENCE": "false"}, frozenset({"lmod"}))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"RECRAWL_IMPORTANCE": "no.such.weights"}, r"RECRAWL_IMPORTANCE='no\.such.*import"),
        ({"RECRAWL_IMPORTANCE": "math.pi"}, r"RECRAWL_IMPORTANCE='math\.pi': not a callable"),
        ({"RECRAWL_EVIDENCE": True, "RECRAWL_SITEMAP_CHECKS": 0}, "RECRAWL_SITEMAP_CHECKS"),
        ({"RECRAWL_EVIDENCE": True, "RECRAWL_SITEMAP_TRUST": "1.5"}, "RECRAWL_SITEMAP_TRUST"),
    ],
)
def test_bad_settings_name_themselves(settings, message):
    with pytest.raises(RecrawlSettingError, match=message):
        check_plugins(Settings(settings), frozenset())


def test_a_weight_comes_from_meta_then_the_setting_then_the_spider():
    class ByMethod(Spider):
        name = "m"

        def recrawl_importance(self, request, response):
            return 4 if request.url.endswith("/x") else None

    class ByNumber(Spider):
        name = "n"
        recrawl_importance = 2

    plain, x = Request("http://s.test/"), Request("http://s.test/x")
    heavy = Request("http://s.test/x", meta={"recrawl_importance": 7})
    assert importance.weight_of(heavy, None, ByNumber(), weigh_by_path)[:2] == (7.0, 7)
    assert importance.weight_of(x, None, ByNumber(), lambda r, s: 3)[:2] == (3.0, 3)
    assert importance.weight_of(x, None, ByMethod(), None)[:2] == (4.0, 4)
    assert importance.weight_of(plain, None, ByMethod(), None)[:2] == (None, None)  # none
    assert importance.weight_of(plain, None, ByNumber(), None)[:2] == (2.0, 2)
    assert importance.weight_of(plain, None, _Spider(), None)[:2] == (None, None)
    assert importance.weight_of(x, None, None, lambda r, s: "heavy") == (
        None,
        "heavy",
        "RECRAWL_IMPORTANCE",
    )


def weigh_by_path(request, response):
    """A RECRAWL_IMPORTANCE callable: /vip pages weigh 5, /bad ones return nonsense."""
    if "/vip" in request.url:
        return 5.0
    if "/bad" in request.url:
        return -2
    return None


# -- the plug-in on both stores ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteHistoryStore(tmp_path / "history.sqlite3", flush_every=1)
    else:
        s = RedisHistoryStore(request.getfixturevalue("redis_db").url, shards=4)
    s.open()
    yield s
    s.close()


class _Spider(Spider):
    name = "evidence"


def _plugin(store, **settings):
    crawler = get_crawler(_Spider, {"RECRAWL_EVIDENCE": True, **settings})
    crawler.spider = _Spider()
    plugin = EvidencePlugin(crawler, store)
    return plugin, crawler


def _visit(store, crawler, url, t, changed=None):
    fp = crawler.request_fingerprinter.fingerprint(Request(url))
    rec = store.record(Visit(fp, url, t, 200, changed=changed, request={"url": url}))
    store.flush()
    return rec


def _response(url, meta=None):
    request = Request(url, meta=meta or {})
    return HtmlResponse(url, body=b"<html></html>", request=request), request


def test_importance_is_kept_per_url_and_handed_out_as_a_column(store, caplog):
    plugin, crawler = _plugin(store, RECRAWL_IMPORTANCE=f"{__name__}.weigh_by_path")
    spider = crawler.spider
    ids = {}
    for path in ("/a", "/vip", "/bad", "/meta", "/nan"):
        ids[path] = _visit(store, crawler, f"http://s.test{path}", 10.0).id
    for path, meta in (
        ("/a", {}),
        ("/vip", {}),
        ("/bad", {}),
        ("/meta", {"recrawl_importance": 2.5}),
        ("/nan", {"recrawl_importance": float("nan")}),
    ):
        response, request = _response(f"http://s.test{path}", meta)
        plugin._on_response(response, request, spider)
    # one warning per bad value, naming the URL; only non-default weights get a row
    warned = [r.getMessage() for r in caplog.records if "importance of" in r.getMessage()]
    assert warned == [
        "recrawl: the importance of http://s.test/bad from RECRAWL_IMPORTANCE is -2, "
        "not a number > 0: ignored",
        "recrawl: the importance of http://s.test/nan from meta['recrawl_importance'] is "
        "nan, not a number > 0: ignored",
    ]
    assert dict(importance.read_weights(store)) == {ids["/vip"]: 5.0, ids["/meta"]: 2.5}
    assert crawler.stats.get_value("recrawl/importance/invalid") == 2
    # a known URL's weight from a request the scheduler will not fetch; back to 1: no row
    plugin._on_scheduled(Request("http://s.test/a", meta={"recrawl_importance": 3.0}), spider)
    plugin._on_scheduled(Request("http://s.test/meta", meta={"recrawl_importance": 1}), spider)
    arrays = store.arrays()
    column = plugin.columns(arrays, now=20.0)["importance"]
    expected = {ids["/a"]: 3.0, ids["/vip"]: 5.0}
    assert column.tolist() == [expected.get(int(i), 1.0) for i in arrays.ids]
    # a second process's plug-in reads the same weights from the store
    other, _ = _plugin(store)
    assert other.columns(arrays, now=20.0)["importance"].tolist() == column.tolist()


def test_announcements_are_checked_and_liars_stop_being_trusted(store):
    plugin, crawler = _plugin(store, RECRAWL_SITEMAP_CHECKS=2)
    spider = crawler.spider
    truthful, liar = "http://s.test/true", "http://s.test/liar"
    for url in (truthful, liar):
        _visit(store, crawler, url, 100.0)  # first fetches
    t = 100.0
    due_log = []
    for _ in range(4):
        t += 100
        # the sitemap says both changed since the last visit; only one really did
        for url in (truthful, liar):
            meta = {"recrawl_lastmod": t - 50, "recrawl_changefreq": "hourly"}
            plugin._on_scheduled(Request(url, meta=meta), spider)
        store.advance_cycle()
        cols = plugin.columns(store.arrays(), now=t)
        due_log.append(cols[DUE_NOW].tolist())
        # the cycle fetches what is due: the truthful page changed, the liar did not
        for url, due in zip((truthful, liar), cols[DUE_NOW], strict=True):
            if due:
                _visit(store, crawler, url, t + 10, changed=url == truthful)
    # both trusted at first; the liar after 2 unconfirmed announcements no longer
    assert due_log == [[True, True], [True, True], [True, False], [True, False]]
    stats = crawler.stats
    assert stats.get_value("recrawl/sitemap/unconfirmed") == 2
    assert stats.get_value("recrawl/sitemap/confirmed") == 3
    assert stats.get_value("recrawl/sitemap/untrusted") == 2
    assert cols["sitemap_trust"].tolist() == [1.0, 0.0]
    assert cols["cfreq"].tolist() == pytest.approx([100 / 3600] * 2)  # 100 s cycles
    assert cols["lastmod"].tolist() == [t - 50] * 2


# -- the mixin ---------------------------------------------------------------------------

_SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://s.test/a</loc><lastmod>2024-05-01</lastmod><changefreq>daily</changefreq></url>
<url><loc>http://s.test/b b</loc><lastmod>2024-05-02T10:00:00Z</lastmod></url>
<url><loc>http://s.test/c</loc></url>
<url><loc>http://s.test/skip</loc><lastmod>2024-05-03</lastmod></url>
</urlset>"""


def test_the_mixin_carries_each_entrys_dates_into_its_request():
    from scrapy.http import XmlResponse
    from scrapy.spiders import SitemapSpider

    from scrapy_recrawl.evidence import SitemapEvidenceMixin

    class Shop(SitemapEvidenceMixin, SitemapSpider):
        name = "shop"

        def sitemap_filter(self, entries):  # the spider's own filter still decides
            return (e for e in entries if not e["loc"].endswith("/skip"))

    settings = Settings()
    Shop.update_settings(settings)
    assert settings.getbool("RECRAWL_EVIDENCE") is True  # the mixin turns the plug-in on
    spider = Shop()
    response = XmlResponse("http://s.test/sitemap.xml", body=_SITEMAP)
    requests = {r.url: r for r in spider._parse_sitemap(response)}
    assert sorted(requests) == ["http://s.test/a", "http://s.test/b%20b", "http://s.test/c"]
    assert requests["http://s.test/a"].meta == {
        "recrawl_lastmod": "2024-05-01",
        "recrawl_changefreq": "daily",
    }
    assert requests["http://s.test/b%20b"].meta == {"recrawl_lastmod": "2024-05-02T10:00:00Z"}
    assert requests["http://s.test/c"].meta == {}
    assert "sitemap_filter" not in vars(spider)  # the class's filter is back in place
    # a project that set RECRAWL_EVIDENCE keeps its word
    settings = Settings({"RECRAWL_EVIDENCE": False})
    Shop.update_settings(settings)
    assert settings.getbool("RECRAWL_EVIDENCE") is False
