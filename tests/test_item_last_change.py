"""A page's last item change (issue 31, item 4): the record (item_change.PageChange:
round trip, the per-page bound, no credential), kept by the item watch through side
storage on SQLite and Redis (only when an item was new, changed or removed, replaced
at the next change), and ``recrawl-report --url`` showing it field by field, old -> new,
on real crawls of the reference shop, checked against the site's truth."""

from __future__ import annotations

import json
import math
import re
from urllib.parse import urlsplit

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from example_project.reference import ReferenceSite, start_in_thread, visits_from_store
from example_project.reference.crawl import crawl, make_project
from scrapy_recrawl.core.meta import META_CYCLE
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.insight.last_items import items_at_last_change
from scrapy_recrawl.item_change import (
    CHANGED,
    ITEMS_TABLE,
    LAST_CHANGE_TABLE,
    NEW,
    REMOVED,
    UNCHANGED,
    ItemChange,
    PageChange,
    ValueBudget,
)
from scrapy_recrawl.skip import RecrawlSpiderMiddleware
from scrapy_recrawl.visit_recorder import META_ITEMS_PAGE

from .cli_project import scrapy_in_process

# -- the record ------------------------------------------------------------------------------


def _changes() -> list[ItemChange]:
    return [
        ItemChange("P#0", CHANGED, ("price", "stock"), {"price": 463.99, "stock": 3},
                   {"price": 431.99, "stock": 2}, item={"x": 1}),
        ItemChange("P#1", UNCHANGED),
        ItemChange("P#2", NEW, ("name", "price"), new={"name": "Lamp", "price": 10.0}),
        ItemChange("P#3", REMOVED, ("name",), old={"name": "Chair"}),
    ]  # fmt: skip


def test_a_change_record_goes_there_and_back_without_the_unchanged_items():
    rec = PageChange.of(_changes(), 4, 1_700_000_000.5, ValueBudget(True, 10_000))
    back = PageChange.from_bytes(rec.to_bytes())
    assert (back.cycle, back.time, back.values) == (4, 1_700_000_000.5, True)
    assert [(c.key, c.status, c.fields) for c in back.items] == [
        ("P#0", CHANGED, ("price", "stock")),
        ("P#2", NEW, ("name", "price")),
        ("P#3", REMOVED, ("name",)),
    ]
    assert back.items[0].old == {"price": 463.99, "stock": 3}
    assert back.items[0].new == {"price": 431.99, "stock": 2}
    assert back.items[0].item is None  # the user's item is never stored
    # no cycle or time known, and values off: field names only
    bare = PageChange.from_bytes(
        PageChange.of(_changes(), None, math.nan, ValueBudget(False, 10_000)).to_bytes()
    )
    assert bare.cycle is None and math.isnan(bare.time) and not bare.values
    assert all(not (c.old or c.new) for c in bare.items) and bare.items[0].fields
    for junk in (b"", b"\xff", b"[]", b'{"v": 99}', b'{"v": 1, "items": [{"k": 1}]}',
                 b'{"v": 1, "items": [{"k": "a", "s": "moved", "f": []}]}'):  # fmt: skip
        with pytest.raises(ValueError):
            PageChange.from_bytes(junk)


def test_the_values_obey_the_records_bound_never_more():
    # each item's old and new cost their JSON's bytes; once one does not fit, the page's
    # budget is spent (as for the record): the later items keep their names only
    first = {"old": {"price": 463.99, "stock": 3}, "new": {"price": 431.99, "stock": 2}}
    limit = len(json.dumps(first, separators=(",", ":"))) + 5
    rec = PageChange.of(_changes(), 1, 0.0, ValueBudget(True, limit))
    kept = [c for c in rec.items if c.old or c.new]
    assert [c.key for c in kept] == ["P#0"]
    assert [c.key for c in rec.items] == ["P#0", "P#2", "P#3"]  # names of every item stay
    spent = sum(
        len(json.dumps({"old": c.old, "new": c.new}, separators=(",", ":")).encode()) for c in kept
    )
    assert spent <= limit


