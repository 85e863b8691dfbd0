"""Item-level change in real ``scrapy crawl`` cycles of the reference shop (issue 31):
the shop spider's product items (name, price, stock) compared with each page's previous
visit's, ``RECRAWL_CHANGE_SIGNAL = "items"`` as the page's change observation, the
change feed and ``RECRAWL_SKIP_UNCHANGED = "items"`` item by item; scored against the
site's truth (example_project/reference), on SQLite and on Redis.

No ignore rule is configured: the shop's rotating boilerplate is not in the items.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from example_project.reference import RunningReferenceSite, detection, visits_from_store
from example_project.reference.crawl import crawl, make_project, run_cycles
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore

pytestmark = pytest.mark.slow

SMALL_SHOP = {"products": 60, "categories": 6}
PAGES = {"product", "category"}
HALF = 'RECRAWL_BUDGET = "50%"\n'
EXT = "tests.item_status_ext.ItemStatusLog"
ITEMS = 'RECRAWL_CHANGE_SIGNAL = "items"\nRECRAWL_ITEM_VALUES = True\n'


class Backend:
    def __init__(self, kind: str, tmp_path: Path, redis_url: str | None = None) -> None:
        self.kind, self.tmp_path, self.redis_url = kind, tmp_path, redis_url

    @property
    def store(self) -> str:
        return str(self.tmp_path / "history.sqlite3") if self.kind == "sqlite" else "redis"

    @property
    def settings(self) -> str:
        if self.kind == "sqlite":
            return ""
        return (
            f'SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"\nREDIS_URL = {self.redis_url!r}\n'
        )

    def open(self):
        if self.kind == "sqlite":
            return SqliteHistoryStore(self.store, read_only=True)
        return RedisHistoryStore(self.redis_url, key="shop:history")


@pytest.fixture(params=["sqlite", "redis"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return Backend("sqlite", tmp_path)
    return Backend("redis", tmp_path, request.getfixturevalue("redis_db").url)


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def price_changes(running, visits) -> set[tuple[str, int, float, float]]:
    """(product path, day, old price, new price) of every fetch of a product whose price
    differs from its previous fetch's, by the site's own model."""
    shop = running.site.sections["shop"]
    last: dict[str, int] = {}
    out = set()
    for v in sorted(visits, key=lambda v: v.day):
        path = urlsplit(v.url).path
        product = shop.product_of(path)
        if product is None or v.status not in (200, 304):
            continue
        if path in last:
            old, new = shop.state(product, last[path])[0], shop.state(product, v.day)[0]
            if old != new:
                out.add((path, v.day, old / 100, new / 100))
        last[path] = v.day
    return out


def test_items_signal_detects_page_change_and_feeds_every_price_change(backend, tmp_path):
    feed = tmp_path / "changes.jsonl"
    settings = HALF + ITEMS + backend.settings
    settings += f'RECRAWL_CHANGE_FEED = {{"{feed.as_uri()}": {{"format": "jsonlines", "overwrite": False}}}}\n'
    project = make_project(tmp_path / "project", settings)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        stats = run_cycles(running.site, running.base_url, "shop", 4, project, backend.store,
                           stats_file=tmp_path / "stats.json")  # fmt: skip
        with backend.open() as store:
            visits = visits_from_store(store)
        d = detection(running.site.changes(), visits, from_day=1, kinds=PAGES)
        truth_prices = price_changes(running, visits)
    print(f"\n{backend.kind}, items signal, cycles 2-4: {d}")
    assert sum(s.get("recrawl/items_signal/judged", 0) for s in stats) >= 60
    assert d.compared >= 80 and d.tp >= 10 and d.tn >= 20
    assert d.precision is not None and d.precision >= 0.99, d
    assert d.recall is not None and d.recall >= 0.99, d
    records = lines(feed)
    fed = {
        (urlsplit(r["url"]).path, r["cycle"] - 1, r["changes"]["price"]["old"],
         r["changes"]["price"]["new"])
        for r in records
        if r["status"] == "changed" and "price" in r["changes"]
    }  # fmt: skip
    assert truth_prices and fed == truth_prices  # every price change, old -> new, no other
    assert sum(r["status"] == "new" for r in records) == 60  # the first cycle's items
    assert stats[0]["item_scraped_count"] == 60  # the spider's items are untouched


def test_the_items_signal_needs_no_boilerplate_learning_on_item_pages(tmp_path):
    """With boilerplate learning off, the text detector reads the shop's rotating
    boilerplate as change (tests/test_reference_crawl.py: precision < 0.5); the product
    pages' verdicts, made by their items, stay exact. (Category pages yield no item:
    they keep the text verdict, and are left out here.)"""
    backend = Backend("sqlite", tmp_path)
    settings = HALF + ITEMS + "RECRAWL_LEARN_BOILERPLATE = False\n"
    project = make_project(tmp_path / "project", settings)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        stats = run_cycles(running.site, running.base_url, "shop", 3, project, backend.store)
        with backend.open() as store:
            visits = visits_from_store(store)
        d = detection(running.site.changes(), visits, from_day=1, kinds={"product"})
    print(f"\nlearning off, items signal, product pages, cycles 2-3: {d}")
    assert sum(s.get("recrawl/items_signal/overruled", 0) for s in stats) >= 10  # text was wrong
    assert d.compared >= 50 and d.tn >= 20 and d.tp >= 5
    assert d.precision == 1.0 and d.recall == 1.0, d


def test_unchanged_items_are_dropped_item_by_item(tmp_path):
    backend = Backend("sqlite", tmp_path)
    items_file, status_file = tmp_path / "items.jsonl", tmp_path / "status.jsonl"
    settings = HALF + ITEMS + 'RECRAWL_SKIP_UNCHANGED = "items"\n'
    settings += f'FEEDS = {{"{items_file.as_uri()}": {{"format": "jsonlines"}}}}\n'
    settings += f"ITEM_STATUS_FILE = {str(status_file)!r}\n"
    project = make_project(tmp_path / "project", settings)
    # beside the stats dump crawl() adds (a command-line EXTENSIONS replaces settings.py's)
    ext = {"EXTENSIONS": json.dumps({EXT: 0, "example_project.stats_dump.StatsDump": 0})}
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        run_cycles(running.site, running.base_url, "shop", 1, project, backend.store, ext)
        assert len(lines(items_file)) == 60  # a first visit: every item is new
        items_file.unlink()
        status_file.unlink()
        stats = crawl(project, "shop", f"{running.base_url}/shop/", backend.store, ext)
        with backend.open() as store:
            visits = visits_from_store(store)
        changed = {(p, day) for p, day, _, _ in price_changes(running, visits)}
        shop = running.site.sections["shop"]
        kept = lines(items_file)
        fetched = {urlsplit(v.url).path for v in visits if v.day == 1 and "product/" in v.url}
        really = {
            p for p in fetched
            if shop.state(shop.product_of(p), 0) != shop.state(shop.product_of(p), 1)
        }  # fmt: skip
    got = {urlsplit(i["url"]).path for i in kept}
    assert really and got == really  # exactly the products whose price or stock changed
    assert {p for p, _ in changed} <= got
    assert stats["recrawl/skipped_items"] == len(fetched) - len(really)
    statuses = lines(status_file)
    assert {s["status"] for s in statuses} == {"changed"}
    assert all(s["fields"] and set(s["fields"]) <= {"price", "stock"} for s in statuses)


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        (
            ITEMS + 'RECRAWL_SKIP_UNCHANGED = "all"\n',
            ("RECRAWL_SKIP_UNCHANGED", "RECRAWL_CHANGE_SIGNAL"),
        ),
        ('RECRAWL_CHANGE_FEED = "nosuch://x/changes.jsonl"\n', ("RECRAWL_CHANGE_FEED", "nosuch")),
    ],
)
def test_a_bad_combination_or_feed_is_refused_in_one_line(tmp_path, settings, names):
    project = make_project(tmp_path / "project", settings)
    with pytest.raises(RuntimeError) as err:
        crawl(project, "shop", "http://127.0.0.1:9/shop/", str(tmp_path / "h.sqlite3"))
    text = str(err.value)
    assert all(name in text for name in names), text
    assert "Traceback" not in text


def test_items_signal_on_the_news_site_judges_articles_by_their_corrections(tmp_path):
    """The news spider's article items (title, publication date, corrections): a
    correction rewords a paragraph and adds a note, so the items change exactly when the
    article does, with the relative dates ("3 hours ago") and the rotating blocks left
    out without any rule; listing pages yield no items and keep the text's verdict."""
    settings = 'RECRAWL_BUDGET = "100%"\n' + ITEMS
    project = make_project(tmp_path / "project", settings)
    store = str(tmp_path / "history.sqlite3")
    with RunningReferenceSite(seed=1, sites=["news"]) as running:
        stats = run_cycles(running.site, running.base_url, "news", 5, project, store,
                           stats_file=tmp_path / "stats.json")  # fmt: skip
        with SqliteHistoryStore(store, read_only=True) as s:
            visits = visits_from_store(s)
        d = detection(running.site.changes(), visits, from_day=1, kinds={"article"})
    print(f"\nnews, items signal, cycles 2-5, articles: {d}")
    # an unchanged article comes back as a 304 (its Last-Modified): no items to judge;
    # each article whose bytes changed was judged by its items
    assert sum(s.get("recrawl/items_signal/judged", 0) for s in stats) >= d.tp
    assert d.compared >= 60 and d.tp >= 3 and d.tn >= 30
    assert d.precision is not None and d.precision >= 0.99, d
    assert d.recall is not None and d.recall >= 0.99, d
