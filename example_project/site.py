"""A local web site whose pages change over simulated days, with its ground truth.

Run it::

    python -m example_project.site --port 8000 --pages 2000 --seed 1 [--day-seconds S]

or in-process (tests, benchmarks)::

    base_url, stop = start_in_thread(pages=300, seed=1)

Content model. Page *i*'s content is a pure function of ``(seed, i, version)`` and its
version on day *d* is the number of its change days ``<= d``; the change days are a
pure function of ``(seed, i)``. Day 0 is the initial state, changes happen on days
>= 1. Every page belongs to one class:

=========  ======  ==============================================
class      share   change process (per simulated day)
=========  ======  ==============================================
static      45 %   never changes
slow        25 %   Bernoulli, rate log-uniform in [0.005, 0.03]
moderate    15 %   Bernoulli, rate log-uniform in [0.05, 0.25]
fast         7 %   Bernoulli, rate uniform in [0.4, 0.9]
periodic     8 %   exactly every 2, 3 or 7 days (seeded phase)
=========  ======  ==============================================

The skew follows the real histories in ``shared/data`` (most pages never or rarely
change, a minority changes very often) but time is compressed, so a crawler can learn
the fast pages within ~15 cycles: about 9 % of page-days change (real sites: 0.1-2 %).

A change applies 1-3 element-level edits to the page: a paragraph added, removed or
reworded, a list item added/removed/edited, a table row added/edited/removed, or a
related link's ``href`` retargeted, plus the visible "Updated on" date. Every response
also carries volatile noise that is *not* a change: a ``<script>`` with the render
time and a nonce, and ``<div class="ad" id="ad-slot">`` with random text.

``ETag`` is a hash of the content bytes (without the noise) and ``Last-Modified`` the
simulated date of the last change, on the clock of the ``Date`` header (noon of the
simulated day); conditional GETs get 304. A few pages, fixed by the
seed, answer 404, 500 or 301 (to another page): they are listed apart in the truth.

Endpoints: ``/`` and ``/index/<k>.html`` (stable index pages, 100 links each),
``/page/<i>.html``, ``POST /_admin/advance[?days=N]``, ``POST /_admin/reset``,
``GET /_admin/day``, ``GET /_truth/changes``, ``GET /_truth/served[?since=N]``.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import hashlib
import html
import json
import math
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .serving import ServerThread, SimulatedClock

#: Simulated calendar: day d is EPOCH + d days (UTC midnight).
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
LINKS_PER_INDEX = 100

#: (class name, share of pages)
CLASS_MIX: tuple[tuple[str, float], ...] = (
    ("static", 0.45),
    ("slow", 0.25),
    ("moderate", 0.15),
    ("fast", 0.07),
    ("periodic", 0.08),
)
PERIODS = (2, 3, 7)
#: Share of pages answering each error status (at least one page each).
SPECIAL_SHARE = 0.005

# --------------------------------------------------------------------------- words

_SYLLABLES = (
    "ka ri to mu se la ne vo pi da ru mi sa te lo ba fe gu hi jo ko le ma no "
    "pa qui re si tu va we xi yo za an el in on un ar er ir or ur al il ol "
    "ben cor dal fen gar hol jun kel lin mor nar pel ros sal tin ver"
).split()


def _make_vocabulary(size: int = 3000) -> list[str]:
    rng = random.Random(20260101)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


VOCABULARY = _make_vocabulary()


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(lo, hi)))


def _sentence(rng: random.Random) -> str:
    return _words(rng, 6, 14).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 4)))


def _title(rng: random.Random) -> str:
    return _words(rng, 2, 4).title()


def _row(rng: random.Random) -> list[str]:
    return [_words(rng, 1, 2), str(rng.randint(1, 9999)), _words(rng, 1, 3)]


# --------------------------------------------------------------------------- model


@dataclass
class PageSpec:
    """The fixed, seeded nature of one page."""

    index: int
    klass: str
    rate: float  # expected changes per day (periodic: 1/period)
    period: int | None = None
    phase: int = 0
    status: int = 200  # 404, 500 or 301 for the special pages
    location: int | None = None  # redirect target page index
    base_age_days: int = 0  # version 0 was last modified this many days before EPOCH
    change_days: list[int] = field(default_factory=list)  # computed up to a horizon
    _draws: random.Random | None = None


@dataclass
class PageDoc:
    """The editable content of one page version."""

    title: str
    paragraphs: list[str]
    items: list[str]
    rows: list[list[str]]
    related: list[int]
    updated_day: int


@dataclass(frozen=True)
class Rendered:
    """One content version, split around the two noise slots."""

    version: int
    head: bytes
    middle: bytes
    tail: bytes
    etag: str
    last_modified: dt.datetime


def _rng(seed: int, *parts: object) -> random.Random:
    # str seeds are hashed with SHA-512 by random.Random: stable across runs/processes.
    return random.Random(":".join(str(p) for p in (seed, *parts)))


def _days_since_change(
    r: random.Random, rate: float, period: int | None, phase: int, listed: int
) -> int:
    """Days from a page's last change before day 0 to day 0 (its version 0's age): the
    page changed as after day 0 since it was made ``listed`` days before it, so its
    Last-Modified is what its own process would have left (a page changing every other
    day is not 300 days old)."""
    if period is not None:
        back = (-phase) % period  # the last day d <= 0 with d % period == phase
    elif rate <= 0.0:
        back = listed
    elif rate >= 1.0:
        back = 1
    else:  # one chance a day, as after day 0: a geometric number of days back
        back = 1 + int(math.log(1.0 - r.random()) / math.log(1.0 - rate))
    return min(back, listed)


def sim_date(day: int) -> dt.datetime:
    """The simulated UTC date of day ``day``."""
    return EPOCH + dt.timedelta(days=day)


class SiteModel:
    """Pure, deterministic content model: (seed, page, day) -> version -> HTML."""

    def __init__(self, pages: int = 2000, seed: int = 1) -> None:
        if pages < 1:
            raise ValueError("pages must be >= 1")
        self.pages = pages
        self.seed = seed
        self.specs = [self._spec(i) for i in range(pages)]
        self._assign_specials()
        self.n_index = max(1, math.ceil(pages / LINKS_PER_INDEX))
        self._horizon = 0
        self._lock = threading.RLock()
        self._docs: dict[int, tuple[int, PageDoc]] = {}
        self._rendered: dict[int, Rendered] = {}
        self._index_cache: dict[int, Rendered] = {}
        self.ensure_horizon(64)

    # -- classes and change days ------------------------------------------------

    def _spec(self, i: int) -> PageSpec:
        rng = _rng(self.seed, i, "class")
        u = rng.random()
        acc = 0.0
        klass = CLASS_MIX[-1][0]
        for name, share in CLASS_MIX:
            acc += share
            if u < acc:
                klass = name
                break
        period = None
        phase = 0
        if klass == "static":
            rate = 0.0
        elif klass == "slow":
            rate = math.exp(rng.uniform(math.log(0.005), math.log(0.03)))
        elif klass == "moderate":
            rate = math.exp(rng.uniform(math.log(0.05), math.log(0.25)))
        elif klass == "fast":
            rate = rng.uniform(0.4, 0.9)
        else:
            period = rng.choice(PERIODS)
            phase = rng.randrange(period)
            rate = 1.0 / period
        listed = rng.randint(1, 400)
        base_age = _days_since_change(_rng(self.seed, i, "before"), rate, period, phase, listed)
        spec = PageSpec(i, klass, rate, period, phase, base_age_days=base_age)
        spec._draws = _rng(self.seed, i, "days")
        return spec

    def _assign_specials(self) -> None:
        n = max(1, round(self.pages * SPECIAL_SHARE))
        if self.pages < 3 * n + 2:
            return
        rng = _rng(self.seed, "special")
        chosen = rng.sample(range(self.pages), 3 * n)
        normal = sorted(set(range(self.pages)) - set(chosen))
        for k, i in enumerate(chosen):
            spec = self.specs[i]
            spec.status = (404, 500, 301)[k // n]
            if spec.status == 301:
                spec.location = rng.choice(normal)

    def ensure_horizon(self, day: int) -> None:
        """Compute every page's change days up to at least ``day``."""
        with self._lock:
            if day <= self._horizon:
                return
            new = max(day, 2 * self._horizon)
            for spec in self.specs:
                if spec.klass == "static":
                    continue
                for d in range(self._horizon + 1, new + 1):
                    if spec.period is not None:
                        if d % spec.period == spec.phase:
                            spec.change_days.append(d)
                    elif spec._draws.random() < spec.rate:  # one draw per day, in order
                        spec.change_days.append(d)
            self._horizon = new

    def change_days(self, i: int, up_to: int) -> list[int]:
        """Days in 1..up_to on which page ``i`` changed."""
        self.ensure_horizon(up_to)
        days = self.specs[i].change_days
        return days[: bisect.bisect_right(days, up_to)]

    def version(self, i: int, day: int) -> int:
        """Number of changes of page ``i`` up to and including ``day``."""
        self.ensure_horizon(day)
        return bisect.bisect_right(self.specs[i].change_days, day)

    def is_truth(self, i: int) -> bool:
        return self.specs[i].status == 200

    # -- content ----------------------------------------------------------------

    def _base_doc(self, i: int) -> PageDoc:
        rng = _rng(self.seed, i, "base")
        return PageDoc(
            title=f"{_title(rng)} {i}",
            paragraphs=[_paragraph(rng) for _ in range(rng.randint(3, 6))],
            items=[_words(rng, 2, 5) for _ in range(rng.randint(3, 6))],
            rows=[_row(rng) for _ in range(rng.randint(2, 5))],
            related=self._pick_others(rng, i, rng.randint(3, 5)),
            updated_day=-self.specs[i].base_age_days,
        )

    def _pick_others(self, rng: random.Random, i: int, k: int) -> list[int]:
        if self.pages <= 1:
            return []
        out: list[int] = []
        while len(out) < min(k, self.pages - 1):
            j = rng.randrange(self.pages)
            if j != i and j not in out:
                out.append(j)
        return out

    def _edit(self, doc: PageDoc, i: int, k: int, day: int) -> None:
        """Apply change number ``k`` (1-based) of page ``i`` to ``doc`` in place."""
        rng = _rng(self.seed, i, "edit", k)
        doc.updated_day = day
        for _ in range(1 + (rng.random() < 0.35) + (rng.random() < 0.1)):
            ops = ["para_edit"] * 3 + ["para_add"] * 2 + ["row_edit"] * 2
            ops += ["item_add", "item_edit", "row_add", "link_href"]
            if len(doc.paragraphs) > 2:
                ops.append("para_remove")
            if len(doc.items) > 2:
                ops.append("item_remove")
            if len(doc.rows) > 1:
                ops.append("row_remove")
            op = rng.choice(ops)
            if op == "para_edit":
                p = rng.randrange(len(doc.paragraphs))
                words = doc.paragraphs[p].split(" ")
                for _ in range(rng.randint(1, 4)):
                    w = rng.randrange(len(words))
                    words[w] = _replace_word(rng, words[w])
                doc.paragraphs[p] = " ".join(words)
            elif op == "para_add":
                doc.paragraphs.insert(rng.randint(0, len(doc.paragraphs)), _paragraph(rng))
            elif op == "para_remove":
                doc.paragraphs.pop(rng.randrange(len(doc.paragraphs)))
            elif op == "item_add":
                doc.items.insert(rng.randint(0, len(doc.items)), _words(rng, 2, 5))
            elif op == "item_edit":
                p = rng.randrange(len(doc.items))
                doc.items[p] = _words(rng, 2, 5)
            elif op == "item_remove":
                doc.items.pop(rng.randrange(len(doc.items)))
            elif op == "row_add":
                doc.rows.append(_row(rng))
            elif op == "row_edit":
                r = doc.rows[rng.randrange(len(doc.rows))]
                r[1] = str(int(r[1]) + rng.randint(1, 500))
            elif op == "row_remove":
                doc.rows.pop(rng.randrange(len(doc.rows)))
            elif op == "link_href" and doc.related:
                p = rng.randrange(len(doc.related))
                new = self._pick_others(rng, i, len(doc.related) + 1)
                choices = [j for j in new if j not in doc.related]
                if choices:
                    doc.related[p] = choices[0]

    def doc(self, i: int, version: int) -> PageDoc:
        """The content of page ``i`` at ``version`` (0 = initial)."""
        with self._lock:
            cached = self._docs.get(i)
            if cached is None or cached[0] > version:
                cached = (0, self._base_doc(i))
            v, doc = cached
            if v < version:
                days = self.specs[i].change_days
                if len(days) < version:
                    raise ValueError(f"page {i} has no version {version} yet")
                for k in range(v + 1, version + 1):
                    self._edit(doc, i, k, days[k - 1])
            self._docs[i] = (version, doc)
            return _copy_doc(doc)

    def last_modified(self, i: int, version: int) -> dt.datetime:
        spec = self.specs[i]
        day = spec.change_days[version - 1] if version else -spec.base_age_days
        return sim_date(day)

    def render_page(self, i: int, version: int) -> Rendered:
        with self._lock:
            hit = self._rendered.get(i)
            if hit is not None and hit.version == version:
                return hit
            doc = self.doc(i, version)
            head, middle, tail = _page_html(doc, i, sim_date(doc.updated_day))
            rendered = Rendered(
                version,
                head,
                middle,
                tail,
                _etag(head + middle + tail),
                self.last_modified(i, version),
            )
            self._rendered[i] = rendered
            return rendered

    def render_index(self, k: int) -> Rendered:
        with self._lock:
            hit = self._index_cache.get(k)
            if hit is None:
                head, middle, tail = _index_html(self, k)
                hit = Rendered(0, head, middle, tail, _etag(head + middle + tail), EPOCH)
                self._index_cache[k] = hit
            return hit

    def index_url(self, k: int) -> str:
        return "/" if k == 0 else f"/index/{k}.html"

    # -- truth ------------------------------------------------------------------

    def truth_changes(self, day: int) -> dict:
        """The JSON document of ``GET /_truth/changes`` at ``day``."""
        truth, excluded = [], []
        for spec in self.specs:
            path = page_path(spec.index)
            if spec.status != 200:
                row = {"path": path, "class": spec.klass, "status": spec.status}
                if spec.location is not None:
                    row["location"] = page_path(spec.location)
                excluded.append(row)
                continue
            truth.append(
                {
                    "path": path,
                    "class": spec.klass,
                    "rate": round(spec.rate, 6),
                    "period": spec.period,
                    "changes": self.change_days(spec.index, day),
                }
            )
        return {
            "seed": self.seed,
            "pages": self.pages,
            "day": day,
            "epoch": EPOCH.date().isoformat(),
            "truth": truth,
            "excluded": excluded,
        }