def test_no_credential_is_kept_even_if_a_value_reached_the_change():
    change = ItemChange("U#0", CHANGED, ("api_token", "name"),
                        {"api_token": "s3cr3t-old", "name": "a"},
                        {"api_token": "s3cr3t-new", "name": "b"})  # fmt: skip
    data = PageChange.of([change], 1, 0.0, ValueBudget(True, 10_000)).to_bytes()
    assert b"s3cr3t" not in data
    back = PageChange.from_bytes(data).items[0]
    assert back.fields == ("api_token", "name") and back.new == {"name": "b"}


# -- kept by the item watch, on both stores --------------------------------------------------


class Shop(Spider):
    name = "shop"


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteHistoryStore(tmp_path / "history.sqlite3")
    else:
        s = RedisHistoryStore(request.getfixturevalue("redis_db").url, shards=1)
    s.open()
    yield s
    s.close()


def _middleware(store, **settings):
    crawler = get_crawler(Shop, {"RECRAWL_ITEM_CHANGES": True, "RECRAWL_ITEM_KEY": ["sku"],
                                 **settings})  # fmt: skip
    crawler.spider = Shop()
    mw = RecrawlSpiderMiddleware(crawler)
    mw.watch._store = store  # the crawl's open store, as store_for_crawler gives it
    return mw


def _visit(mw, items, cycle: int, page_id: int = 7) -> None:
    request = Request("http://shop.test/p", meta={META_ITEMS_PAGE: page_id, META_CYCLE: cycle})
    resp = HtmlResponse(request.url, body=b"<html></html>", request=request)
    list(mw.process_spider_output(resp, iter(items)))


def _kept(store, page_id: int = 7) -> PageChange | None:
    data = store.side_get(LAST_CHANGE_TABLE, [page_id])[0]
    return None if data is None else PageChange.from_bytes(data)


def test_the_last_change_is_kept_in_the_records_batches_and_replaced_at_the_next(store):
    mw = _middleware(store, RECRAWL_ITEM_VALUES=True)
    a = {"sku": "1", "price": 9.5, "password": "hunter2"}
    _visit(mw, [a, {"sku": "2", "price": 3.0}], cycle=1)
    mw.watch.flush()
    assert store.side_get(ITEMS_TABLE, [7])[0] is not None
    assert _kept(store) is None  # a first visit: nothing compared, nothing changed
    b = {**a, "price": 8.0, "password": "hunter3"}
    _visit(mw, [b, {"sku": "3", "price": 1.0}], cycle=2)
    assert _kept(store) is None  # pending: written with the records' batch
    mw.watch.flush()
    kept = _kept(store)
    assert kept is not None and kept.cycle == 2 and kept.values
    by_status = {c.status: c for c in kept.items}
    assert by_status[CHANGED].fields == ("password", "price")
    assert (by_status[CHANGED].old, by_status[CHANGED].new) == ({"price": 9.5}, {"price": 8.0})
    assert by_status[NEW].new == {"sku": "3", "price": 1.0}
    assert by_status[REMOVED].old == {"sku": "2", "price": 3.0}
    raw = store.side_get(LAST_CHANGE_TABLE, [7])[0]
    assert b"hunter" not in raw and raw.startswith(b"{")  # plain JSON, no credential
    # an unchanged visit writes nothing: the last change stays cycle 2's
    _visit(mw, [dict(b), {"sku": "3", "price": 1.0}], cycle=3)
    mw.watch.flush()
    assert _kept(store).to_bytes() == raw
    _visit(mw, [{**b, "price": 7.0}, {"sku": "3", "price": 1.0}], cycle=4)
    mw.watch.flush()
    kept = _kept(store)
    assert kept.cycle == 4 and [(c.status, c.old, c.new) for c in kept.items] == [
        (CHANGED, {"price": 8.0}, {"price": 7.0})
    ]
    shown = items_at_last_change(store, 7)
    assert shown is not None and shown.lines() == ['changed  dict:["1"]#0  price: 8.0 -> 7.0']
    assert items_at_last_change(store, 8) is None  # no items compared there


