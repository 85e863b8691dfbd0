"""The reference news site: an index, older-page listings, new articles, corrections, removals.

Why this shape: it is where new pages appear. The index ``/news/`` lists the
``per_page`` newest live articles, ``/news/page/N`` the next ones (hubs: every arrival
shifts them, so new links keep appearing there); ``per_day`` articles are published
each day; an article may be corrected on any of the ``correction_window`` days after
it appeared (a real change: a paragraph reworded and a correction note, sometimes the
headline too, which changes the listings); now and then an article at least two days
old is removed (410 Gone for odd ids, 404 for even ones) and leaves the listings.
Articles send Last-Modified (a conditional GET with If-Modified-Since gets 304), the
listings send no validators.

The ``articles`` initial ones were published before day 0 (about 7 hours apart): each
has the day it appeared (negative), so only those of the last ``correction_window``
days are still corrected, and its Last-Modified tells its publication day
(``Page.modified_before``).

Paths: ``/news/``, ``/news/page/<N>`` (N >= 2, while there are articles for it),
``/news/article/<id>``. Ids count up from 1 in order of publication; the ``articles``
initial ones exist on day 0.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from .boilerplate import esc as _e
from .boilerplate import layout, link
from .model import Page, Slot, Template, paragraph, rng, sentence, sim_date, suffix_int, title

PREFIX = "/news/"


@dataclass(frozen=True)
class Correction:
    day: int
    paragraph: int  # which paragraph is rewritten
    text: str  # its new text
    note: str
    title: str | None  # a corrected headline, or None


@dataclass
class Article:
    id: int
    created: int  # the day it appeared
    published: dt.datetime
    title: str
    paragraphs: list[str]
    corrections: list[Correction] = field(default_factory=list)
    removed: int | None = None  # the first day it answers ``gone``
    gone: int = 410

    def live(self, day: int) -> bool:
        return self.created <= day and (self.removed is None or day < self.removed)


class News:
    """The news site's content as a pure function of (seed, path, day)."""

    name = "news"

    def __init__(
        self,
        seed: int = 1,
        articles: int = 30,
        per_day: int = 2,
        per_page: int = 10,
        correction_rate: float = 0.2,
        correction_window: int = 3,
        removal_rate: float = 0.15,
    ) -> None:
        if articles < 1 or per_day < 0 or per_page < 1 or correction_window < 0:
            raise ValueError(
                "need articles >= 1, per_day >= 0, per_page >= 1, correction_window >= 0"
            )
        for name, v in (("correction_rate", correction_rate), ("removal_rate", removal_rate)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        self.seed = seed
        self.per_day = per_day
        self.per_page = per_page
        self.correction_rate = correction_rate
        self.correction_window = correction_window
        self.removal_rate = removal_rate
        self.articles: list[Article] = []
        self._lock = threading.RLock()
        self._day = 0
        self._live: dict[int, list[Article]] = {}
        for i in range(1, articles + 1):
            hours = 7 * (articles - i + 1) + rng(seed, "news", "initial", i).randint(0, 5)
            published = sim_date(0) - dt.timedelta(hours=hours)
            # the day it appeared, before day 0: corrections follow recent articles
            # only, and its Last-Modified tells its publication day, not the crawl's first
            self._new_article((published - sim_date(0)).days, published)

    # -- the model ------------------------------------------------------------------

    def _new_article(self, day: int, published: dt.datetime) -> None:
        i = len(self.articles) + 1
        r = rng(self.seed, "news", "article", i)
        gone = 410 if i % 2 else 404
        paras = [paragraph(r) for _ in range(r.randint(3, 6))]
        self.articles.append(Article(i, day, published, f"{title(r)} {i}", paras, gone=gone))

    def _step(self, d: int) -> None:
        r = rng(self.seed, "news", "day", d)
        for a in self.articles:
            if a.removed is None and 1 <= d - a.created <= self.correction_window:
                if r.random() < self.correction_rate:
                    cr = rng(self.seed, "news", "article", a.id, "correction", len(a.corrections))
                    p = cr.randrange(len(a.paragraphs))
                    new_title = f"{title(cr)} {a.id}" if cr.random() < 0.34 else None
                    a.corrections.append(Correction(d, p, paragraph(cr), sentence(cr), new_title))
        if r.random() < self.removal_rate:
            old = [a for a in self.articles if a.removed is None and a.created <= d - 2]
            if old:
                r.choice(old).removed = d
        for _ in range(self.per_day):
            at = sim_date(d) + dt.timedelta(hours=r.randint(0, 10), minutes=r.randint(0, 59))
            self._new_article(d, at)

    def simulate(self, day: int) -> None:
        """Play the days up to ``day`` (each day once, in order: deterministic)."""
        with self._lock:
            while self._day < day:
                self._day += 1
                self._step(self._day)

    def live(self, day: int) -> list[Article]:
        """The live articles on ``day``, newest first."""
        with self._lock:
            self.simulate(day)
            hit = self._live.get(day)
            if hit is None:
                hit = sorted(
                    (a for a in self.articles if a.live(day)),
                    key=lambda a: (a.published, a.id),
                    reverse=True,
                )
                self._live[day] = hit
            return hit

    def n_listings(self, day: int) -> int:
        return max(1, math.ceil(len(self.live(day)) / self.per_page))

    def article_of(self, path: str) -> Article | None:
        i = suffix_int(path, PREFIX + "article/")
        with self._lock:
            return self.articles[i - 1] if i is not None and 1 <= i <= len(self.articles) else None

    # -- the section interface (world.py) -----------------------------------------

    def paths(self, day: int) -> list[str]:
        """Every live path on ``day``."""
        live = self.live(day)
        listings = [listing_path(n) for n in range(1, self.n_listings(day) + 1)]
        return listings + [f"{PREFIX}article/{a.id}" for a in sorted(live, key=lambda a: a.id)]

    def page(self, path: str, day: int) -> Page | None:
        """The page at ``path`` on ``day``; None: no such page (404)."""
        self.simulate(day)
        n = 1 if path == PREFIX else suffix_int(path, PREFIX + "page/")
        if n is not None:
            if not 1 <= n <= self.n_listings(day) or (n == 1 and path != PREFIX):
                return None  # /news/page/1 is /news/
            return Page(200, self._listing(n, day), "index" if n == 1 else "listing")
        a = self.article_of(path)
        if a is None or a.created > day:
            return None
        if not a.live(day):
            return Page(a.gone, self._gone(a), "article")
        return Page(200, self._article(a, day), "article", "lm", max(0, -a.created))

    def meta(self, path: str) -> dict[str, object]:
        a = self.article_of(path)
        return {} if a is None else {"published": a.published.isoformat()}

    def unchanged_chance(self, path: str, since: int, day: int) -> float | None:
        """The model's chance that the page on ``day`` is the one of ``since``
        (``ReferenceSite.unchanged_chance``): an article is corrected with chance
        ``correction_rate`` on each of the ``correction_window`` days after it appeared
        and never after; every listing shifts each day new articles arrive."""
        if day <= since:
            return 1.0
        a = self.article_of(path)
        if a is not None:
            window = sum(
                1 for d in range(since + 1, day + 1) if 1 <= d - a.created <= self.correction_window
            )
            return (1.0 - self.correction_rate) ** window
        n = 1 if path == PREFIX else suffix_int(path, PREFIX + "page/")
        if n is None or self.per_day == 0:
            return None  # not a page, or listings moved only by corrections: not modelled
        return 0.0

    def recommend(self, r: random.Random, day: int) -> Sequence[tuple[str, str]]:
        live = self.live(day)
        return [
            (f"{PREFIX}article/{a.id}", self._title(a, day))
            for a in r.sample(live, min(4, len(live)))
        ]

    # -- rendering ----------------------------------------------------------------

    def _frame(self, page_title: str, body: Template) -> Template:
        return layout(page_title, "Reference News", PREFIX, body)

    @staticmethod
    def _title(a: Article, day: int) -> str:
        t = a.title
        for c in a.corrections:
            if c.day <= day and c.title is not None:
                t = c.title
        return t

    def _listing(self, n: int, day: int) -> Template:
        live = self.live(day)
        chunk = live[(n - 1) * self.per_page : n * self.per_page]
        head = "Latest news" if n == 1 else f"Older news, page {n}"
        body: Template = [f'<h1>{head}</h1>\n<ol class="stories">\n']
        for a in chunk:
            body += [
                "<li>",
                *link(f"{PREFIX}article/{a.id}", self._title(a, day)),
                " ",
                Slot("reldate", a.published.isoformat()),
                "</li>\n",
            ]
        body.append('</ol>\n<nav class="pagination">')
        if n > 1:
            body += link(listing_path(n - 1), "Newer", "newer")
        if n < self.n_listings(day):
            body += link(listing_path(n + 1), "Older", "older")
        body.append("</nav>\n")
        return self._frame(f"{head} - Reference News", body)

    def _article(self, a: Article, day: int) -> Template:
        paras = list(a.paragraphs)
        notes = []
        for c in a.corrections:
            if c.day <= day:
                paras[c.paragraph] = c.text
                notes.append(f'<p class="correction">Correction, {sim_date(c.day).date()}: '
                             f"{_e(c.note)}</p>\n")  # fmt: skip
        t = self._title(a, day)
        body: Template = [
            f'<article class="story">\n<h1>{_e(t)}</h1>\n<p class="byline">Published ',
            Slot("reldate", a.published.isoformat()),
            "</p>\n",
            *(f"<p>{_e(p)}</p>\n" for p in paras),
            *notes,
            "</article>\n<p>",
            *link(PREFIX, "All news"),
            "</p>\n",
        ]
        return self._frame(f"{t} - Reference News", body)

    def _gone(self, a: Article) -> Template:
        what = "Gone" if a.gone == 410 else "Not found"
        body: Template = [f"<h1>{what}</h1>\n<p>This article is no longer available.</p>\n"]
        return self._frame(f"{what} - Reference News", body)


def listing_path(n: int) -> str:
    """``/news/`` for the first listing, ``/news/page/N`` for the others."""
    return PREFIX if n == 1 else f"{PREFIX}page/{n}"