def page_path(i: int) -> str:
    return f"/page/{i}.html"


def _copy_doc(doc: PageDoc) -> PageDoc:
    return PageDoc(
        doc.title,
        list(doc.paragraphs),
        list(doc.items),
        [list(r) for r in doc.rows],
        list(doc.related),
        doc.updated_day,
    )


def _replace_word(rng: random.Random, word: str) -> str:
    trail = "." if word.endswith(".") else ""
    core = word.rstrip(".")
    new = core
    while new.lower() == core.lower():
        new = rng.choice(VOCABULARY)
    if core[:1].isupper():
        new = new.capitalize()
    return new + trail


def _etag(content: bytes) -> str:
    return '"' + hashlib.blake2b(content, digest_size=10).hexdigest() + '"'


_e = html.escape


def _page_html(doc: PageDoc, i: int, updated: dt.datetime) -> tuple[bytes, bytes, bytes]:
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(doc.title)}</title>\n"
    )
    body = [
        '</head>\n<body>\n<header><a href="/">Example site</a></header>\n<main>\n',
        f"<h1>{_e(doc.title)}</h1>\n",
        f'<p class="updated">Updated on {updated.date().isoformat()}</p>\n',
        '<section id="text">\n',
    ]
    body += [f"<p>{_e(p)}</p>\n" for p in doc.paragraphs]
    body.append('</section>\n<ul id="facts">\n')
    body += [f"<li>{_e(t)}</li>\n" for t in doc.items]
    body.append('</ul>\n<table id="data">\n<tr><th>name</th><th>count</th><th>note</th></tr>\n')
    body += ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>\n" for r in doc.rows]
    body.append('</table>\n<nav class="related">\n<h2>Related</h2>\n<ul>\n')
    body += [f'<li><a href="{page_path(j)}">Page {j}</a></li>\n' for j in doc.related]
    body.append("</ul>\n</nav>\n</main>\n<aside>\n")
    tail = f"</aside>\n<footer>Page {i} of the example site.</footer>\n</body>\n</html>\n"
    return head.encode(), "".join(body).encode(), tail.encode()


