"""What a response body is, for the change detector: HTML to parse, or bytes to hash.

:func:`is_html` decides whether a body is parsed (declared HTML that is not binary
junk, or undeclared markup); :func:`as_utf8` gives the bytes lxml parses, decoded
as a browser (and w3lib) would. Both take the raw ``Content-Type`` header value.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache

from lxml import etree
from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    resolve_encoding,
    to_unicode,
)

__all__ = ["as_utf8", "is_html"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/vnd.wap.xhtml+xml"})
_BINARY_MAGIC = (
    b"%PDF-",
    b"\x89PNG\r\n\x1a\n",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",
    b"PK\x03\x04",
    b"\x1f\x8b",
    b"RIFF",
    b"\x00\x00\x01\x00",
    b"wOFF",
    b"wOF2",
    b"OggS",
    b"fLaC",
    b"ID3",
)
_HTML_START = re.compile(
    rb"\s*(?:<!doctype\s+html|<html|<head|<body|<!--|<meta|<title|<div|<p\b)", re.I
)
_HTML_SUFFIX = re.compile(r"\.(?:s?html?|xhtml|php|aspx?|jsp)(?:$|[?#])", re.I)
# libxml2 >= 2.14 reads invalid UTF-8 as U+FFFD (one per bad byte, like Python's
# "replace"): UTF-8 bodies then need no validation pass before parsing.
_PARSER_REPLACES_BAD_UTF8 = etree.LIBXML_VERSION >= (2, 14)


# read_bom's byte-order marks: a body that starts with none of them has none
_BOMS = (
    codecs.BOM_UTF32_BE,
    codecs.BOM_UTF32_LE,
    codecs.BOM_UTF16_BE,
    codecs.BOM_UTF16_LE,
    codecs.BOM_UTF8,
)


# (A Content-Type value is read once per value: a site sends few of them.)
@lru_cache(maxsize=256)
def _media_type(content_type: str | None) -> str:
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


@lru_cache(maxsize=256)
def _declares_utf8(content_type: str | None) -> bool:
    """Whether a body without a byte-order mark is UTF-8 by this header (its charset:
    as_utf8's rule, which reads the body's <meta> only when the header has none)."""
    encoding = http_content_type_encoding(content_type)
    if not encoding:
        return False
    if encoding in ("utf-16", "utf-32"):
        encoding += "-be"
    return (resolve_encoding(encoding) or "utf-8") == "utf-8"


def _looks_binary(body: bytes) -> bool:
    if body.startswith(_BINARY_MAGIC):
        return True
    if body.find(b"\x00", 0, 1024) >= 0:
        # UTF-16/32 text has NULs too; a BOM says which it is.
        return read_bom(body[:1024])[0] is None
    return False


def is_html(body: bytes, url: str, content_type: str | None) -> bool:
    """Parse as HTML? Declared HTML that is not binary junk, or undeclared markup."""
    if not body or body.isspace():  # (no .strip(): it would copy the body)
        return _media_type(content_type) in _HTML_TYPES
    if _looks_binary(body):
        return False
    media = _media_type(content_type)
    if media:
        return media in _HTML_TYPES
    head = body[:1024]
    bom_enc, bom = read_bom(head)
    if bom_enc is not None and bom is not None:
        head = head[len(bom) :].decode(bom_enc, "replace").encode("utf-8")
    if _HTML_START.match(head):
        return True
    return bool(url and _HTML_SUFFIX.search(url) and b"<" in head)


def as_utf8(body: bytes, content_type: str | None) -> bytes:
    """The body as UTF-8 bytes, decoded like a browser (and w3lib) would.

    Encoding: byte-order mark, else the header's charset, else a ``<meta>``
    declaration, else UTF-8. Undecodable bytes become U+FFFD. UTF-8 is passed
    through without copying (and, with libxml2 >= 2.14, which replaces bad
    bytes itself, without a validation pass).
    """
    if _PARSER_REPLACES_BAD_UTF8 and not body.startswith(_BOMS) and _declares_utf8(content_type):
        return body  # the common case, decided without reading the body (= _decoded's)
    return _decoded(body, content_type)


def _decoded(body: bytes, content_type: str | None) -> bytes:
    """:func:`as_utf8`, every case."""
    bom_enc, bom = read_bom(body)
    if bom_enc is not None and bom is not None:
        encoding, body = bom_enc, body[len(bom) :]
    else:
        encoding = (
            http_content_type_encoding(content_type) or html_body_declared_encoding(body) or "utf-8"
        )
        if encoding in ("utf-16", "utf-32"):
            encoding += "-be"
    encoding = resolve_encoding(encoding) or "utf-8"
    if encoding == "utf-8":
        if _PARSER_REPLACES_BAD_UTF8 or body.isascii():
            return body
        try:
            body.decode("utf-8")
            return body
        except UnicodeDecodeError:
            pass
    try:
        text = to_unicode(body, encoding)
    except (LookupError, UnicodeError):
        text = to_unicode(body, "utf-8")
    return text.encode("utf-8", "replace")
