"""Conditional requests: the stored validators sent out with a recrawl.

A recrawl of a page whose copy the store keeps goes out with that copy's
``ETag`` (``If-None-Match``) and ``Last-Modified`` (``If-Modified-Since``), so an
unchanged page can answer 304 (not_modified.py hands the spider the kept copy).
Only *our* validators are touched: a spider's own conditional request is left
be, and a copy of our request (a redirect, a retry) loses them, since they may
be another URL's. The stored request never keeps them either.

The meta keys here are set while a request is downloaded and never stored
(:data:`VOLATILE_META`).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from scrapy import Request

from .history import HistoryStore, HistoryStoreError
from .stored_request import VOLATILE_META as _STORED_VOLATILE

#: meta key set when this middleware added the conditional headers
META_CONDITIONAL = "_recrawl_conditional"
#: meta key: id() of the request this middleware let through to the download, so an
#: IgnoreRequest for it was raised below (a failed download), not by robots.txt or
#: the offsite filter above (which stop it before it reaches this middleware)
META_SENT = "_recrawl_sent"
#: meta key of the one re-fetch, without validators, after a 304 with no stored copy
META_REFETCH = "_recrawl_refetch"
#: meta keys set while downloading: not part of the request to re-issue later
VOLATILE_META = _STORED_VOLATILE | {META_CONDITIONAL, META_SENT, META_REFETCH}

_VALIDATORS = (b"If-None-Match", b"If-Modified-Since")
_VALIDATORS_LOWER = (b"if-none-match", b"if-modified-since")


class Validators:
    """Adds the stored validators to a recrawl (module docstring).

    ``enabled``: RECRAWL_CONDITIONAL_GET (off beside Scrapy's HTTP cache, which would
    keep our 304 and serve it bare later); ``fingerprint``: the crawl's request
    fingerprinter."""

    def __init__(
        self, store: HistoryStore, fingerprint: Callable[[Request], bytes], *, enabled: bool
    ) -> None:
        self.store = store
        self.fingerprint = fingerprint
        self.enabled = enabled

    def outgoing(self, request: Request) -> None:
        """A page's request on its way to the download: marked as sent by us, a copy's
        validators dropped, the stored ones added when the store keeps its copy."""
        meta = request.meta
        meta[META_SENT] = id(request)
        if meta.pop(META_CONDITIONAL, False):
            # a copy of our request (redirect, retry): its validators may be another URL's
            # (a page with only one of them stored was sent only that one)
            request.headers.pop(b"If-None-Match", None)
            request.headers.pop(b"If-Modified-Since", None)
        if not self.enabled or b"If-None-Match" in request.headers:
            return
        if meta.get(META_REFETCH):
            return  # the re-fetch of a 304 with no copy: unconditional
        if b"If-Modified-Since" in request.headers:
            return  # the spider asked for its own conditional request: leave it be
        try:
            rec = self.store.get(self.fingerprint(request), signature=False)
        except HistoryStoreError:
            return  # the store away (said when the response comes): no validators
        if rec is None or not rec.has_body or rec.gone or not (rec.etag or rec.last_modified):
            return
        if rec.etag:
            request.headers["If-None-Match"] = rec.etag
        if rec.last_modified:
            request.headers["If-Modified-Since"] = rec.last_modified
        meta[META_CONDITIONAL] = True


def sent(request: Request) -> bool:
    """This middleware let ``request`` through to the download (an IgnoreRequest for it
    is a failed download, not a component above choosing not to fetch it)."""
    return bool(request.meta.get(META_SENT) == id(request))


def refetch_without_validators(request: Request) -> Request | None:
    """The one re-fetch, unconditional, of a request answered 304 with no stored copy
    behind it; None when ``request`` is that re-fetch already."""
    if request.meta.get(META_REFETCH):
        return None
    headers = request.headers.copy()
    for name in _VALIDATORS:
        headers.pop(name, None)
    meta = {k: v for k, v in request.meta.items() if k not in (META_CONDITIONAL, META_SENT)}
    meta[META_REFETCH] = True
    # the same fetch again, as a retry is: the once-per-cycle rule lets it pass
    # (frontier/base.py: first_fetch) and it is no new URL to budget
    meta.setdefault("retry_times", 0)
    return request.replace(headers=headers, meta=meta, dont_filter=True)


def drop_ours(stored: MutableMapping[str, Any], request: Request) -> None:
    """Drop from a stored request (``request.to_dict()``) the validators this middleware
    added: a later recrawl gets the copy's validators of its own day."""
    if request.meta.get(META_CONDITIONAL):
        stored["headers"] = {
            k: v for k, v in stored["headers"].items() if k.lower() not in _VALIDATORS_LOWER
        }
