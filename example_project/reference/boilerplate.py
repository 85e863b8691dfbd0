"""The per-request boilerplate real sites put on every page, which is NOT a real change.

Why: a change detector is judged on real sites, where every response differs from the
last one even when nothing the user cares about changed. Each kind below can be
switched on or off (``kinds``), so a test can build a site with none of it, with
one kind only, or with all of it (the default).

=========== ================================================================ ===========
kind        what it looks like                                               changes
=========== ================================================================ ===========
timestamp   ``<p class="rendered">Rendered at 2026-05-01T10:11:12.123456Z</p>`` every request
csrf        ``<meta name="csrf-token" content="…">`` in ``<head>`` and       every request
            ``<input type="hidden" name="csrf_token" value="…">`` in a form
viewers     ``<p class="viewers">17 people are viewing this</p>``            every request
recommend   ``<aside class="also-like">`` "You may also like": 4 random      every request
            products (shop) or stories (news), with their links and prices
ad          ``<div class="ad-slot">Sponsored: … <a href="https://ads.invalid/…">``  every request
session     ``?sid=k3x9q2`` appended to every internal link's ``href``       every request
reldate     ``<time datetime="ISO">3 hours ago</time>``: relative to the     every day
            simulated now (noon of the day plus the real time since it
            began); off: the absolute date, which is stable
=========== ================================================================ ===========

:func:`strip` removes exactly these regions from a served page (and blanks the text of
every ``<time>``), which gives back the page's real content, :func:`canonical`: the
tests compare pages that way, with the site's own knowledge of its boilerplate.
"""

from __future__ import annotations

import datetime as dt
import html
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .model import Slot, Template, words

#: Every boilerplate kind, in the order of the table above.
KINDS: tuple[str, ...] = ("timestamp", "csrf", "viewers", "recommend", "ad", "session", "reldate")

#: Slot name -> the kind that switches it.
SLOTS: dict[str, str] = {
    "timestamp": "timestamp",
    "csrf_meta": "csrf",
    "csrf_input": "csrf",
    "viewers": "viewers",
    "recommend": "recommend",
    "ad": "ad",
    "sid": "session",
    "reldate": "reldate",
}

#: (href, label) pairs for the "you may also like" block, drawn per request.
Recommender = Callable[[random.Random], Sequence[tuple[str, str]]]

esc = html.escape
_e = esc


def parse_kinds(value: str | Iterable[str] | None) -> frozenset[str]:
    """``None``/``"all"``: every kind; ``"none"``/``""``: no kind; else a comma list or
    an iterable of names. An unknown name is a ValueError that names it."""
    if value is None:
        return frozenset(KINDS)
    if isinstance(value, str):
        value = value.strip()
        if value == "all":
            return frozenset(KINDS)
        if value in ("", "none"):
            return frozenset()
        names = [v.strip() for v in value.split(",") if v.strip()]
    else:
        names = list(value)
    unknown = sorted(set(names) - set(KINDS))
    if unknown:
        raise ValueError(
            f"unknown boilerplate kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}, "
            "or 'all' / 'none'"
        )
    return frozenset(names)


@dataclass
class RequestContext:
    """What one request's boilerplate is drawn from."""

    rng: random.Random
    real_now: dt.datetime
    sim_now: dt.datetime
    recommend: Recommender = field(default=lambda r: ())
    _token: str | None = None
    _sid: str | None = None

    @property
    def token(self) -> str:
        if self._token is None:
            self._token = f"{self.rng.getrandbits(128):032x}"
        return self._token

    @property
    def sid(self) -> str:
        if self._sid is None:
            alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
            self._sid = "".join(self.rng.choice(alphabet) for _ in range(6))
        return self._sid