def _index_html(model: SiteModel, k: int) -> tuple[bytes, bytes, bytes]:
    lo, hi = k * LINKS_PER_INDEX, min(model.pages, (k + 1) * LINKS_PER_INDEX)
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Example site, index {k + 1} of {model.n_index}</title>\n"
    )
    body = [
        "</head>\n<body>\n<main>\n",
        f'<h1>Example site: pages {lo} to {hi - 1}</h1>\n<ul class="pages">\n',
    ]
    body += [f'<li><a href="{page_path(i)}">Page {i}</a></li>\n' for i in range(lo, hi)]
    body.append('</ul>\n<nav class="pagination">\n')
    body += [
        f'<a href="{model.index_url(j)}">{j + 1}</a>\n' for j in range(model.n_index) if j != k
    ]
    body.append("</nav>\n</main>\n<aside>\n")
    tail = "</aside>\n</body>\n</html>\n"
    return head.encode(), "".join(body).encode(), tail.encode()


def _noise() -> tuple[bytes, bytes]:
    """Per-request volatile markup: not a content change."""
    ts = dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")
    script = (
        f'<script>window.__render = {{"ts": "{ts}", "nonce": "{os.urandom(8).hex()}"}};</script>\n'
    )
    rnd = random.Random(os.urandom(8))
    ad = (
        f'<div class="ad" id="ad-slot">Sponsored: {_words(rnd, 3, 8)} '
        f'<a href="https://ads.invalid/{rnd.getrandbits(32):08x}">more</a></div>\n'
    )
    return script.encode(), ad.encode()


