"""The example project's local test site, its ground truth, and a real crawl of it."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections import Counter
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from lxml import html as lxml_html

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # example_project lives beside the installed package
    sys.path.insert(0, str(ROOT))

from example_project import truth  # noqa: E402
from example_project.site import (  # noqa: E402
    CLASS_MIX,
    RunningSite,
    SiteModel,
    sim_date,
    start_in_thread,
)

# --------------------------------------------------------------------------- helpers


class Client:
    """A keep-alive HTTP client that returns 304s and errors instead of raising."""

    def __init__(self, base_url: str) -> None:
        u = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)

    def request(self, method: str, path: str, headers: dict | None = None):
        self.conn.request(method, path, headers=headers or {})
        resp = self.conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()

    def get(self, path: str, **headers):
        return self.request("GET", path, {k.replace("_", "-"): v for k, v in headers.items()})

    def json(self, method: str, path: str):
        status, _, body = self.request(method, path)
        return status, json.loads(body)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def site():
    with RunningSite(pages=300, seed=1) as s:
        yield s


@pytest.fixture
def client(site):
    c = Client(site.base_url)
    yield c
    c.close()


def strip_noise(body: bytes) -> bytes:
    """Remove the per-request script and ad slot (what RECRAWL_IGNORE_XPATHS ignores)."""
    text = body.decode()
    s0 = text.index("<script>")
    text = text[:s0] + text[text.index("</script>", s0) + len("</script>") :]
    a0 = text.index('<div class="ad" id="ad-slot">')
    text = text[:a0] + text[text.index("</div>", a0) + len("</div>") :]
    return text.encode()


def first_page(model: SiteModel, predicate) -> int:
    return next(s.index for s in model.specs if s.status == 200 and predicate(s))


# --------------------------------------------------------------------------- model


def test_same_seed_same_site_different_seed_different():
    a, b, c = SiteModel(300, seed=1), SiteModel(300, seed=1), SiteModel(300, seed=2)
    for i in range(300):
        assert a.change_days(i, 30) == b.change_days(i, 30)
        assert (a.specs[i].klass, a.specs[i].status) == (b.specs[i].klass, b.specs[i].status)
    for i in (0, 7, 150, 299):
        for day in (0, 10, 30):
            ra, rb = a.render_page(i, a.version(i, day)), b.render_page(i, b.version(i, day))
            assert (ra.head, ra.middle, ra.tail, ra.etag) == (rb.head, rb.middle, rb.tail, rb.etag)
    assert [s.klass for s in a.specs] != [s.klass for s in c.specs]
    assert [a.change_days(i, 30) for i in range(300)] != [c.change_days(i, 30) for i in range(300)]
    assert a.render_page(0, 0).middle != c.render_page(0, 0).middle


def test_versions_do_not_depend_on_query_order():
    fresh, warmed = SiteModel(200, seed=3), SiteModel(200, seed=3)
    fast = first_page(warmed, lambda s: s.klass == "fast")
    v = warmed.version(fast, 20)
    assert v >= 3
    late = warmed.render_page(fast, v)  # cache at a late version, then go back
    early = warmed.render_page(fast, 1)
    assert early.etag == fresh.render_page(fast, 1).etag
    assert late.etag == fresh.render_page(fast, v).etag
    assert SiteModel(200, seed=3).change_days(fast, 20) == fresh.change_days(fast, 20)


def test_class_mix_and_change_processes():
    model = SiteModel(2000, seed=1)
    counts = Counter(s.klass for s in model.specs)
    for name, share in CLASS_MIX:
        assert abs(counts[name] / 2000 - share) < 0.03, (name, counts[name])
    days = 15
    changes = {s.index: model.change_days(s.index, days) for s in model.specs}
    per_class = Counter()
    for s in model.specs:
        per_class[s.klass] += len(changes[s.index])
        assert all(1 <= d <= days for d in changes[s.index])
        if s.klass == "static":
            assert changes[s.index] == []
        if s.klass == "periodic":
            assert s.period in (2, 3, 7)
            assert changes[s.index] == [d for d in range(1, days + 1) if d % s.period == s.phase]
    # Skewed: fast pages dominate, most pages rarely or never change ...
    assert per_class["fast"] / counts["fast"] > 0.4 * days
    assert per_class["slow"] / counts["slow"] < 0.05 * days
    rarely = sum(1 for c in changes.values() if len(c) <= 1)
    assert rarely / 2000 > 0.6
    # ... but enough pages change often to be learnable in 15 cycles (> the 5% budget).
    often = sum(1 for c in changes.values() if len(c) >= 5)
    assert often / 2000 > 0.10
    # Every day has changes, none has a majority of pages changing.
    by_day = Counter(d for c in changes.values() for d in c)
    assert all(0.03 < by_day[d] / 2000 < 0.3 for d in range(1, days + 1))


def test_changes_are_element_level_edits():
    model = SiteModel(300, seed=1)
    kinds = Counter()
    for s in model.specs:
        if s.status != 200 or s.klass not in ("fast", "moderate"):
            continue
        for v in range(1, model.version(s.index, 15) + 1):
            old = lxml_html.fromstring(model.render_page(s.index, v - 1).middle)
            new = lxml_html.fromstring(model.render_page(s.index, v).middle)

            def sig(doc):
                return {
                    "p": [e.text_content() for e in doc.xpath('//section[@id="text"]/p')],
                    "li": [e.text_content() for e in doc.xpath('//ul[@id="facts"]/li')],
                    "tr": [e.text_content() for e in doc.xpath('//table[@id="data"]/tr')],
                    "href": doc.xpath('//nav[@class="related"]//a/@href'),
                }

            a, b = sig(old), sig(new)
            changed = [k for k in a if a[k] != b[k]]
            assert changed, (s.index, v)  # always more than the "Updated on" date
            kinds.update(changed)
            for k in ("p", "li", "tr"):
                kinds[f"{k} added"] += len(b[k]) > len(a[k])
                kinds[f"{k} removed"] += len(b[k]) < len(a[k])
    for kind in ("p", "li", "tr", "href", "p added", "p removed", "li added", "tr added"):
        assert kinds[kind] > 0, kinds


def test_special_pages_are_fixed_and_excluded_from_truth():
    model = SiteModel(2000, seed=1)
    statuses = Counter(s.status for s in model.specs)
    assert statuses[404] == statuses[500] == statuses[301] == 10
    doc = model.truth_changes(5)
    assert len(doc["truth"]) == 1970 and len(doc["excluded"]) == 30
    for row in doc["excluded"]:
        if row["status"] == 301:
            target = int(row["location"].split("/")[-1].split(".")[0])
            assert model.specs[target].status == 200
    assert [s.status for s in SiteModel(2000, seed=1).specs] == [s.status for s in model.specs]


# --------------------------------------------------------------------------- HTTP


def test_pages_index_and_noise(site, client):
    status, headers, body = client.get("/")
    assert status == 200
    links = lxml_html.fromstring(body).xpath("//a/@href")
    assert sum(1 for h in links if h.startswith("/page/")) == 100
    assert "/index/2.html" in links
    status, _, body2 = client.get("/index/2.html")
    assert status == 200 and b'href="/page/299.html"' in body2

    i = first_page(site.model, lambda s: True)
    s1, h1, b1 = client.get(f"/page/{i}.html")
    s2, h2, b2 = client.get(f"/page/{i}.html")
    assert s1 == s2 == 200
    assert b1 != b2  # render timestamp, nonce and ad text differ ...
    assert h1["ETag"] == h2["ETag"]  # ... but the content version does not
    assert h1["Last-Modified"] == h2["Last-Modified"]
    assert strip_noise(b1) == strip_noise(b2)
    tree = lxml_html.fromstring(b1)
    assert tree.xpath('//div[@class="ad"]') and tree.xpath("//script")
    assert len(tree.xpath('//nav[@class="related"]//a')) >= 3


def test_conditional_get(site, client):
    i = first_page(site.model, lambda s: True)
    path = f"/page/{i}.html"
    _, h, _ = client.get(path)
    status, h304, body = client.get(path, If_None_Match=h["ETag"])
    assert status == 304 and body == b"" and h304["ETag"] == h["ETag"]
    assert client.get(path, If_None_Match=f'"nope", W/{h["ETag"]}')[0] == 304
    assert client.get(path, If_None_Match='"nope"')[0] == 200
    assert client.get(path, If_Modified_Since=h["Last-Modified"])[0] == 304
    lm = parsedate_to_datetime(h["Last-Modified"])
    earlier = format_datetime(lm.replace(year=lm.year - 1), usegmt=True)
    assert client.get(path, If_Modified_Since=earlier)[0] == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110).
    assert client.get(path, If_None_Match='"nope"', If_Modified_Since=h["Last-Modified"])[0] == 200
    # The index pages are stable and answer conditional requests too.
    _, hi, _ = client.get("/")
    assert client.get("/", If_None_Match=hi["ETag"])[0] == 304


def test_advance_changes_pages_and_reset(site, client):
    model = site.model
    fast = first_page(model, lambda s: s.klass == "fast" and s.change_days[:1] == [1])
    path = f"/page/{fast}.html"
    assert client.json("GET", "/_admin/day")[1]["day"] == 0
    _, h0, b0 = client.get(path)

    assert client.json("POST", "/_admin/advance") == (200, {"day": 1})
    _, h1, b1 = client.get(path)
    assert h1["ETag"] != h0["ETag"]
    assert parsedate_to_datetime(h1["Last-Modified"]) == sim_date(1)
    assert h1["X-Sim-Day"] == "1"
    assert strip_noise(b1) != strip_noise(b0)
    assert client.get(path, If_None_Match=h0["ETag"])[0] == 200
    assert client.get(path, If_Modified_Since=h0["Last-Modified"])[0] == 200

    assert client.json("POST", "/_admin/advance?days=3") == (200, {"day": 4})
    assert client.json("GET", "/_admin/advance")[0] == 405
    assert client.json("POST", "/_admin/advance?days=-1")[0] == 400

    assert client.json("POST", "/_admin/reset") == (200, {"day": 0})
    assert client.json("GET", "/_truth/served")[1]["served"] == []
    _, h0b, _ = client.get(path)
    assert h0b["ETag"] == h0["ETag"]  # back to version 0


def test_truth_endpoints(site, client):
    model = site.model
    periodic = first_page(model, lambda s: s.period == 2)
    path = f"/page/{periodic}.html"
    _, h, _ = client.get(path)
    client.get(path, If_None_Match=h["ETag"])
    client.json("POST", "/_admin/advance?days=4")
    client.get(path)
    gone = next(s.index for s in model.specs if s.status == 404)
    assert client.get(f"/page/{gone}.html")[0] == 404
    client.get("/")  # index pages are not logged

    status, changes = client.json("GET", "/_truth/changes")
    assert status == 200
    assert changes["day"] == 4 and changes["seed"] == 1 and changes["pages"] == 300
    rows = {r["path"]: r for r in changes["truth"]}
    assert set(rows[path]) == {"path", "class", "rate", "period", "changes"}
    assert rows[path]["class"] == "periodic" and rows[path]["period"] == 2
    assert rows[path]["changes"] == [d for d in range(1, 5) if d % 2 == model.specs[periodic].phase]
    assert f"/page/{gone}.html" in {r["path"] for r in changes["excluded"]}
    assert len(rows) + len(changes["excluded"]) == 300

    status, served = client.json("GET", "/_truth/served")
    assert status == 200 and served["next"] == 4
    v4 = model.version(periodic, 4)
    assert served["served"] == [
        {"path": path, "day": 0, "version": 0, "status": 200, "not_modified": False},
        {"path": path, "day": 0, "version": 0, "status": 304, "not_modified": True},
        {"path": path, "day": 4, "version": v4, "status": 200, "not_modified": False},
        {
            "path": f"/page/{gone}.html",
            "day": 4,
            "version": 0,
            "status": 404,
            "not_modified": False,
        },
    ]
    assert client.json("GET", "/_truth/served?since=3")[1]["served"] == served["served"][3:]
    assert client.json("GET", "/_truth/served?since=x")[0] == 400


def test_error_pages_over_http(site, client):
    by_status = {s.status: s for s in reversed(site.model.specs)}
    assert client.get(f"/page/{by_status[404].index}.html")[0] == 404
    assert client.get(f"/page/{by_status[500].index}.html")[0] == 500
    status, headers, _ = client.get(f"/page/{by_status[301].index}.html")
    assert status == 301 and headers["Location"] == f"/page/{by_status[301].location}.html"
    assert client.get("/page/300.html")[0] == 404
    assert client.get("/page/x.html")[0] == 404
    assert client.get("/index/99.html")[0] == 404


def test_day_seconds_advances_automatically():
    with RunningSite(pages=50, seed=1, day_seconds=0.2) as s:
        c = Client(s.base_url)
        started = s.state.day_began
        s.state.monotonic = lambda: started + 0.39  # injected: 1.95 days of 0.2 s
        assert c.json("GET", "/_admin/day")[1]["day"] == 1
        s.state.monotonic = lambda: started + 0.41  # 2.05 days
        day = c.json("GET", "/_admin/day")[1]["day"]
        assert day == 2
        assert c.json("POST", "/_admin/advance?days=10")[1]["day"] >= 12
        assert c.json("POST", "/_admin/reset")[1]["day"] == 0
        c.close()


def test_start_in_thread_returns_url_and_stop():
    base_url, stop = start_in_thread(pages=20, seed=5)
    try:
        c = Client(base_url)
        assert c.get("/page/0.html")[0] in (200, 301, 404, 500)
        c.close()
    finally:
        stop()
    with pytest.raises(OSError):
        Client(base_url).get("/")


# --------------------------------------------------------------------------- truth.py


def hand_worked_docs():
    changes = {
        "day": 3,
        "truth": [
            {"path": "/a", "class": "moderate", "changes": [2]},
            {"path": "/b", "class": "fast", "changes": [1, 3]},
            {"path": "/c", "class": "static", "changes": []},
        ],
        "excluded": [{"path": "/d", "class": "static", "status": 404}],
    }

    def e(path, day, version, status=200):
        return {
            "path": path,
            "day": day,
            "version": version,
            "status": status,
            "not_modified": status == 304,
        }

    served = {
        "served": [
            e("/a", 0, 0),
            e("/b", 0, 0),
            e("/d", 0, 0, 404),
            e("/a", 1, 0),
            e("/b", 1, 1),
            e("/b", 1, 1, 304),  # b fetched twice: once
            e("/c", 2, 0),
            e("/a", 2, 1),  # c: first fetch, not in the denominator
            e("/a", 3, 1, 304),
            e("/b", 3, 2),
        ]
    }
    return changes, served


def test_truth_metrics_hand_worked():
    changes, served = hand_worked_docs()
    assert truth.change_rate_by_day(changes, served) == {
        0: (2, 0, 0),
        1: (2, 2, 1),  # a unchanged, b 0 -> 1
        2: (2, 1, 1),  # a 0 -> 1; c first fetch
        3: (2, 2, 1),  # a unchanged (304), b 1 -> 2
    }
    fresh = truth.freshness_by_day(changes, served, [0, 1, 2, 3])
    # day 0: a, b current, c never fetched; day 1: a0, b1 current; then all three.
    assert fresh == pytest.approx({0: 2 / 3, 1: 2 / 3, 2: 1.0, 3: 1.0})

    result = truth.score(changes, served)
    assert [d.change_rate for d in result.days] == [None, 0.5, 1.0, 0.5]
    assert result.mean_change_rate == pytest.approx(2 / 3)
    assert result.mean_freshness == pytest.approx(5 / 6)
    assert "mean" in result.table()

    warm = truth.score(changes, served, first_day=1)
    assert [d.day for d in warm.days] == [1, 2, 3]
    assert warm.mean_change_rate == pytest.approx(2 / 3)
    assert warm.mean_freshness == pytest.approx(8 / 9)

    # A stale copy stays stale until re-fetched: drop b's day-3 fetch.
    served["served"] = served["served"][:-1]
    assert truth.freshness_by_day(changes, served, [3]) == pytest.approx({3: 2 / 3})


def test_truth_metrics_from_the_live_site(site, client):
    model = site.model
    truth_pages = [s.index for s in model.specs if s.status == 200]
    for i in truth_pages:
        client.get(f"/page/{i}.html")
    client.json("POST", "/_admin/advance")
    for i in truth_pages[:50]:
        client.get(f"/page/{i}.html")
    changes, served = truth.fetch_truth(site.base_url)
    result = truth.score(changes, served)
    day0, day1 = result.days
    assert day0.freshness == 1.0 and day0.change_rate is None
    expected = sum(model.version(i, 1) != 0 for i in truth_pages[:50])
    assert (day1.refetched, day1.changed) == (50, expected)
    stale_elsewhere = sum(model.version(i, 1) != 0 for i in truth_pages[50:])
    assert day1.freshness == pytest.approx(1 - stale_elsewhere / len(truth_pages))


# --------------------------------------------------------------------------- Scrapy


@pytest.mark.slow
def test_scrapy_crawl_fetches_every_page(tmp_path):
    with RunningSite(pages=300, seed=1) as site:
        out = tmp_path / "pages.jsonl"
        env = dict(os.environ)
        env.pop("SCRAPY_SETTINGS_MODULE", None)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "scrapy",
                "crawl",
                "site",
                "-a",
                f"start_url={site.base_url}/",
                "-O",
                str(out),
                "-s",
                "LOG_LEVEL=WARNING",
                "-s",
                # a store of its own: the project's default one may know these URLs
                f"RECRAWL_STORE={tmp_path / 'history.sqlite3'}",
            ],
            cwd=ROOT / "example_project",
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        changes, served = truth.fetch_truth(site.base_url)

    truth_paths = {r["path"] for r in changes["truth"]}
    fetched = {e["path"] for e in served["served"]}
    assert truth_paths <= fetched
    assert {r["path"] for r in changes["excluded"]} <= fetched  # met the 404/500/301 pages
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert {urlsplit(it["url"]).path for it in items} == truth_paths
    assert len(items) == len(truth_paths)
    assert all(it["title"] for it in items)
    result = truth.score(changes, served)
    assert result.days[0].freshness == 1.0
