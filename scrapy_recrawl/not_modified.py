"""A 304 answer: the stored copy handed to the spider, or one re-fetch without validators.

A 304 to *our* conditional request (validators.py) is answered with the stored copy
of the body, so callbacks and link extraction still run (as HttpCacheMiddleware's
RFC2616 policy does; Heritrix loses outlinks behind 304s), and counted as an
unchanged visit without touching the stored signature (comparing a later body
against a signature refreshed from a 304 is apache/stormcrawler#418).

A 304 with no stored copy behind it (none kept, or a server answering 304 to a
request without validators) is no observation: the URL is fetched again, once,
without validators (``recrawl/304_without_copy``); a 304 to that too is recorded as a
visit, not an observation, and the spider gets the bare 304.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.http import Headers, Response
from scrapy.responsetypes import responsetypes

from .change import ChangeResult
from .core.meta import FLAG_NOT_MODIFIED, META_RESULT
from .history import StoredBody, UrlRecord
from .validators import refetch_without_validators
from .visit_recorder import VisitRecorder, first

#: the middleware's log lines keep its logger's name (a user's logging config names it)
logger = logging.getLogger("scrapy_recrawl.middleware")

#: the change result of a visit that observed nothing about a change
NOT_OBSERVED = ChangeResult(False, 0, 0, 0, 0, 0)
#: the 304's headers that freshen the stored ones (RFC 9111 4.3.4)
_FRESHENED = (b"ETag", b"Last-Modified", b"Date", b"Expires", b"Cache-Control")


def kept_headers(stored: StoredBody) -> Headers:
    """The kept copy's headers as Scrapy's ``Headers``, their values the bytes the
    response had (the stores keep them decoded as latin-1: visit_recorder.py), made as
    ``Headers.update`` makes them (title-cased names, lists of bytes) without its two
    normalising calls per value (every 304 with a copy makes them). Values that are not
    such text (a store written by hand) go through ``Headers`` itself."""
    raw: dict[bytes, list[bytes]] = {}
    try:
        for name, values in stored.headers.items():
            if type(values) is not list:
                return Headers(stored.headers)
            raw.setdefault(name.title().encode("latin-1"), []).extend(
                v.encode("latin-1") for v in values
            )
    except (AttributeError, TypeError, UnicodeEncodeError):
        return Headers(stored.headers)
    headers = Headers()
    dict.update(headers, raw)
    return headers


class NotModified:
    """Records a 304 and says what the engine gets (module docstring)."""

    def __init__(self, recorder: VisitRecorder) -> None:
        self.recorder = recorder

    def with_copy(
        self, request: Request, response: Response, fp: bytes, stored: StoredBody
    ) -> Response:
        """A 304 to our validators, the copy behind them kept: an unchanged observation;
        the spider gets the kept copy, its headers freshened by the 304's."""
        recorder = self.recorder
        recorder.record(request, response, fp, changed=False, result=NOT_OBSERVED)
        recorder.inc("visits")
        recorder.inc("not_modified")
        recorder.count(request, False, "not_modified")
        request.meta[META_RESULT] = NOT_OBSERVED
        headers = kept_headers(stored)
        for name in _FRESHENED:
            if name in response.headers:
                headers[name] = response.headers[name]
        cls = responsetypes.from_args(headers=headers, url=response.url, body=stored.body)
        kept = cls(
            url=response.url,
            status=stored.status,
            body=stored.body,
            flags=[*response.flags, FLAG_NOT_MODIFIED],
            request=request,
            certificate=response.certificate,
            ip_address=response.ip_address,
            protocol=response.protocol,
        )
        # set after: the constructor would copy the Headers just built, key by key
        kept.headers = headers
        return kept

    def without_copy(
        self, request: Request, response: Response, fp: bytes, rec: UrlRecord | None
    ) -> Response | Request:
        """A 304 with no stored copy behind it: the re-fetch without validators, or (a 304
        to that too) the bare 304, recorded as a visit but not an observation."""
        recorder = self.recorder
        recorder.inc("304_without_copy")
        again = refetch_without_validators(request)
        if again is not None:
            logger.debug("recrawl: %s answered 304 with no stored copy: fetched again", request)
            return again
        logger.warning(
            "recrawl: %s answered 304 to a request without validators: not counted as a "
            "change observation; the spider gets the bare 304",
            response.url,
        )
        recorder.record(request, response, fp, changed=None, result=NOT_OBSERVED)
        recorder.inc("visits")
        recorder.count(request, first(rec), None)
        request.meta[META_RESULT] = NOT_OBSERVED
        return response
