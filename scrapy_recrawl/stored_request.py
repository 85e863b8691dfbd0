"""The request a recrawl is rebuilt from: the request as the spider made it.

A URL's stored request is re-issued by every later recrawl of it. Scrapy's downloader
middlewares fill headers and meta on each request that goes out (User-Agent, default
headers, cookies, Basic auth, proxy, timeout), and only when they are absent: a
stored copy of the request *after* them would replay yesterday's values and win over
today's settings, and keep credentials at rest. So, as Scrapy's JOBDIR queues and
scrapy-redis keep a request as it was enqueued, the stored request is the one the
scheduler handed out, before any downloader middleware: :meth:`StoredRequests.mark`
notes, as the request leaves the scheduler, the headers and meta keys it has then
(``meta[META_AS_MADE]``; a redirect's or a retry's copy of the request carries the
note on, and it is dropped once the response is received), and
:meth:`StoredRequests.stored` keeps only those when the visit is recorded. A recrawl then goes through the middlewares as a new request does, with
the settings of its own crawl.

What is never stored whatever the spider set (credentials, cookies) is dropped by
:func:`~scrapy_recrawl.history.request_scrub.scrub_request`, with the names
``RECRAWL_UNSTORED_HEADERS`` and ``RECRAWL_UNSTORED_META`` add.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

from .core.meta import (
    META_CHANGEFREQ,
    META_CYCLE,
    META_ID,
    META_IMPORTANCE,
    META_KIND,
    META_LASTMOD,
    META_PAIR,
    META_RANK,
    META_RESULT,
    META_SCORE,
)
from .history.request_scrub import UNSTORED_HEADERS, header_name, scrub_previous, scrub_request
from .hubs import META_HUB_PAGE, META_VIA
from .settings import get

#: meta key: what the request held as it left the scheduler (:meth:`StoredRequests.mark`)
META_AS_MADE = "_recrawl_as_made"

#: meta key: the request was rebuilt from its URL's stored request, which storing it again
#: would write unchanged (:meth:`StoredRequests.kept_as_is`); its value is the request's
#: ``id()``, so a copy (a redirect's, a retry's, one an errback re-issues with another
#: callback, one restored from a JOBDIR queue) is stored as any request is
META_REBUILT = "_recrawl_rebuilt"

#: meta keys set for one download (by this package, or Scrapy's downloader): never part
#: of the request a later cycle re-issues
VOLATILE_META = frozenset(
    {
        META_AS_MADE,
        META_REBUILT,
        META_PAIR,
        META_RESULT,
        META_CYCLE,
        META_RANK,
        META_ID,
        META_SCORE,
        META_KIND,
        META_HUB_PAGE,
        META_VIA,
        "download_slot",
        "download_latency",
        "retry_times",
        "redirect_times",
        "redirect_ttl",
        "redirect_urls",
        "redirect_reasons",
        "_slot",
        # what the spider told the evidence plug-in this time (core/meta.py): a recrawl
        # rebuilt from the stored request must not repeat it
        META_IMPORTANCE,
        META_LASTMOD,
        META_CHANGEFREQ,
    }
)


class StoredRequests:
    """What of a request is stored for later recrawls (module docstring); one per
    component that stores requests, built from the crawl's settings."""

    def __init__(self, headers: Collection[str] = (), meta: Collection[str] = ()) -> None:
        #: names added to the built-in lists of what is never stored
        self.headers = frozenset(h.lower() for h in headers)
        self.meta = frozenset(meta)
        #: every header name never stored (scrub_request's list and these), lower case
        self._unstored_headers = UNSTORED_HEADERS | self.headers

    @classmethod
    def from_settings(cls, settings: Any) -> StoredRequests:
        return cls(
            list(get(settings, "RECRAWL_UNSTORED_HEADERS")),
            list(get(settings, "RECRAWL_UNSTORED_META")),
        )

    def mark(self, request: Request) -> None:
        """Note what ``request`` holds as the scheduler hands it out, before any
        downloader middleware; a request already noted (a redirect's or a retry's
        copy) keeps the note of the request the spider made."""
        meta = request.meta
        if META_AS_MADE in meta:
            return
        unstored = self._unstored_headers  # as scrub_request drops them, in one pass
        meta[META_AS_MADE] = {
            "headers": {
                bytes(k): [bytes(v) for v in vs]
                for k, vs in dict.items(request.headers)
                if header_name(k) not in unstored
            },
            "meta": sorted(k for k in meta if isinstance(k, str)),
        }

    def rebuild(self, d: dict[str, Any], spider: Spider | None) -> Request:
        """The request a recrawl re-issues, from its URL's stored request ``d``; marked
        :data:`META_REBUILT` when storing it again would write the same (:meth:`kept_as_is`).
        Raises as ``request_from_dict`` does (a callback the spider no longer has)."""
        request = request_from_dict(d, spider=spider)
        if self.kept_as_is(d):
            # its visit keeps the stored request (visit_recorder.py, request_dict)
            request.meta[META_REBUILT] = id(request)
        return request

    def kept_as_is(self, d: Mapping[str, Any]) -> bool:
        """Whether the stored request ``d`` (as read back) is what :meth:`stored` would
        store again for the request rebuilt from it: the scrub of this crawl's settings
        (``RECRAWL_UNSTORED_HEADERS`` / ``_META``, changed since it was stored) leaves it
        whole, and it holds no meta key set for one download (a newer release's list).
        Such a recrawl's visit keeps the stored request (``Visit.request`` None) instead
        of encoding the same bytes again: a fifth of recording a 304 (visit_recorder.py,
        ``request_dict``)."""
        for key in d.get("meta") or ():
            if key in VOLATILE_META or (type(key) is str and key.startswith("_recrawl")):
                return False
        return scrub_request(d, self.headers, self.meta) == d

    def forget(self, response: Any = None, request: Request | None = None, **kw: Any) -> None:
        """Drop the note once the response is received (Scrapy's ``response_received``,
        after every downloader middleware): a spider that builds its next request with
        ``meta=response.meta`` must not hand it this request's note, nor pass it as
        rebuilt from a stored request (:data:`META_REBUILT`)."""
        if request is not None:
            meta = request.meta
            meta.pop(META_AS_MADE, None)
            meta.pop(META_REBUILT, None)

    def stored(
        self,
        d: Mapping[str, Any],
        request: Request,
        *,
        downloaded: bool,
        volatile: Collection[str] = VOLATILE_META,
    ) -> dict[str, Any]:
        """``d`` (``request.to_dict()``) as it is stored: the headers and meta keys the
        request had as it left the scheduler (:meth:`mark`), less ``volatile`` keys
        and what is never stored. A request with no note either never reached a
        downloader middleware (``downloaded`` False: a pending request kept for a later
        cycle), and is as the spider made it, or came past the scheduler (a component's
        own ``engine.download()``): then what Scrapy's middlewares add to every request
        is dropped too (request_scrub.scrub_previous)."""
        out = dict(d)
        note = request.meta.get(META_AS_MADE)
        meta = request.meta
        if isinstance(note, Mapping):
            out["headers"] = dict(note.get("headers") or {})
            keys = set(note.get("meta") or ())
            out["meta"] = {k: v for k, v in meta.items() if k in keys and k not in volatile}
        else:
            out["meta"] = {k: v for k, v in meta.items() if k not in volatile}
            if downloaded:
                out = scrub_previous(out)
        return scrub_request(out, self.headers, self.meta)


