"""Is this response a real change? Signatures of responses, and their comparison.

A :class:`Signature` is what the history store keeps per visit (a few KB,
versioned binary, see :meth:`Signature.to_bytes`); :meth:`ChangeDetector.compare`
turns two of them into a :class:`ChangeResult`.

The rule (``changed``), for two signatures ``old`` and ``new``:

* no ``old`` (first visit): not changed, every count 0;
* same ``content_hash`` (byte-identical bodies): never changed;
* either side not HTML (``kind == "bytes"``: JSON, PDF, images, bodies over
  ``RECRAWL_MAX_PARSE_BYTES``, binary junk) : changed = the content hashes
  differ; distance and counts are 0;
* both HTML: changed when
  ``distance >= RECRAWL_SIMHASH_DISTANCE`` **or**
  ``added + removed + modified + attributes >= RECRAWL_MIN_ELEMENT_CHANGES``,
  where ``distance`` is the Hamming distance of the two 64-bit simhashes of
  the visible text's word shingles and the four counts come from the element
  diff (:mod:`scrapy_recrawl.change.elements`). A threshold of 0 makes that
  criterion accept any byte-level change.

What is compared: the whole page, however deeply it nests (parsed with
``huge_tree``: 2,048 levels instead of libxml2's 256; the text past that, which
the parser does not read, is one more part, counted in :attr:`ChangeDetector.too_deep`),
its visible text and elements, and the data a scraper reads besides: ``<meta
content>``, the leaves of JSON-LD, ``__NEXT_DATA__`` and other JSON scripts, and
``data-*`` values of elements with text, each a part of its own (see
:mod:`~scrapy_recrawl.change.elements`).

**Optional chi-squared rule** (``RECRAWL_CHANGE_TEST = "chi2"``, paper 004
Eq. 1; off by default): for two HTML versions with different bodies,
``changed`` is instead "the word distributions differ by a chi-squared test
at ``RECRAWL_CHI2_P``" (:mod:`scrapy_recrawl.change.bow`); it needs the
previous version's bag of words (``old_bag``), kept beside the store by the
middleware. Without a bag on either side the default rule applies.

Defaults: shingles of 4 words, 3 bits, 1 element change, no ignored XPaths,
5 MB parse limit. With them every visible-text or link-target change is caught
(the element diff) while nonces, asset hashes, tokens and other noise are not
(see :mod:`~scrapy_recrawl.change.elements` for what counts as noise); the
simhash distance is the coarser "how different" signal kept for the scheduler.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import xxhash
from lxml import etree
from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    resolve_encoding,
    to_unicode,
)

from ..settings import RecrawlSettingError, get
from ._walk import BOOKKEEPING, NOISE_TAGS, shingle_simhash, value_hashes, walk
from .bow import Bag, bag_from_hashes, significant
from .elements import Parts, diff, extract
from .shingles import fmix64
from .signature import (
    _UNCHANGED,
    ChangeResult,
    Ignore,
    Signature,
    SignatureVersionError,
    leave_out,
)
from .simhash import distance as simhash_distance

__all__ = ["ChangeDetector", "ChangeResult", "Ignore", "Signature", "SignatureVersionError"]


logger = logging.getLogger(__name__)

_U64 = np.uint64
_NOISE = frozenset(t.lower() for t in NOISE_TAGS)
_LE_U64 = np.dtype("<u8")

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

# The JSON a scraper reads: JSON-LD, __NEXT_DATA__ and other application/json scripts
# (not importmap or speculationrules: asset URLs and prefetch hints)
_JSON_TYPE = re.compile(r"\s*application/(?:[\w.-]+\+)?json\s*(?:;|$)", re.I)
#: JSON leaves kept as parts of their own per page; the rest of a larger JSON document
#: is one part (24 bytes per part in every stored signature)
MAX_JSON_LEAVES = 4096
_JSON_SALT = np.uint64(0x510E527FADE682D1)
#: JSON keys that are no page data (the walk's rule for meta names, _walk.BOOKKEEPING)
_BOOKKEEPING = re.compile("|".join(BOOKKEEPING))
_FOLD = re.compile(r"[^a-z0-9]+")
_BOOKKEEPING_SEEN: dict[str, bool] = {}  # names repeat across a JSON document and a site


def _bookkeeping(name: str) -> bool:
    """Whether a JSON key names bookkeeping (``_BOOKKEEPING``, folded as the walk folds
    meta names: lowercase letters and digits), cached."""
    known = _BOOKKEEPING_SEEN.get(name)
    if known is None:
        if len(_BOOKKEEPING_SEEN) > 65536:  # a site with ever new keys: stay bounded
            _BOOKKEEPING_SEEN.clear()
        folded = _FOLD.sub("", name.lower())
        known = _BOOKKEEPING_SEEN[name] = _BOOKKEEPING.search(folded) is not None
    return known


_DEEP_SALT = np.uint64(0x1F83D9ABFB41BD6B)
#: the key of the text past libxml2's depth limit (2048 nested elements with huge_tree)
_DEEP_KEY = np.uint64(xxhash.xxh3_64_intdigest(b"scrapy-recrawl: past the depth limit"))
_DEPTH_ERROR = "Excessive depth"
_UNSEEN = re.compile(rb"<(script|style)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>", re.S | re.I)


def _is_int(low: int, high: int | None = None) -> Any:
    return lambda v: v >= low and (high is None or v <= high)


class ChangeDetector:
    """Compute :class:`Signature` objects and decide whether a page really changed.

    Parameters mirror the settings: ``shingle_size`` (``RECRAWL_SHINGLE_SIZE``),
    ``simhash_distance`` (``RECRAWL_SIMHASH_DISTANCE``), ``min_element_changes``
    (``RECRAWL_MIN_ELEMENT_CHANGES``), ``ignore_xpaths`` (``RECRAWL_IGNORE_XPATHS``:
    XPaths whose elements are removed before hashing, tail text kept; XPaths
    that select attributes, e.g. ``//@data-ts``, remove those attributes, and
    ones that select text nodes blank them) and ``max_parse_bytes``
    (``RECRAWL_MAX_PARSE_BYTES``: larger bodies are compared by hash only).
    Bad values raise :class:`~scrapy_recrawl.settings.RecrawlSettingError`.

    An instance keeps one lxml parser per thread, so it can be shared.
    """

    def __init__(
        self,
        shingle_size: int = 4,
        simhash_distance: int = 3,
        min_element_changes: int = 1,
        ignore_xpaths: Iterable[str] = (),
        max_parse_bytes: int = 5 * 1024 * 1024,
        change_test: str = "simhash",
        chi2_p: float = 0.05,
        bow_terms: int = 256,
    ) -> None:
        # paper 004's chi-squared rule (Eq. 1), off by default: see the module docstring
        if change_test not in ("simhash", "chi2"):
            raise RecrawlSettingError(
                f"RECRAWL_CHANGE_TEST={change_test!r}: expected 'simhash' (the default) or 'chi2'"
            )
        if not 0.0 < float(chi2_p) < 1.0:
            raise RecrawlSettingError(f"RECRAWL_CHI2_P={chi2_p!r}: expected a p-value in (0, 1)")
        if change_test == "chi2":
            try:  # the p-value is scipy.stats.chi2.sf; scipy is not a core dependency
                import scipy.stats  # noqa: F401
            except ImportError:
                raise RecrawlSettingError(
                    "RECRAWL_CHANGE_TEST='chi2' needs scipy: pip install scrapy-recrawl[ml] "
                    "(or pip install scipy)"
                ) from None
        self.change_test, self.chi2_p, self.bow_terms = change_test, float(chi2_p), int(bow_terms)
        #: compute a bag of words with each HTML signature (the middleware may turn it on)
        self.keep_bags: bool = change_test == "chi2"
        values = {
            "RECRAWL_SHINGLE_SIZE": shingle_size,
            "RECRAWL_SIMHASH_DISTANCE": simhash_distance,
            "RECRAWL_MIN_ELEMENT_CHANGES": min_element_changes,
            "RECRAWL_MAX_PARSE_BYTES": max_parse_bytes,
        }
        self.shingle_size: int = _read_int(values, "RECRAWL_SHINGLE_SIZE", 1, None, "an int >= 1")
        self.simhash_distance: int = _read_int(
            values, "RECRAWL_SIMHASH_DISTANCE", 0, 64, "an int from 0 to 64"
        )
        self.min_element_changes: int = _read_int(
            values, "RECRAWL_MIN_ELEMENT_CHANGES", 0, None, "an int >= 0"
        )
        self.max_parse_bytes: int = _read_int(
            values, "RECRAWL_MAX_PARSE_BYTES", 0, None, "an int >= 0 (bytes)"
        )
        self.ignore_xpaths: tuple[str, ...] = _xpath_list(ignore_xpaths)
        self._xpaths = [_compile_xpath(x) for x in self.ignore_xpaths]
        self._local = threading.local()
        #: pages nested deeper than libxml2 parses (2048 levels): their text past the
        #: limit is compared as one hash (the middleware counts it: ``recrawl/too_deep``)
        self.too_deep: int = 0
        #: the signing rules' hash, kept in every signature: a signature made under
        #: other rules (RECRAWL_IGNORE_XPATHS edited) is signed again before comparing
        self.rules: int = xxhash.xxh3_64_intdigest(
            repr((self.ignore_xpaths, self.shingle_size, self.max_parse_bytes)).encode()
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | Any) -> ChangeDetector:
        """Build from Scrapy ``Settings`` (or a plain dict) using the ``RECRAWL_*`` names."""
        xpaths = get(
            settings, "RECRAWL_IGNORE_XPATHS", (list, tuple, str), expect="a list of XPaths"
        )
        return cls(
            shingle_size=_read_int(settings, "RECRAWL_SHINGLE_SIZE", 1, None, "an int >= 1"),
            simhash_distance=_read_int(
                settings, "RECRAWL_SIMHASH_DISTANCE", 0, 64, "an int from 0 to 64"
            ),
            min_element_changes=_read_int(
                settings, "RECRAWL_MIN_ELEMENT_CHANGES", 0, None, "an int >= 0"
            ),
            ignore_xpaths=[xpaths] if isinstance(xpaths, str) else xpaths,
            max_parse_bytes=_read_int(
                settings, "RECRAWL_MAX_PARSE_BYTES", 0, None, "an int >= 0 (bytes)"
            ),
            change_test=get(settings, "RECRAWL_CHANGE_TEST", str),
            chi2_p=get(settings, "RECRAWL_CHI2_P", (int, float)),
            bow_terms=_read_int(settings, "RECRAWL_BOW_TERMS", 1, 65535, "an int from 1 to 65535"),
        )

    def __repr__(self) -> str:
        return (
            f"ChangeDetector(shingle_size={self.shingle_size}, "
            f"simhash_distance={self.simhash_distance}, "
            f"min_element_changes={self.min_element_changes}, "
            f"ignore_xpaths={list(self.ignore_xpaths)!r}, max_parse_bytes={self.max_parse_bytes})"
        )

    # -- signatures -------------------------------------------------------------------------

    @staticmethod
    def content_hash(body: bytes) -> bytes:
        """The hash that decides "byte-identical" (xxh3-128)."""
        return xxhash.xxh3_128_digest(bytes(body))

    def deferred(self, body: bytes) -> Signature:
        """A placeholder signature (content hash only) for a body the store keeps.

        A first visit then costs no parse: most pages come back byte-identical or
        as 304s, and when they do not, the full signature of the kept body is made
        at that later visit (see RecrawlMiddleware).
        """
        return Signature("deferred", self.content_hash(body), None)

    def signature(
        self,
        body: bytes,
        url: str,
        content_type: str | None,
        previous: Signature | None = None,
    ) -> Signature:
        """Signature of one response body. Never raises on bad input bodies.

        ``content_type`` is the raw ``Content-Type`` header value (its charset
        is used to decode); ``url`` only helps sniffing when it is missing.
        ``previous``: the URL's last signature; when the body is byte-identical
        to the one it was made from, it is returned as is (no parse), which is
        most recrawls of unchanged pages from servers without validators.
        """
        body = bytes(body)
        content_hash = xxhash.xxh3_128_digest(body)
        if (
            previous is not None
            and previous.content_hash == content_hash
            and self.same_rules(previous)
        ):
            return previous
        if isinstance(content_type, bytes):
            content_type = content_type.decode("latin-1")
        if len(body) > self.max_parse_bytes or not _is_html(body, url, content_type):
            return Signature("bytes", content_hash, None, rules=self.rules)
        try:
            return self._html_signature(body, content_type, content_hash)
        except Exception as exc:  # a crawl must go on whatever a server sends
            logger.warning("Cannot analyse %s (%s); comparing it by content hash only", url, exc)
            return Signature("bytes", content_hash, None, rules=self.rules)

    def same_rules(self, signature: Signature) -> bool:
        """Whether ``signature`` was made under this detector's signing rules (a deferred
        one is signed when it is resolved)."""
        return signature.kind == "deferred" or signature.rules in (None, self.rules)

    def _parser(self) -> etree.HTMLParser:
        parser = getattr(self._local, "parser", None)
        if parser is None:
            parser = self._local.parser = etree.HTMLParser(
                encoding="utf-8",
                remove_comments=True,
                remove_pis=True,
                # Blank text is kept: it has no words, so it changes no hash,
                # and leaving it in place is cheaper than removing it.
                collect_ids=False,
                no_network=True,
                default_doctype=False,
                # unclosed <b>/<font>/<div> nest one level per item: without it, libxml2
                # stops at 256 levels and the rest of the page is unseen
                huge_tree=True,
            )
        return parser

    def _html_signature(
        self, body: bytes, content_type: str | None, content_hash: bytes
    ) -> Signature:
        data = _as_utf8(body, content_type)
        parser = self._parser()
        try:
            root = None if data.isspace() else etree.fromstring(data, parser)
        except etree.XMLSyntaxError:  # e.g. "Document is empty" for markup-free junk
            root = None
        if root is None:
            return Signature("html", content_hash, 0, rules=self.rules)
        deep = _past_depth_limit(data, parser.error_log)
        for xpath in self._xpaths:
            _remove_matches(xpath(root))
        if deep is not None:
            self.too_deep += 1
        arrays = extract(  # skips the noise elements itself
            root,
            _json_parts if deep is None else lambda data: _with(_json_parts(data), _DEEP_KEY, deep),
        )
        # = simhash.fingerprint(shingle_hashes(words)), fused in C (tests check it)
        simhash = shingle_simhash(arrays.words, self.shingle_size)
        bag = bag_from_hashes(arrays.words, self.bow_terms) if self.keep_bags else None
        return Signature(
            "html",
            content_hash,
            simhash,
            arrays.keys,
            arrays.texts,
            arrays.attrs,
            bag=bag,
            rules=self.rules,
        )

    def elements_by_key(
        self, body: bytes, url: str, content_type: str | None = None
    ) -> dict[int, list[Any]]:
        """The elements of ``body`` under each element key its signature would hold (the
        same parse, the same ignored XPaths and noise), in document order: what names a
        learned key as an XPath (``recrawl-report``). Empty for a body that is not HTML."""
        body = bytes(body)
        if len(body) > self.max_parse_bytes or not _is_html(body, url, content_type):
            return {}
        data = _as_utf8(body, content_type)
        try:
            root = None if data.isspace() else etree.fromstring(data, self._parser())
        except etree.XMLSyntaxError:
            root = None
        if root is None:
            return {}
        for xpath in self._xpaths:
            _remove_matches(xpath(root))
        walked = walk(root)
        keys = fmix64(walked[0][: walked[5]])  # the elements, not the data parts after them
        elements = list(_walk_order(root))
        out: dict[int, list[Any]] = {}
        if len(elements) != len(keys):  # pragma: no cover - the walk and lxml disagree
            return out
        for key, el in zip(keys.tolist(), elements, strict=True):
            out.setdefault(key, []).append(el)
        return out

    # -- comparison -------------------------------------------------------------------------

    def compare(
        self,
        old: Signature | None,
        new: Signature,
        old_bag: Bag | None = None,
        ignore: Ignore | None = None,
    ) -> ChangeResult:
        """Decide whether ``new`` is a real change from ``old`` (rule: module docstring).

        ``old_bag``: the old version's bag of words, for the chi-squared rule
        (default ``old.bag``). ``ignore``: the page's learned boilerplate
        (:mod:`.boilerplate`): those elements are left out of the element diff, and
        where either side has a text-volatile one, the simhash criterion is not used
        (its words include the boilerplate's): the element diff decides.
        """
        if old is None or old.content_hash == new.content_hash:
            return _UNCHANGED
        if old.kind != "html" or new.kind != "html" or old.simhash is None or new.simhash is None:
            return ChangeResult(True, 0, 0, 0, 0, 0)
        dist = simhash_distance(old.simhash, new.simhash)
        before, after, had_volatile = (
            (old.keys, old.texts, old.attrs),
            (new.keys, new.texts, new.attrs),
            False,
        )
        if ignore:
            before, dropped_old = leave_out(before, ignore)
            after, dropped_new = leave_out(after, ignore)
            had_volatile = dropped_old or dropped_new
        added, removed, modified, attributes = diff(before, after)
        changes = added + removed + modified + attributes
        by_distance = dist >= self.simhash_distance and not had_volatile
        changed = by_distance or changes >= self.min_element_changes
        old_bag = old_bag if old_bag is not None else old.bag
        if self.change_test == "chi2" and old_bag is not None and new.bag is not None:
            changed = significant(old_bag, new.bag, self.chi2_p)  # paper 004, Eq. 1
        return ChangeResult(changed, dist, added, removed, modified, attributes)


# -- helpers ------------------------------------------------------------------------------------


def _json_parts(scripts: list[Any]) -> Parts | None:
    """``(keys, texts)`` of the leaves of the page's JSON scripts (JSON-LD,
    ``__NEXT_DATA__``, any ``application/json`` or ``+json`` type; ``scripts``: the
    walk's, whose ``<meta content>`` and ``data-*`` parts it makes itself): key = the
    script's id, else its type, and the leaf's path, list indices left out
    (``offers[].price``: repeated items are told apart by value and order, as
    siblings are); text = the value, hashed as attribute values are (tokens left
    out). Keys that name bookkeeping (nonce, token, trace... ``_walk.BOOKKEEPING``)
    are not read. A script that is not JSON is one part (its text). None: no part."""
    paths: list[str] = []
    values: list[bytes] = []
    for script in scripts:
        kind = script.get("type")
        text = script.text
        if not kind or not text or not _JSON_TYPE.match(kind) or text.isspace():
            continue
        name = script.get("id") or kind.strip().lower()
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = text
        mark = len(paths)
        try:
            _leaves(doc, name, paths, values)
        except RecursionError:  # as deep as json.loads could go: the text as one part
            del paths[mark:], values[mark:]
            _leaves(text, name, paths, values)
    if not paths:
        return None
    if len(paths) > MAX_JSON_LEAVES:  # the rest as one part: signatures stay small
        rest = b"\x00".join(values[MAX_JSON_LEAVES - 1 :])
        del paths[MAX_JSON_LEAVES - 1 :], values[MAX_JSON_LEAVES - 1 :]
        paths.append("\x00rest")
        values.append(rest)
    cache: dict[str, int] = {}
    keys = np.fromiter(
        (
            cache[p]
            if p in cache
            else cache.setdefault(p, xxhash.xxh3_64_intdigest(p.encode("utf-8", "replace")))
            for p in paths
        ),
        dtype=_U64,
        count=len(paths),
    )
    return keys ^ _JSON_SALT, value_hashes(values, int(_JSON_SALT))


def _leaves(doc: Any, path: str, paths: list[str], values: list[bytes]) -> None:
    """Append the ``(path, value)`` of every leaf of ``doc`` but the bookkeeping ones, in
    document order (recursive: ``json.loads`` bounds the depth a little below this)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not _bookkeeping(k):
                _leaves(v, f"{path}.{k}", paths, values)
    elif isinstance(doc, list):
        inner = path + "[]"
        for v in doc:
            _leaves(v, inner, paths, values)
    else:
        paths.append(path)
        if isinstance(doc, str):
            values.append(doc.encode("utf-8", "replace"))
        elif doc is None or doc is True or doc is False:
            values.append(b"null" if doc is None else b"true" if doc else b"false")
        else:
            values.append(repr(doc).encode())


def _past_depth_limit(data: bytes, errors: Any) -> bytes | None:
    """Where libxml2 stopped at its depth limit, the hash input of the text it did not
    see (tags, scripts, styles and comments left out, whitespace-normalised): compared
    as one part, so a change there is still a change. None: the whole page was read."""
    where = next((e for e in errors if _DEPTH_ERROR in e.message), None)
    if where is None:
        return None
    start = 0
    for _ in range(max(where.line, 1) - 1):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return b""
    end = data.find(b"\n", start)
    line = data[start : len(data) if end < 0 else end]
    # the column counts characters: back to bytes within the line
    head = line.decode("utf-8", "replace")[: max(where.column - 1, 0)]
    rest = data[start + len(head.encode("utf-8", "replace")) :]
    return b" ".join(_UNSEEN.sub(b" ", rest).split())


def _with(parts: Parts | None, key: np.uint64, value: bytes) -> Parts:
    """``parts`` and one more part (``value`` hashed as an attribute value is)."""
    keys = np.array([key], dtype=_U64)
    texts = value_hashes([value], int(_DEEP_SALT))
    if parts is None:
        return keys, texts
    return np.concatenate([parts[0], keys]), np.concatenate([parts[1], texts])


def _walk_order(root: Any) -> Iterable[Any]:
    """The elements ``walk`` hashes, in its order: document order, noise subtrees left out."""
    stack = [root]
    while stack:
        el = stack.pop()
        yield el
        stack.extend(
            reversed([c for c in el if isinstance(c.tag, str) and c.tag.lower() not in _NOISE])
        )


def _read_int(settings: Any, name: str, low: int, high: int | None, expect: str) -> int:
    return get(settings, name, int, _is_int(low, high), expect)


def _xpath_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    try:
        items = tuple(value)
    except TypeError:
        raise RecrawlSettingError(
            f"RECRAWL_IGNORE_XPATHS={value!r}: expected a list of XPath strings"
        ) from None
    for x in items:
        if not isinstance(x, str) or not x.strip():
            raise RecrawlSettingError(
                f"RECRAWL_IGNORE_XPATHS: {x!r} is not an XPath (expected non-empty strings)"
            )
    return items


_PROBE = etree.fromstring("<html><body><p>x</p></body></html>", etree.HTMLParser())


def _compile_xpath(expr: str) -> etree.XPath:
    try:
        xpath = etree.XPath(expr, smart_strings=True)
        xpath(_PROBE)  # unknown functions and variables only fail when evaluated
    except etree.XPathError as exc:
        raise RecrawlSettingError(f"RECRAWL_IGNORE_XPATHS: bad XPath {expr!r}: {exc}") from None
    return xpath


def _remove_matches(result: Any) -> None:
    """Remove what an ignore-XPath selected: elements (keeping their tail), attributes, text."""
    if not isinstance(result, list):
        return
    for item in result:
        if isinstance(item, etree._Element):
            parent = item.getparent()
            if parent is None:
                continue
            tail = item.tail
            if tail:
                prev = item.getprevious()
                if prev is not None:
                    prev.tail = (prev.tail or "") + tail
                else:
                    parent.text = (parent.text or "") + tail
            parent.remove(item)
        elif isinstance(item, str) and hasattr(item, "getparent"):
            owner = item.getparent()
            if owner is None:
                continue
            if getattr(item, "is_attribute", False):
                owner.attrib.pop(item.attrname, None)  # type: ignore[attr-defined]  # lxml smart str
            elif getattr(item, "is_tail", False):
                owner.tail = None
            elif getattr(item, "is_text", False):
                owner.text = None


def _media_type(content_type: str | None) -> str:
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _looks_binary(body: bytes) -> bool:
    head = body[:1024]
    if head.startswith(_BINARY_MAGIC):
        return True
    if b"\x00" in head:
        # UTF-16/32 text has NULs too; a BOM says which it is.
        return read_bom(head)[0] is None
    return False


def _is_html(body: bytes, url: str, content_type: str | None) -> bool:
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


def _as_utf8(body: bytes, content_type: str | None) -> bytes:
    """The body as UTF-8 bytes, decoded like a browser (and w3lib) would.

    Encoding: byte-order mark, else the header's charset, else a ``<meta>``
    declaration, else UTF-8. Undecodable bytes become U+FFFD. UTF-8 is passed
    through without copying (and, with libxml2 >= 2.14, which replaces bad
    bytes itself, without a validation pass).
    """
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
