"""The reference site as one object: its sections, its simulated day, what it served.

Why one object: the HTTP server (``server.py``), the tests and the benchmarks all need
the same three things -- answer a request as the site would, move the clock, tell the
truth -- and a test holding the :class:`ReferenceSite` it serves can ask the truth in
process, with no JSON round trip (the ``/_truth/*`` endpoints return the same
documents, built here).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import format_datetime
from typing import Protocol
from urllib.parse import urlsplit

from example_project.serving import SimulatedClock
from example_project.site import _etag_matches, _ims_satisfied

from .boilerplate import RequestContext, canonical, fill, parse_kinds
from .model import EPOCH, Page, at_noon, content_hash, sim_date
from .news import News
from .shop import Shop
from .truth import ContentHistory, PageTruth, Served

__all__ = ["SITES", "ReferenceSite", "Response"]

#: The sections a reference site can serve, by name (each under ``/<name>/``).
SITES: tuple[str, ...] = ("shop", "news")

_NOT_FOUND = b"<!DOCTYPE html><title>Not found</title><h1>Not found</h1>\n"


class Section(Protocol):
    name: str

    def paths(self, day: int) -> list[str]: ...

    def page(self, path: str, day: int) -> Page | None: ...

    def meta(self, path: str) -> dict[str, object]: ...

    def recommend(self, r: random.Random, day: int) -> Sequence[tuple[str, str]]: ...

    def unchanged_chance(self, path: str, since: int, day: int) -> float | None: ...


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


class ReferenceSite(SimulatedClock):
    """A shop and a news site whose content is a pure function of ``(seed, path, day)``.

    ``sites`` picks the sections served (``"shop"``, ``"news"``); ``boilerplate`` the
    boilerplate kinds (``boilerplate.KINDS``; None or ``"all"``: every kind, ``"none"``:
    none, or a comma list / iterable of names). The shop's size is ``products`` in
    ``categories`` (plus the home page), products ``1..daily_products`` changing every
    day; the news site starts with ``articles`` and publishes ``articles_per_day`` a
    day, ``per_page`` to a listing. ``day_seconds`` > 0 also moves the day on by one
    every so many wall seconds (0: only :meth:`advance`).
    """

    def __init__(
        self,
        seed: int = 1,
        *,
        sites: Iterable[str] = SITES,
        boilerplate: str | Iterable[str] | None = None,
        products: int = 200,
        categories: int = 14,
        daily_products: int = 10,
        articles: int = 30,
        articles_per_day: int = 2,
        per_page: int = 10,
        correction_rate: float = 0.2,
        removal_rate: float = 0.15,
        day_seconds: float = 0.0,
    ) -> None:
        names = list(dict.fromkeys(sites))
        unknown = sorted(set(names) - set(SITES))
        if unknown or not names:
            raise ValueError(f"sites must name some of {', '.join(SITES)}, got {names}")
        super().__init__(day_seconds)
        self.seed = seed
        self.kinds = parse_kinds(boilerplate)
        self.sections: dict[str, Section] = {}
        if "shop" in names:
            self.sections["shop"] = Shop(seed, products, categories, daily_products)
        if "news" in names:
            self.sections["news"] = News(
                seed,
                articles,
                articles_per_day,
                per_page,
                correction_rate=correction_rate,
                removal_rate=removal_rate,
            )
        self.history = ContentHistory(self._live_paths, self._page, self._meta)
        self._lock = self.lock
        self._served: list[Served] = []

    # -- the clock (SimulatedClock: day, advance) --------------------------------------

    def reset(self) -> int:
        """Back to day 0 with an empty served log (the content model is pure: unchanged)."""
        with self._lock:
            self.reset_clock()
            self._served = []
            return 0

    def sim_now(self) -> dt.datetime:
        """Noon of the current day plus the real time since it began (at most 11 h):
        what relative dates are relative to."""
        elapsed = min(time.monotonic() - self.day_began, 11 * 3600)
        return at_noon(self.day) + dt.timedelta(seconds=elapsed)

    # -- content ----------------------------------------------------------------------

    def section_of(self, path: str) -> Section | None:
        for name, section in self.sections.items():
            if path.startswith(f"/{name}/"):
                return section
        return None

    def _live_paths(self, day: int) -> Iterable[tuple[str, str]]:
        for name, section in self.sections.items():
            for path in section.paths(day):
                yield name, path

    def _page(self, path: str, day: int) -> Page | None:
        section = self.section_of(path)
        return None if section is None else section.page(path, day)

    def _meta(self, path: str) -> dict[str, object]:
        section = self.section_of(path)
        return {} if section is None else section.meta(path)

    def unchanged_chance(self, path: str, since: int, day: int) -> float | None:
        """The chance, under the site's own change model but not knowing its draws, that
        the page at ``path`` (live on ``day``) still has the content it had on ``since``:
        what an estimator that knew each page's change process exactly would say
        (``score.expected_freshness_by_day``: the chance floor of a freshness estimate).
        None: not a page of a section, or a kind the model does not describe."""
        section = self.section_of(path)
        return None if section is None else section.unchanged_chance(path, since, day)

    def page(self, path: str, day: int | None = None) -> Page | None:
        """The page at ``path`` (no query) on ``day`` (default: today); None: 404."""
        return self._page(path, self.day if day is None else day)

    def content(self, path: str, day: int | None = None) -> str | None:
        """The real content of a live page: its HTML with the boilerplate blanked
        (``boilerplate.strip`` of any served copy gives the same text); None: not live."""
        page = self.page(path, day)
        return canonical(page.template) if page is not None and page.status == 200 else None

    def render(self, path: str, day: int | None = None, r: random.Random | None = None) -> str:
        """The page as it would be served (boilerplate filled), without logging it."""
        day = self.day if day is None else day
        page = self._page(path, day)
        if page is None:
            raise KeyError(path)
        return fill(page.template, self.kinds, self._context(path, day, r))

    def _context(self, path: str, day: int, r: random.Random | None) -> RequestContext:
        section = self.section_of(path)
        rr = r if r is not None else random.Random(os.urandom(16))
        return RequestContext(
            rng=rr,
            real_now=dt.datetime.now(dt.timezone.utc),
            sim_now=self.sim_now() if day == self.day else at_noon(day),
            recommend=(lambda q: section.recommend(q, day)) if section else (lambda q: ()),
        )

    # -- serving ------------------------------------------------------------------------

    def respond(self, target: str, headers: Mapping[str, str] | None = None) -> Response | None:
        """Answer a GET of ``target`` (path and query) as the site does, and log it;
        None: not a page of a section (the server answers those itself)."""
        path = urlsplit(target).path
        section = self.section_of(path)
        if section is None:
            return None
        headers = headers or {}
        day = self.day
        self.history.ensure(day)
        page = section.page(path, day)
        if page is None:
            self._log(target, path, day, 404, None)
            return Response(404, {"Content-Type": "text/html; charset=utf-8"}, _NOT_FOUND)
        out = {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache"}
        if page.status != 200:
            body = fill(page.template, self.kinds, self._context(path, day, None))
            self._log(target, path, day, page.status, None)
            return Response(page.status, out, body.encode())
        truth = self.history.truth(path, day)
        assert truth is not None
        version = truth.version(day)
        etag = '"' + content_hash(canonical(page.template)) + '"'
        changed = truth.changes[version - 1] if version else truth.created - page.modified_before
        last_modified = sim_date(changed)
        if page.validators == "etag":
            out["ETag"] = etag
        if page.validators in ("etag", "lm"):
            out["Last-Modified"] = format_datetime(last_modified, usegmt=True)
        if self._not_modified(page.validators, headers, etag, last_modified):
            self._log(target, path, day, 304, version)
            return Response(304, out, b"")
        body = fill(page.template, self.kinds, self._context(path, day, None))
        self._log(target, path, day, 200, version)
        return Response(200, out, body.encode())

    @staticmethod
    def _not_modified(
        validators: str, headers: Mapping[str, str], etag: str, last_modified: dt.datetime
    ) -> bool:
        if validators == "none":
            return False
        inm = headers.get("If-None-Match")
        if inm is not None and validators == "etag":
            return _etag_matches(inm, etag)
        ims = headers.get("If-Modified-Since")
        return ims is not None and _ims_satisfied(ims, last_modified)

    def _log(self, url: str, path: str, day: int, status: int, version: int | None) -> None:
        with self._lock:
            self._served.append(Served(url, path, day, time.time(), status, version))

    # -- the truth, in process ---------------------------------------------------------

    def pages(self, day: int | None = None) -> list[str]:
        """The live pages on ``day`` (default: today), sorted."""
        day = self.day if day is None else day
        return sorted(path for _, path in self._live_paths(day))

    def truth(self, path: str, up_to: int | None = None) -> PageTruth | None:
        """One page's history as of the end of day ``up_to`` (default: today)."""
        return self.history.truth(path, self.day if up_to is None else up_to)

    def changes(self, up_to: int | None = None) -> dict[str, PageTruth]:
        """Every page's history as of the end of day ``up_to`` (default: today), by path."""
        return self.history.all(self.day if up_to is None else up_to)

    def version(self, path: str, day: int | None = None) -> int | None:
        """The real-content version of ``path`` on ``day``; None: not live then."""
        day = self.day if day is None else day
        t = self.history.truth(path, day)
        return None if t is None else t.version(day)

    def served(self, since: int = 0) -> list[Served]:
        """The served log from entry ``since`` on, in serving order."""
        with self._lock:
            return self._served[since:]

    # -- the same, as the JSON documents of the endpoints -------------------------------

    def day_doc(self) -> dict[str, object]:
        day = self.day
        return {
            "day": day,
            "date": sim_date(day).date().isoformat(),
            "epoch": EPOCH.date().isoformat(),
            "seed": self.seed,
            "sites": list(self.sections),
            "boilerplate": sorted(self.kinds),
            "day_seconds": self.day_seconds,
        }

    def changes_doc(self, up_to: int | None = None) -> dict[str, object]:
        day = self.day if up_to is None else up_to
        return {
            "day": day,
            "seed": self.seed,
            "pages": [t.to_json() for t in self.changes(day).values()],
        }

    def pages_doc(self, day: int | None = None) -> dict[str, object]:
        day = self.day if day is None else day
        return {"day": day, "pages": self.pages(day)}

    def served_doc(self, since: int = 0) -> dict[str, object]:
        with self._lock:
            rows = self._served[since:]
            total = len(self._served)
        return {
            "day": self.day,
            "since": since,
            "next": total,
            "served": [s.to_json() for s in rows],
        }


def dumps(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