def request_to_dict(request: Request, spider: Spider | None) -> dict[str, Any]:
    """``request.to_dict(spider=spider)``, without its per-call scan of the spider.

    Scrapy finds a callback's name with inspect.getmembers(spider) on every
    call, which costs more than the rest of recording a visit; a bound method
    of the spider is named by its own ``__name__`` (checked against the spider).
    Raises ValueError as Scrapy does for a callback it cannot name.
    """
    names = [_method_name(spider, f) for f in (request.callback, request.errback)]
    if (
        None in names[:1]
        or (request.errback is not None and names[1] is None)
        or type(request).to_dict is not Request.to_dict
    ):
        # not a plain spider method, or a request class with its own to_dict: Scrapy decides
        return request.to_dict(spider=spider)
    # Request.to_dict()'s dict, made here with the names found above: a
    # ``replace(callback=None).to_dict()`` would build a whole new Request first (its URL
    # parsed again, its headers and meta copied), a fifth of what recording a 304 costs
    d: dict[str, Any] = {
        "url": request.url,
        "callback": names[0],
        "errback": names[1],
        "headers": dict(request.headers),
    }
    for attr in request.attributes:
        d.setdefault(attr, getattr(request, attr))
    if type(request) is not Request:
        d["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    return d


def _method_name(spider: Spider | None, func: Any) -> str | None:
    if func is None or isinstance(func, str):
        return func
    name = getattr(func, "__name__", None)
    if (
        spider is not None
        and name is not None
        and getattr(func, "__self__", None) is spider
        and getattr(getattr(spider, name, None), "__func__", None) is getattr(func, "__func__", 0)
    ):
        return name
    return None
