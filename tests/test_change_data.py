"""The detector sees the whole page (issue 29): deep, badly nested markup (parsed past
libxml2's default 256 levels; past its 2048-level ceiling, the unseen text compared as
one hash), and the machine-readable data a scraper reads (``<meta content>``, JSON-LD,
``__NEXT_DATA__`` and other JSON scripts, ``data-*`` values), each a part of its own that
the zero-configuration boilerplate learning can mute like an element."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xxhash
from lxml import etree

from scrapy_recrawl.change import BoilerplateModel, ChangeDetector, Signature
from scrapy_recrawl.change._hashes import value_hashes
from scrapy_recrawl.change.parts import _JSON_SALT, MAX_JSON_LEAVES, json_leaves, json_parts
from scrapy_recrawl.change.signature import SignatureVersionError
from scrapy_recrawl.history import SqliteHistoryStore

from .helpers import LocalSite, Page, run_crawl

URL = "http://shop.test/category/deep"
HTML = "text/html; charset=utf-8"


@pytest.fixture(scope="module")
def det() -> ChangeDetector:
    return ChangeDetector()


def sign(det: ChangeDetector, body: bytes, url: str = URL) -> Signature:
    return det.signature(body, url, HTML)


# -- deep markup ----------------------------------------------------------------------------


def deep_page(tag: str, items: int, at: int, price: int, stamp: str = "") -> bytes:
    """A listing whose items open a ``tag`` each and never close it: item ``i`` sits at
    depth ``i``. Item ``at`` costs ``price``; ``stamp`` goes in a comment (bytes only)."""
    rows = "".join(
        f"<{tag}>Item {i} costs {price if i == at else 100 + i} euros\n" for i in range(items)
    )
    return f"<html><body><!-- {stamp} --><h1>Catalogue</h1>\n{rows}</body></html>".encode()


DEEP = [
    (tag, items, at)
    for tag in ("b", "font", "span", "div")
    for items, at in ((400, 300), (1000, 900))
]


@pytest.mark.parametrize("changed", [True, False], ids=["changed", "unchanged"])
@pytest.mark.parametrize(("tag", "items", "at"), DEEP, ids=[f"{t}-{a}of{n}" for t, n, a in DEEP])
def test_deep_markup_change_is_seen(det, tag, items, at, changed):
    old = sign(det, deep_page(tag, items, at, 500, stamp="rendered 10:00"))
    new_body = deep_page(tag, items, at, 999 if changed else 500, stamp="rendered 10:05")
    new = sign(det, new_body)
    assert old.content_hash != new.content_hash  # the bytes differ either way
    result = det.compare(old, new)
    assert result.changed is changed
    assert (result.added, result.removed, result.modified) == ((0, 0, 1) if changed else (0, 0, 0))
    assert det.compare(old, old) == det.compare(new, new)  # itself: never a change


@pytest.mark.parametrize("tag", ["b", "div"])
def test_past_the_parsers_depth_ceiling_the_text_is_one_hash_and_counted(tag):
    det = ChangeDetector()
    old = sign(det, deep_page(tag, 3000, 2900, 500, stamp="a"))
    assert det.too_deep == 1
    moved = sign(det, deep_page(tag, 3000, 2900, 999, stamp="b"))
    same = sign(det, deep_page(tag, 3000, 2900, 500, stamp="b"))
    assert det.too_deep == 3
    result = det.compare(old, moved)
    assert result.changed and result.modified == 1
    assert not det.compare(old, same).changed
    # a change the parser did read is not counted twice
    early = sign(
        det, deep_page(tag, 3000, 2900, 500).replace(b"Item 5 costs 105", b"Item 5 costs 1")
    )
    assert det.compare(old, early).modified == 1


@pytest.mark.parametrize("items", [150, 250, 3000])
@pytest.mark.parametrize(
    "wrap",
    ["{}", "<template>{}</template><p>after</p>", "<div><template><p>x</p></template>{}</div>"],
    ids=["plain", "in-template", "after-template"],
)
def test_the_parsers_errors_are_read_where_it_may_have_stopped(items, wrap):
    # The detector reads the parser's error log (did it stop at its depth ceiling?) only
    # where the walk saw a deep path or skipped elements with elements inside (a
    # <template>); with an ignore-XPath, even one that removes nothing, it always reads
    # it: both sign every page alike, and count the pages cut alike.
    rows = "".join(f"<b>Item {i} costs {100 + i} euros\n" for i in range(items))
    body = f"<html><body><h1>Catalogue</h1>{wrap.format(rows)}</body></html>".encode()
    fast, always = ChangeDetector(), ChangeDetector(ignore_xpaths=["//no-such-element"])
    a, b = fast.signature(body, URL, HTML), always.signature(body, URL, HTML)
    assert (a.simhash, a.keys.tolist(), a.texts.tolist(), a.attrs.tolist()) == (
        b.simhash,
        b.keys.tolist(),
        b.texts.tolist(),
        b.attrs.tolist(),
    )
    assert fast.too_deep == always.too_deep == (items > 2048)


# -- machine-readable data ------------------------------------------------------------------

NEXT = {
    "props": {
        "pageProps": {
            "product": {"name": "Blue kettle", "price": 24.5, "offers": [{"sku": "K1"}]},
            "requestContext": {"nonce": "{nonce}"},
        }
    },
    "buildId": "{build}",
}


def data_page(
    *,
    meta_price: str = "24.50",
    ld_price: str = "24.50",
    next_price: float = 24.5,
    json_stock: int = 7,
    data_price: str = "24.50",
    nonce: str = "biJtHlhCe1mRRkgb+EiLPhJ4el5QLX+CMfZ4I/Q9xmw=",
    csrf: str = "a8F3kL9mQ2xZ7pW1vB4nR6tY",
    render: str = "",
    extra: str = "",
) -> bytes:
    """A product page whose price is in the data only (the visible text never changes)."""
    nxt = json.loads(json.dumps(NEXT))
    nxt["props"]["pageProps"]["product"]["price"] = next_price
    nxt["props"]["pageProps"]["requestContext"]["nonce"] = nonce
    nxt["buildId"] = "Ab3dEf9hIj2kLm5nOp8q"
    ld = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Blue kettle",
        "offers": {"@type": "Offer", "price": ld_price, "priceCurrency": "EUR"},
    }
    return f"""<!DOCTYPE html><html><head><title>Blue kettle</title>