# --------------------------------------------------------------------------- state


class SiteState(SimulatedClock):
    """Simulated time and the serve log, shared by the request handlers."""

    def __init__(self, model: SiteModel, day_seconds: float = 0.0) -> None:
        super().__init__(day_seconds)
        self.model = model
        self._lock = self.lock
        self._served: list[dict] = []

    def reset(self) -> int:
        with self._lock:
            self.reset_clock()
            self._served = []
            return 0

    def log(self, path: str, day: int, version: int, status: int, not_modified: bool) -> None:
        entry = {
            "path": path,
            "day": day,
            "version": version,
            "status": status,
            "not_modified": not_modified,
        }
        with self._lock:
            self._served.append(entry)

    def served(self, since: int = 0) -> dict:
        with self._lock:
            entries = self._served[since:]
            total = len(self._served)
        return {"day": self.day, "since": since, "next": total, "served": entries}


# --------------------------------------------------------------------------- HTTP


def _ims_satisfied(value: str, last_modified: dt.datetime) -> bool:
    try:
        since = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return False
    if since.tzinfo is None:
        since = since.replace(tzinfo=dt.timezone.utc)
    return last_modified <= since


def _etag_matches(value: str, etag: str) -> bool:
    if value.strip() == "*":
        return True
    strong = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == strong for tag in value.split(","))


class SiteHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Scrapy reuses connections
    disable_nagle_algorithm = True  # headers and body are written separately
    server_version = "RecrawlExampleSite/1.0"
    state: SiteState  # set on the subclass made by make_server

    def log_message(self, format, *args) -> None:  # noqa: A002 - silence per-request logs
        pass

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header: the site's own clock (noon of its simulated day), the
        clock its Last-Modified dates are on, as a real server's are on one clock."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return format_datetime(sim_date(self.state.day) + dt.timedelta(hours=12), usegmt=True)

    # -- plumbing -----------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
        head_only: bool = False,
    ) -> None:
        self.send_response(status)
        if status != 304:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body and status != 304 and not head_only:
            self.wfile.write(body)

    def _json(self, doc: object, status: int = 200) -> None:
        body = json.dumps(doc, separators=(",", ":")).encode()
        self._send(status, body, "application/json", {"Cache-Control": "no-store"})

    def _not_found(self, head_only: bool = False) -> None:
        self._send(
            404, b"<!DOCTYPE html><title>Not found</title><h1>Not found</h1>\n", head_only=head_only
        )

    def _serve_rendered(self, r: Rendered, day: int, head_only: bool) -> bool:
        """Send a content page or a 304; return True if it was a 304."""
        headers = {
            "ETag": r.etag,
            "Last-Modified": format_datetime(r.last_modified, usegmt=True),
            "Cache-Control": "no-cache",
            "X-Sim-Day": str(day),
        }
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        if inm is not None:
            not_modified = _etag_matches(inm, r.etag)
        else:
            not_modified = ims is not None and _ims_satisfied(ims, r.last_modified)
        if not_modified:
            self._send(304, headers=headers)
            return True
        script, ad = _noise()
        body = r.head + script + r.middle + ad + r.tail
        self._send(200, body, headers=headers, head_only=head_only)
        return False

    # -- routes -------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._get(head_only=True)

    def do_GET(self) -> None:
        self._get(head_only=False)

    def _get(self, head_only: bool) -> None:
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        state, model = self.state, self.state.model
        day = state.day
        if path.startswith("/page/") and path.endswith(".html"):
            i = _int_or_none(path[len("/page/") : -len(".html")])
            if i is None or not 0 <= i < model.pages:
                return self._not_found(head_only)
            spec = model.specs[i]
            version = model.version(i, day)
            if spec.status == 200:
                nm = self._serve_rendered(model.render_page(i, version), day, head_only)
                status = 304 if nm else 200
            elif spec.status == 301:
                target = page_path(spec.location)
                body = f'<!DOCTYPE html><a href="{target}">Moved</a>\n'.encode()
                self._send(301, body, headers={"Location": target}, head_only=head_only)
                status, nm = 301, False
            elif spec.status == 404:
                self._not_found(head_only)
                status, nm = 404, False
            else:
                body = b"<!DOCTYPE html><title>Server error</title><h1>Server error</h1>\n"
                self._send(500, body, head_only=head_only)
                status, nm = 500, False
            if not head_only:
                state.log(path, day, version, status, nm)
            return None
        if path == "/" or (path.startswith("/index/") and path.endswith(".html")):
            k = 0 if path == "/" else _int_or_none(path[len("/index/") : -len(".html")])
            if k is None or not 0 <= k < model.n_index:
                return self._not_found(head_only)
            self._serve_rendered(model.render_index(k), day, head_only)
            return None
        if path == "/robots.txt":
            body = b"User-agent: *\nDisallow: /_admin/\nDisallow: /_truth/\n"
            return self._send(200, body, "text/plain", head_only=head_only)
        if path == "/_admin/day":
            return self._json(
                {
                    "day": day,
                    "date": sim_date(day).date().isoformat(),
                    "pages": model.pages,
                    "seed": model.seed,
                    "day_seconds": state.day_seconds,
                }
            )
        if path == "/_truth/changes":
            return self._json(model.truth_changes(day))
        if path == "/_truth/served":
            since = _int_or_none(query.get("since", ["0"])[0])
            if since is None or since < 0:
                return self._json({"error": "since must be a non-negative integer"}, 400)
            return self._json(state.served(since))
        if path in ("/_admin/advance", "/_admin/reset"):
            return self._json({"error": "use POST"}, 405)
        return self._not_found(head_only)

    def do_POST(self) -> None:
        length = _int_or_none(self.headers.get("Content-Length", "0")) or 0
        if length > 0:
            self.rfile.read(length)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/_admin/advance":
            days = _int_or_none(query.get("days", ["1"])[0])
            if days is None or days < 0:
                return self._json({"error": "days must be a non-negative integer"}, 400)
            return self._json({"day": self.state.advance(days)})
        if url.path == "/_admin/reset":
            return self._json({"day": self.state.reset()})
        return self._json({"error": "not found"}, 404)


