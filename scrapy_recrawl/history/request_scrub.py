"""What of a request is never kept at rest: credentials, cookies, and what a download added.

A stored request is re-issued by a later cycle's recrawl, so whatever it holds is
both kept on disk (or in a shared Redis) and sent again. Scrapy's downloader
middlewares only fill a header that is absent: a stored ``Authorization``,
``Cookie`` or ``User-Agent`` would win over what the user configures later, and a
password would sit in the store in plain text. Every request a store writes (each
URL's request, the store's frontier) goes through :func:`scrub_request`, with the
built-in lists below and the ones ``RECRAWL_UNSTORED_HEADERS`` /
``RECRAWL_UNSTORED_META`` add (docs/reliability.md, "What is kept at rest").

:func:`scrub_previous` is for a request taken *after* the downloader middlewares ran
(scrapy_recrawl/stored_request.py: one that came past the scheduler): it also loses
what they add to every request (the User-Agent, the default headers, the timeout, the
proxy): a recrawl gets them from the settings of its own crawl.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: Headers never stored (compared case-insensitively): credentials and cookies.
UNSTORED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})

#: ``Request.meta`` keys never stored: Scrapy's per-request credentials
#: (HttpAuthMiddleware's ``http_user``/``http_pass``) and what HttpProxyMiddleware
#: sets from a proxy's credentials.
UNSTORED_META = frozenset({"http_user", "http_pass", "_auth_proxy", "_scheme_proxy"})

#: Headers Scrapy's downloader middlewares add to every request (UserAgentMiddleware,
#: DefaultHeadersMiddleware's defaults, HttpCompressionMiddleware): dropped from a
#: request taken after they ran (:func:`scrub_previous`).
MIDDLEWARE_HEADERS = frozenset({"user-agent", "accept", "accept-language", "accept-encoding"})

#: Meta keys Scrapy's downloader middlewares set on every request (DownloadTimeout,
#: HttpProxy): dropped from a request taken after they ran.
MIDDLEWARE_META = frozenset({"download_timeout", "proxy"})


def header_name(key: Any) -> str:
    """A header's name as the lists above have it (lower case text)."""
    return (key.decode("latin-1") if isinstance(key, bytes) else str(key)).lower()


def without_credentials(url: Any) -> Any:
    """A proxy URL without its ``user:password@`` part (any other value as it is)."""
    text = url.decode("latin-1") if isinstance(url, bytes) else url
    if not isinstance(text, str) or "@" not in text:
        return url
    try:
        parts = urlsplit(text if "://" in text else "//" + text)
    except ValueError:
        return None  # not a URL we can read: not kept rather than kept with a password
    netloc = parts.netloc.rpartition("@")[2]
    cleaned = urlunsplit(parts._replace(netloc=netloc))
    if "://" not in text:
        cleaned = cleaned.removeprefix("//")
    return cleaned.encode("latin-1") if isinstance(url, bytes) else cleaned


def scrub_request(
    d: Mapping[str, Any],
    headers: Iterable[str] = (),
    meta: Iterable[str] = (),
) -> dict[str, Any]:
    """A copy of the request dict ``d`` without what is never stored: the headers of
    :data:`UNSTORED_HEADERS` and ``headers``, the meta keys of :data:`UNSTORED_META`
    and ``meta``, the request's ``cookies``, and the credentials of a ``proxy`` URL."""
    # the built-in lists alone when nothing is added (the store's own scrub of each visit)
    denied_headers = (
        UNSTORED_HEADERS | {h.lower() for h in headers} if headers else UNSTORED_HEADERS
    )
    denied_meta = UNSTORED_META | set(meta) if meta else UNSTORED_META
    out = dict(d)
    if isinstance(out.get("headers"), Mapping):
        out["headers"] = {
            k: v for k, v in out["headers"].items() if header_name(k) not in denied_headers
        }
    # a request's own cookies= are the Cookie header CookiesMiddleware makes of them
    out.pop("cookies", None)
    if isinstance(out.get("meta"), Mapping):
        kept = {k: v for k, v in out["meta"].items() if k not in denied_meta}
        if kept.get("proxy") is not None:
            kept["proxy"] = without_credentials(kept["proxy"])
        out["meta"] = kept
    return out


def scrub_previous(d: Mapping[str, Any]) -> dict[str, Any]:
    """A request taken after the downloader middlewares ran, as a request is stored:
    scrubbed (:func:`scrub_request`), less the headers and meta the middlewares add to
    every request (:data:`MIDDLEWARE_HEADERS`, :data:`MIDDLEWARE_META`)."""
    return scrub_request(d, MIDDLEWARE_HEADERS, MIDDLEWARE_META)