<meta name="viewport" content="width=device-width, initial-scale=1, maximum-scale={nonce[:1]}">
<meta name="csrf-token" content="{csrf}">
<meta property="product:price:amount" content="{meta_price}">
<meta name="render" content="{render}">
<script type="application/ld+json">{json.dumps(ld)}</script>
<script id="__NEXT_DATA__" type="application/json">{json.dumps(nxt)}</script>
<script type="application/json" data-for="stock">{{"stock": {json_stock}}}</script>
<script>window.t = "{nonce}";</script>
</head><body><main data-build="{nonce[:8]}">
<h1>Blue kettle</h1>
<p class="price" data-price="{data_price}">See the price in your basket</p>
{extra}</main></body></html>""".encode()


@pytest.mark.parametrize(
    "change",
    [
        {"meta_price": "19.99"},
        {"ld_price": "19.99"},
        {"next_price": 19.99},
        {"json_stock": 0},
        {"data_price": "19.99"},
    ],
    ids=["meta", "json-ld", "next-data", "json-script", "data-attribute"],
)
def test_a_change_in_the_data_is_a_change(det, change):
    old, new = sign(det, data_page()), sign(det, data_page(**change))
    result = det.compare(old, new)
    assert result.changed and (result.added, result.removed, result.modified) == (0, 0, 1)
    assert result.distance == 0  # the visible text is the same


def test_bookkeeping_and_scrubbed_tokens_in_the_data_are_no_change(det):
    # a new nonce (in __NEXT_DATA__, a <script>, a data-* of an element without text, the
    # viewport) and a new CSRF token: per-request, never page data
    old = sign(det, data_page())
    new = sign(det, data_page(nonce="w8Nsg4iF7Fn1ohf7x5fmccUCVgt5xhRDePW7szK4k4g=", csrf="Zk2Lp9"))
    assert old.content_hash != new.content_hash
    assert det.compare(old, new) == det.compare(old, old)


def test_meta_names_are_folded_and_http_equiv_is_not_read(det):
    page = (
        '<html><head><meta name="X-CSRF-Token" content="{t}">'
        '<meta http-equiv="refresh" content="{t}"><meta property="og:title" content="{title}">'
        '</head><body><p>Kettle <meta itemprop="price" content="{price}"></p></body></html>'
    )

    def body(t="1", title="Kettle", price="24.50"):
        return sign(det, page.format(t=t, title=title, price=price).encode())

    assert not det.compare(body(), body(t="2")).changed  # a folded bookkeeping name, a header
    assert det.compare(body(), body(title="Kettle 2L")).modified == 1
    assert det.compare(body(), body(price="19.99")).modified == 1  # microdata in the body


def test_a_script_that_is_not_json_is_one_part(det):
    broken = '<script type="application/json" id="state">{"price": 24.5,</script>'
    old = sign(det, data_page(extra=broken))
    new = sign(det, data_page(extra=broken.replace("24.5", "19.9")))
    assert det.compare(old, new).modified == 1
    assert det.compare(old, sign(det, data_page(extra=broken))).changed is False


def test_json_leaves_are_capped_and_the_rest_is_one_part(det):
    many = {"rows": [{"id": i, "price": i} for i in range(MAX_JSON_LEAVES)]}  # 2x the cap

    def page(doc):
        return data_page(extra=f'<script type="application/json">{json.dumps(doc)}</script>')

    old = sign(det, page(many))
    assert len(old) < MAX_JSON_LEAVES + 50  # 24 bytes per part in every stored signature
    many["rows"][-1]["price"] = -1  # past the cap
    result = det.compare(old, sign(det, page(many)))
    assert result.changed and result.modified == 1


def _readable_json_parts(scripts):
    """json_parts as it reads: json_leaves, the leaves past the cap joined as one part,
    each path and value hashed (the compiled pass must give the same arrays)."""
    paths, values = json_leaves(scripts)
    if not paths:
        return None
    if len(paths) > MAX_JSON_LEAVES:
        rest = b"\x00".join(values[MAX_JSON_LEAVES - 1 :])
        del paths[MAX_JSON_LEAVES - 1 :], values[MAX_JSON_LEAVES - 1 :]
        paths.append("\x00rest")
        values.append(rest)
    keys = [xxhash.xxh3_64_intdigest(p.encode("utf-8", "replace")) for p in paths]
    return np.array(keys, dtype=np.uint64) ^ _JSON_SALT, value_hashes(values, int(_JSON_SALT))


@pytest.mark.parametrize(
    "docs",
    [
        [],
        [{}],
        [{"a": [], "b": {}}],
        [NEXT, {"x": [1, 2.5, True, False, None, "caf\u00e9", "\ud800", 10**30, [[["deep"]]]]}],
        ['{"broken": ', {"csrfToken": "t", "nonce": 1, "ok": "kept"}],
        [{"rows": list(range(MAX_JSON_LEAVES - 1))}],
        [{"rows": list(range(MAX_JSON_LEAVES))}],
        [{"rows": list(range(MAX_JSON_LEAVES + 1))}, {"after": "the cap"}],
        [{"rows": [{"id": i, "price": i} for i in range(MAX_JSON_LEAVES)]}],
    ],
    ids=[
        "none",
        "empty",
        "no-leaf",
        "kinds",
        "text-and-bookkeeping",
        "cap-1",
        "cap",
        "cap+1",
        "2x",
    ],
)
def test_the_compiled_json_parts_are_the_readable_ones(docs):
    texts = [d if isinstance(d, str) else json.dumps(d) for d in docs]
    scripts = "".join(
        f'<script type="application/json" id="s{i}">{t}</script>' for i, t in enumerate(texts)
    )
    page = f"<html><head>{scripts}<script>var x = 1;</script></head><body></body></html>"
    found = list(etree.fromstring(page.encode(), etree.HTMLParser()).iter("script"))
    got, want = json_parts(found), _readable_json_parts(found)
    if want is None:
        assert got is None
    else:
        assert got[0].dtype == got[1].dtype == np.uint64
        assert (got[0].tolist(), got[1].tolist()) == (want[0].tolist(), want[1].tolist())


def test_boilerplate_learning_mutes_a_data_part_that_moves_on_every_fetch(det):
    # what the bookkeeping names do not catch: a render id in a <meta>, a request-scoped
    # value in the JSON-LD; a confirmation pair learns them as it learns elements
    url = "http://shop.test/product/kettle"

    def fetch(n: int, **kw) -> Signature:
        extra = f'<script type="application/ld+json">{{"servedBy": "edge {n} at 10:0{n}"}}</script>'
        return sign(det, data_page(render=f"r{n} 10:0{n}", extra=extra, **kw), url)

    first, second = fetch(1), fetch(2)
    assert det.compare(first, second).modified == 2  # unlearned: the two read as changes
    model = BoilerplateModel(pairs=1)
    model.add_pair(url, first, second)
    ignore = model.ignore_for(url)
    assert ignore.text.size == 2 and not ignore.attrs.size
    assert not det.compare(second, fetch(3), ignore=ignore).changed
    # ... while a real change in the data still is one
    for change in ({"ld_price": "9.99"}, {"meta_price": "9.99"}, {"data_price": "9.99"}):
        result = det.compare(second, fetch(4, **change), ignore=ignore)
        assert result.changed and result.modified == 1, change


def test_json_parts_are_in_the_stored_signature(det):
    sig = sign(det, data_page())
    back = Signature.from_bytes(sig.to_bytes())
    assert back == sig
    assert not det.compare(back, sign(det, data_page())).changed
    assert det.compare(back, sign(det, data_page(ld_price="1"))).changed


def test_a_signature_of_the_previous_version_is_refused(det):
    data = bytearray(sign(det, data_page()).to_bytes())
    data[4] = 4  # version 4: no data parts, parsed to 256 levels only
    with pytest.raises(SignatureVersionError):
        Signature.from_bytes(bytes(data))


# -- end to end -----------------------------------------------------------------------------


def test_a_crawl_resigns_a_version_4_signature_and_sees_a_data_and_a_deep_change(tmp_path):
    """A store of the previous release: its signatures are made again from the kept copy,
    so a price change in the JSON-LD only, and one deep in unclosed markup, reach the
    callback with RECRAWL_SKIP_UNCHANGED = "all"."""
    with LocalSite() as site:
        site.pages["/kettle"] = Page(data_page())
        site.pages["/deep"] = Page(deep_page("font", 1000, 900, 500))
        site.pages["/deeper"] = Page(deep_page("b", 3000, 2900, 500))
        urls = [site.url + p for p in ("/kettle", "/deep", "/deeper")]
        settings = {
            "DOWNLOADER_MIDDLEWARES": {"scrapy_recrawl.middleware.RecrawlMiddleware": 585},
            "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
            "RECRAWL_SKIP_UNCHANGED": "all",
            "RECRAWL_LEARN_BOILERPLATE": False,
        }
        run_crawl(urls, settings, tmp_path)
        second = run_crawl(urls, settings, tmp_path)  # same bytes: skipped
        assert len(second["items"]) == 0
        with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
            rows = store.db.execute("SELECT url_id, signature FROM signatures").fetchall()
            for url_id, sig in rows:  # what the previous release left: version 4
                old = bytearray(sig)
                assert old[4] == Signature._VERSION == 5
                old[4] = 4
                store.db.execute(
                    "UPDATE signatures SET signature = ? WHERE url_id = ?", (bytes(old), url_id)
                )
            store.db.commit()
        site.pages["/kettle"] = Page(data_page(ld_price="19.99"))
        site.pages["/deep"] = Page(deep_page("font", 1000, 900, 999))
        site.pages["/deeper"] = Page(deep_page("b", 3000, 2900, 999))
        third = run_crawl(urls, settings, tmp_path)
    got = {i["url"].rsplit("/", 1)[1]: i["recrawl"] for i in third["items"]}
    assert set(got) == {"kettle", "deep", "deeper"}
    for name, r in got.items():
        assert r["changed"] is True and (r["added"], r["removed"], r["modified"]) == (0, 0, 1), name
    assert third["stats"]["recrawl/too_deep"] >= 1
    assert got["kettle"]["distance"] == 0  # its visible text did not move
