"""Deterministic building blocks of the reference site: seeded draws, words, change days.

Why a module of its own: the shop and the news site must be pure functions of
``(seed, page, day)`` so that a test, a benchmark and a demo started with the same
seed see the same site, and so that the truth can be recomputed at any time. Every
random draw here comes from :func:`rng`, keyed by strings (``random.Random`` hashes a
str seed with SHA-512: stable across runs and processes, unlike ``hash()``).

A page's HTML is a :data:`Template`: literal text and :class:`Slot` markers where the
per-request boilerplate goes (``boilerplate.py`` fills or blanks them). The real
content of a page is its template with every slot blanked; its hash is what the truth
versions and what the ETag is made from.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import random
import threading
from dataclasses import dataclass

# One vocabulary and one calendar for every local site of the example project.
from example_project.site import EPOCH, VOCABULARY, sim_date

__all__ = [
    "EPOCH",
    "ChangeProcess",
    "Page",
    "Slot",
    "Template",
    "content_hash",
    "paragraph",
    "rng",
    "sentence",
    "sim_date",
    "title",
    "words",
]


@dataclass(frozen=True)
class Slot:
    """Where one piece of boilerplate goes in a page (``boilerplate.SLOTS`` names them).

    ``arg`` is what the slot needs from the page: the ISO time of the event for a
    ``reldate`` slot, nothing for the others.
    """

    name: str
    arg: str = ""


#: A page as literal text and slots, in order.
Template = list[str | Slot]


@dataclass(frozen=True)
class Page:
    """What a section answers for one path on one day.

    ``status`` is 200 for a live page, 404 or 410 for a removed one (``template`` is
    then the error page). ``validators`` says which conditional-GET headers the page's
    section sends: ``"etag"`` (ETag and Last-Modified), ``"lm"`` (Last-Modified only) or
    ``"none"``. ``kind`` is the page's template family (``home``, ``category``,
    ``product``, ``index``, ``listing``, ``article``), which scores can filter on.
    ``modified_before``: how many days before its creation in the truth (day 0 for
    the shop's pages) the content it was created with last changed: a page that
    existed before the crawl began has a past, and its Last-Modified says so.
    """

    status: int
    template: Template
    kind: str
    validators: str = "none"
    modified_before: int = 0


def rng(seed: int, *parts: object) -> random.Random:
    """A generator keyed by the seed and the parts, e.g. ``rng(1, "product", 7, "base")``."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))


def words(r: random.Random, lo: int, hi: int) -> str:
    return " ".join(r.choice(VOCABULARY) for _ in range(r.randint(lo, hi)))


def sentence(r: random.Random) -> str:
    return words(r, 6, 14).capitalize() + "."


def paragraph(r: random.Random) -> str:
    return " ".join(sentence(r) for _ in range(r.randint(2, 4)))


def title(r: random.Random) -> str:
    return words(r, 2, 4).title()


def content_hash(text: str) -> str:
    """The hash of a page's real content: the truth's version key and the ETag."""
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


class ChangeProcess:
    """The days (>= 1) on which one thing changes: every day, never, or Bernoulli(rate).

    Drawn lazily, one draw per day in order from the thing's own generator, so the
    days up to any horizon do not depend on how far the horizon was pushed before.
    """

    def __init__(self, r: random.Random, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        self.rate = rate
        self._r = r
        self._days: list[int] = []
        self._horizon = 0
        self._lock = threading.Lock()

    def _extend(self, day: int) -> None:
        with self._lock:
            for d in range(self._horizon + 1, day + 1):
                if self.rate >= 1.0 or (self.rate > 0.0 and self._r.random() < self.rate):
                    self._days.append(d)
            self._horizon = max(self._horizon, day)

    def days(self, up_to: int) -> list[int]:
        """The change days in ``1..up_to``."""
        if up_to > self._horizon:
            self._extend(up_to)
        return self._days[: bisect.bisect_right(self._days, up_to)]

    def count(self, day: int) -> int:
        """How many changes happened on days ``<= day`` (the thing's state number)."""
        return len(self.days(day))


def at_noon(day: int) -> dt.datetime:
    """Noon of simulated day ``day``: the site's notion of "now" during that day."""
    return sim_date(day) + dt.timedelta(hours=12)


def suffix_int(path: str, prefix: str) -> int | None:
    """``7`` for ``suffix_int("/shop/product/7", "/shop/product/")``; None when the path
    is not ``prefix`` and a canonical positive number."""
    if not path.startswith(prefix):
        return None
    rest = path[len(prefix) :]
    return int(rest) if rest.isdigit() and not rest.startswith("0") else None