def relative(event: dt.datetime, now: dt.datetime) -> str:
    """ "3 hours ago", "yesterday", "5 days ago" (what news sites print)."""
    seconds = (now - event).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        m = int(seconds // 60)
        return f"{m} minute{'s' * (m != 1)} ago"
    if seconds < 86400:
        h = int(seconds // 3600)
        return f"{h} hour{'s' * (h != 1)} ago"
    d = int(seconds // 86400)
    return "yesterday" if d == 1 else f"{d} days ago"


def absolute(event: dt.datetime) -> str:
    return event.strftime("%Y-%m-%d %H:%M UTC")


def _fill_slot(slot: Slot, kinds: frozenset[str], ctx: RequestContext) -> str:
    name = slot.name
    if name == "reldate":
        event = dt.datetime.fromisoformat(slot.arg)
        text = relative(event, ctx.sim_now) if "reldate" in kinds else absolute(event)
        return f'<time datetime="{slot.arg}">{text}</time>'
    if SLOTS[name] not in kinds:
        return ""
    r = ctx.rng
    if name == "timestamp":
        stamp = ctx.real_now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return f'<p class="rendered">Rendered at {stamp}</p>\n'
    if name == "csrf_meta":
        return f'<meta name="csrf-token" content="{ctx.token}">\n'
    if name == "csrf_input":
        return f'<input type="hidden" name="csrf_token" value="{ctx.token}">'
    if name == "viewers":
        return f'<p class="viewers">{r.randint(2, 60)} people are viewing this</p>\n'
    if name == "recommend":
        sid = f"?sid={ctx.sid}" if "session" in kinds else ""
        items = "".join(
            f'<li><a href="{_e(href)}{sid}">{_e(label)}</a></li>'
            for href, label in ctx.recommend(r)
        )
        return f'<aside class="also-like"><h2>You may also like</h2><ul>{items}</ul></aside>\n'
    if name == "ad":
        return (
            f'<div class="ad-slot">Sponsored: {_e(words(r, 3, 8))} '
            f'<a href="https://ads.invalid/{r.getrandbits(32):08x}">more</a></div>\n'
        )
    if name == "sid":
        return f"?sid={ctx.sid}"
    raise ValueError(f"unknown slot {name!r}")


def fill(template: Template, kinds: frozenset[str], ctx: RequestContext) -> str:
    """The page as served: every slot of a kind in ``kinds`` filled for this request."""
    return "".join(p if isinstance(p, str) else _fill_slot(p, kinds, ctx) for p in template)


def canonical(template: Template) -> str:
    """The page's real content: every slot blanked (a ``<time>`` keeps its datetime)."""
    return "".join(
        p
        if isinstance(p, str)
        else (f'<time datetime="{p.arg}"></time>' if p.name == "reldate" else "")
        for p in template
    )


_STRIP = [
    (re.compile(r'<p class="rendered">Rendered at [^<]*</p>\n'), ""),
    (re.compile(r'<meta name="csrf-token" content="[0-9a-f]*">\n'), ""),
    (re.compile(r'<input type="hidden" name="csrf_token" value="[0-9a-f]*">'), ""),
    (re.compile(r'<p class="viewers">\d+ people are viewing this</p>\n'), ""),
    (re.compile(r'<aside class="also-like">.*?</aside>\n', re.S), ""),
    (re.compile(r'<div class="ad-slot">.*?</div>\n', re.S), ""),
    (re.compile(r"\?sid=[0-9a-z]+"), ""),
    (re.compile(r'(<time datetime="[^"]*">)[^<]*(</time>)'), r"\1\2"),
]


def strip(page: str) -> str:
    """A served page with its boilerplate regions removed: its :func:`canonical` content."""
    for pattern, repl in _STRIP:
        page = pattern.sub(repl, page)
    return page


def link(href: str, text: str, cls: str = "") -> Template:
    """An internal link, which carries the session id when that kind is on."""
    attr = f' class="{cls}"' if cls else ""
    return [f'<a{attr} href="{_e(href)}', Slot("sid"), f'">{_e(text)}</a>']


def layout(title: str, site_name: str, home: str, body: Template) -> Template:
    """The page frame every page of both sites shares, with the boilerplate slots."""
    return [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f"<title>{_e(title)}</title>\n",
        Slot("csrf_meta"),
        "</head>\n<body>\n<header>",
        *link(home, site_name, "brand"),
        '<form class="search" method="get" action="',
        home,
        'search">',
        Slot("csrf_input"),
        '<input name="q"></form></header>\n',
        Slot("timestamp"),
        Slot("viewers"),
        "<main>\n",
        *body,
        "</main>\n",
        Slot("recommend"),
        Slot("ad"),
        f"<footer>{_e(site_name)}, a reference site of scrapy-recrawl.</footer>\n</body>\n</html>\n",
    ]