def test_without_values_the_field_names_and_a_note(store):
    mw = _middleware(store)
    _visit(mw, [{"sku": "1", "price": 9.5}], cycle=1)
    _visit(mw, [{"sku": "1", "price": 8.5}], cycle=2)
    mw.watch.flush()
    shown = items_at_last_change(store, 7)
    assert shown.lines() == ['changed  dict:["1"]#0  price']
    assert any("RECRAWL_ITEM_VALUES" in n for n in shown.notes)
    assert shown.as_dict()["items"][0]["changes"] == {}


# -- recrawl-report --url on real crawls of the reference shop, SQLite and Redis -------------


def _truth_prices(site: ReferenceSite, visits) -> tuple[dict[str, tuple], set[str]]:
    """Products fetched in cycles 1 and 2 (days 0 and 1): those whose price changed,
    (old, new) by the site's own model, and those whose price and stock did not."""
    shop = site.sections["shop"]
    days: dict[str, set[int]] = {}
    for v in visits:
        if v.status in (200, 304):
            days.setdefault(urlsplit(v.url).path, set()).add(v.day)
    changed, same = {}, set()
    for path, seen in days.items():
        product = shop.product_of(path)
        if product is None or not {0, 1} <= seen:
            continue
        (p0, s0), (p1, s1) = shop.state(product, 0), shop.state(product, 1)
        if p0 != p1:
            changed[path] = (p0 / 100, p1 / 100)
        elif s0 == s1:
            same.add(path)
    return changed, same


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_the_report_shows_a_real_price_change_old_to_new(backend, tmp_path, request):
    """Two crawls (days 0 and 1) with the items signal and values on. On Redis no body
    is kept (RECRAWL_STORE_BODIES = False): the items are shown without a body diff."""
    settings = 'RECRAWL_CHANGE_SIGNAL = "items"\nRECRAWL_ITEM_VALUES = True\n'
    if backend == "sqlite":
        store_arg, stats_file = str(tmp_path / "history.sqlite3"), None
    else:
        store_arg, stats_file = request.getfixturevalue("redis_db").url, tmp_path / "stats.json"
        settings += "RECRAWL_STORE_BODIES = False\n"
    project = make_project(tmp_path / "proj", settings)
    site = ReferenceSite(seed=1, sites=["shop"], products=12, categories=2, daily_products=3)
    base, stop = start_in_thread(site)
    try:
        for _ in range(2):
            crawl(project, "shop", base + "/shop/", store_arg, stats_file=stats_file)
            site.advance()
        if backend == "sqlite":
            opened = SqliteHistoryStore(store_arg, read_only=True)
        else:
            opened = RedisHistoryStore(store_arg, key="shop:history")
        with opened as store:
            changed, same = _truth_prices(site, visits_from_store(store))
    finally:
        stop()
    assert changed and same, (changed, same)

    def report(*args: str):
        run = scrapy_in_process(project, "recrawl-report", "--spider", "shop",
                                "-s", f"RECRAWL_STORE={store_arg}", *args)  # fmt: skip
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        return run.stdout

    for path, (old, new) in sorted(changed.items()):
        out = report("--url", base + path)
        assert "Items at the last change, cycle 2" in out, out
        line = re.search(r"^  changed  ProductItem#0  price: (\S+) -> (\S+)$", out, re.M)
        assert line is not None, out
        assert (float(line[1]), float(line[2])) == (old, new)
        assert line[1] == json.dumps(old) and line[2] == json.dumps(new)
        if backend == "redis":  # no body kept: the items all the same
            assert "note: last change: no version before its last change is kept" in out
        data = json.loads(report("--url", base + path, "--format", "json"))
        items = data["items_at_last_change"]
        assert items["cycle"] == 2 and items["values_kept"] is True
        (item,) = [i for i in items["items"] if "price" in i["fields"]]
        assert item["status"] == "changed" and item["changes"]["price"] == {"old": old, "new": new}
    for path in sorted(same):  # fetched twice, unchanged: no item change kept
        out = report("--url", base + path)
        assert "Items at the last change" not in out
        assert "note: items at the last change: none kept" in out