def _int_or_none(s: str) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def make_server(
    pages: int = 2000,
    seed: int = 1,
    host: str = "127.0.0.1",
    port: int = 8000,
    day_seconds: float = 0.0,
) -> tuple[ThreadingHTTPServer, SiteState]:
    """A bound, not yet serving, HTTP server for a fresh site."""
    state = SiteState(SiteModel(pages=pages, seed=seed), day_seconds=day_seconds)
    handler = type("BoundSiteHandler", (SiteHandler,), {"state": state})
    return _Server((host, port), handler), state


class RunningSite(ServerThread):
    """A site served from a background thread; a context manager.

    No Twisted reactor is involved, so it can run beside (or before) a crawl that
    starts its own reactor.
    """

    def __init__(
        self,
        pages: int = 2000,
        seed: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        day_seconds: float = 0.0,
    ) -> None:
        server, self.state = make_server(pages, seed, host, port, day_seconds)
        self.model = self.state.model
        super().__init__(server, "example-site")

    def __enter__(self) -> RunningSite:
        return self


def start_in_thread(
    pages: int = 2000,
    seed: int = 1,
    port: int = 0,
    host: str = "127.0.0.1",
    day_seconds: float = 0.0,
) -> tuple[str, Callable[[], None]]:
    """Serve a site from a daemon thread; return ``(base_url, stop)``.

    ``base_url`` has no trailing slash, e.g. ``http://127.0.0.1:43121``.
    """
    site = RunningSite(pages=pages, seed=seed, host=host, port=port, day_seconds=day_seconds)
    return site.base_url, site.stop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m example_project.site",
        description="Serve a local site whose pages change over simulated days.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--day-seconds",
        type=float,
        default=0.0,
        help="also advance one simulated day every S wall seconds (0: only POST /_admin/advance)",
    )
    args = parser.parse_args(argv)
    server, state = make_server(args.pages, args.seed, args.host, args.port, args.day_seconds)
    host, port = server.server_address[:2]
    print(
        f"example site: http://{host}:{port}/  pages={args.pages} seed={args.seed} "
        f"day_seconds={args.day_seconds}  (truth: /_truth/changes, /_truth/served; "
        f"admin: POST /_admin/advance, POST /_admin/reset, GET /_admin/day)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()


__all__ = [
    "EPOCH",
    "RunningSite",
    "SiteModel",
    "SiteState",
    "make_server",
    "page_path",
    "sim_date",
    "start_in_thread",
]
