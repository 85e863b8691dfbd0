"""Is this response a real change? Signatures of responses, and their comparison.

A :class:`Signature` is what the history store keeps per visit (a few KB,
versioned binary, see :meth:`Signature.to_bytes`); :meth:`ChangeDetector.compare`
turns two of them into a :class:`ChangeResult`. Beside this module: what a body
is and its UTF-8 (:mod:`.body`), the ignored XPaths (:mod:`.xpaths`), the parts the
compiled walk does not make (:mod:`.parts`: JSON leaves, the text past the depth limit).

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

What is compared: the whole page (or, with ``RECRAWL_WATCH_XPATHS`` /
``RECRAWL_WATCH_CSS``, only the watched elements, when the page has one of them:
:func:`~scrapy_recrawl.change.xpaths.keep_only`), however deeply it nests (parsed with
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

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import xxhash
from lxml import etree

from ..settings import RecrawlSettingError, get
from ._diff import compare as _compare_html
from ._diff import diff as _diff
from ._walk import NOISE_TAGS, sign, walk
from .body import as_utf8, is_html
from .bow import Bag, bag_from_hashes, significant
from .parts import DEEP_KEY, json_parts, past_depth_limit, with_part
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
from .xpaths import compile_xpath, css_list, keep_only, remove_matches, xpath_list

__all__ = ["ChangeDetector", "ChangeResult", "Ignore", "Signature", "SignatureVersionError"]


logger = logging.getLogger(__name__)

_NOISE = frozenset(t.lower() for t in NOISE_TAGS)

#: the Request.meta keys of a request's own watch list (instead of the settings')
META_WATCH_XPATHS = "recrawl_watch_xpaths"
META_WATCH_CSS = "recrawl_watch_css"
#: distinct per-request watch lists whose detectors are kept (more are built each time)
_WATCHING_KEPT = 64


class ChangeDetector:
    """Compute :class:`Signature` objects and decide whether a page really changed.

    Parameters mirror the settings: ``shingle_size`` (``RECRAWL_SHINGLE_SIZE``),
    ``simhash_distance`` (``RECRAWL_SIMHASH_DISTANCE``), ``min_element_changes``
    (``RECRAWL_MIN_ELEMENT_CHANGES``), ``ignore_xpaths`` (``RECRAWL_IGNORE_XPATHS``:
    XPaths whose elements are removed before hashing, tail text kept; XPaths
    that select attributes, e.g. ``//@data-ts``, remove those attributes, and
    ones that select text nodes blank them) and ``max_parse_bytes``
    (``RECRAWL_MAX_PARSE_BYTES``: larger bodies are compared by hash only);
    ``watch_xpaths`` (``RECRAWL_WATCH_XPATHS``, and ``RECRAWL_WATCH_CSS`` as XPaths):
    compare only the elements they select, when a page has one (else the whole page).
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
        watch_xpaths: Iterable[str] = (),
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
        self.shingle_size: int = get(values, "RECRAWL_SHINGLE_SIZE")
        self.simhash_distance: int = get(values, "RECRAWL_SIMHASH_DISTANCE")
        self.min_element_changes: int = get(values, "RECRAWL_MIN_ELEMENT_CHANGES")
        self.max_parse_bytes: int = get(values, "RECRAWL_MAX_PARSE_BYTES")
        self.ignore_xpaths: tuple[str, ...] = xpath_list(ignore_xpaths)
        self._xpaths = [compile_xpath(x) for x in self.ignore_xpaths]
        self.watch_xpaths: tuple[str, ...] = xpath_list(watch_xpaths, "RECRAWL_WATCH_XPATHS")
        self._watch = [compile_xpath(x, "RECRAWL_WATCH_XPATHS") for x in self.watch_xpaths]
        #: detectors of the requests that bring their own watch list (for_request)
        self._watching: dict[tuple[str, ...], ChangeDetector] = {}
        self._by_meta: dict[tuple[str, str], ChangeDetector] = {}
        self._local = threading.local()
        #: pages nested deeper than libxml2 parses (2048 levels): their text past the
        #: limit is compared as one hash (the middleware counts it: ``recrawl/too_deep``)
        self.too_deep: int = 0
        #: the signing rules' hash, kept in every signature: a signature made under
        #: other rules (RECRAWL_IGNORE_XPATHS edited) is signed again before comparing
        rules: tuple[Any, ...] = (self.ignore_xpaths, self.shingle_size, self.max_parse_bytes)
        if self.watch_xpaths:  # without a watch list: the rules hash of every earlier release
            rules += (self.watch_xpaths,)
        self.rules: int = xxhash.xxh3_64_intdigest(repr(rules).encode())

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | Any) -> ChangeDetector:
        """Build from Scrapy ``Settings`` (or a plain dict) using the ``RECRAWL_*`` names."""
        xpaths = get(settings, "RECRAWL_IGNORE_XPATHS")
        watch = [
            *xpath_list(get(settings, "RECRAWL_WATCH_XPATHS"), "RECRAWL_WATCH_XPATHS"),
            *css_list(get(settings, "RECRAWL_WATCH_CSS")),
        ]
        return cls(
            shingle_size=get(settings, "RECRAWL_SHINGLE_SIZE"),
            simhash_distance=get(settings, "RECRAWL_SIMHASH_DISTANCE"),
            min_element_changes=get(settings, "RECRAWL_MIN_ELEMENT_CHANGES"),
            ignore_xpaths=[xpaths] if isinstance(xpaths, str) else xpaths,
            max_parse_bytes=get(settings, "RECRAWL_MAX_PARSE_BYTES"),
            change_test=get(settings, "RECRAWL_CHANGE_TEST"),
            chi2_p=get(settings, "RECRAWL_CHI2_P"),
            bow_terms=get(settings, "RECRAWL_BOW_TERMS"),
            watch_xpaths=watch,
        )

    def watching(self, xpaths: Iterable[str]) -> ChangeDetector:
        """This detector with another watch list (XPaths; empty: the whole page), its own
        rules hash; kept for the next request with the same list. A bad XPath raises
        :class:`~scrapy_recrawl.settings.RecrawlSettingError`."""
        key = tuple(xpaths)
        if key == self.watch_xpaths:
            return self
        known = self._watching.get(key)
        if known is None:
            known = ChangeDetector(
                self.shingle_size,
                self.simhash_distance,
                self.min_element_changes,
                self.ignore_xpaths,
                self.max_parse_bytes,
                self.change_test,
                self.chi2_p,
                self.bow_terms,
                watch_xpaths=key,
            )
            known.keep_bags = self.keep_bags
            if len(self._watching) < _WATCHING_KEPT:
                self._watching[key] = known
        return known

    def for_request(self, meta: Mapping[str, Any]) -> ChangeDetector:
        """The detector of a request: with its own watch list when its meta has one
        (``recrawl_watch_xpaths``, ``recrawl_watch_css``: docs/what-changed.md), else this
        one. A bad list is said once (naming the meta key) and not used."""
        if META_WATCH_XPATHS not in meta and META_WATCH_CSS not in meta:
            return self
        xpaths, css = meta.get(META_WATCH_XPATHS) or (), meta.get(META_WATCH_CSS) or ()
        raw = (repr(xpaths), repr(css))  # lists are not hashable; their text is
        known = self._by_meta.get(raw)
        if known is not None:
            return known
        x_name, c_name = f"meta[{META_WATCH_XPATHS!r}]", f"meta[{META_WATCH_CSS!r}]"
        try:
            watch = (*xpath_list(xpaths, x_name), *css_list(css, c_name))
            for x in watch:
                compile_xpath(x, x_name)
            known = self.watching(watch)
        except RecrawlSettingError as exc:
            logger.warning("recrawl: %s; the requests with it are compared without it", exc)
            known = self
        if len(self._by_meta) < _WATCHING_KEPT:
            self._by_meta[raw] = known
        return known

    def __repr__(self) -> str:
        return (
            f"ChangeDetector(shingle_size={self.shingle_size}, "
            f"simhash_distance={self.simhash_distance}, "
            f"min_element_changes={self.min_element_changes}, "
            f"ignore_xpaths={list(self.ignore_xpaths)!r}, max_parse_bytes={self.max_parse_bytes}"
            + (f", watch_xpaths={list(self.watch_xpaths)!r})" if self.watch_xpaths else ")")
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
        return Signature.deferred_of(self.content_hash(body))

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
        if len(body) > self.max_parse_bytes or not is_html(body, url, content_type):
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
                # short texts in their own allocation (libxml2's "compact" keeps them in
                # the node): as fast to parse, faster to free, and the tree may be edited
                compact=False,
            )
        return parser

    def _html_signature(
        self, body: bytes, content_type: str | None, content_hash: bytes
    ) -> Signature:
        data = as_utf8(body, content_type)
        parser = self._parser()
        try:
            root = None if data.isspace() else etree.fromstring(data, parser)
        except etree.XMLSyntaxError:  # e.g. "Document is empty" for markup-free junk
            root = None
        if root is None:
            return Signature("html", content_hash, 0, rules=self.rules)
        for xpath in self._xpaths:
            remove_matches(xpath(root))
        # only the watched elements, when the page has one (where the text past the
        # depth ceiling lies is then not known: not a watched element's)
        watched = bool(self._watch) and keep_only(root, [x(root) for x in self._watch])
        # = elements.extract (it skips the noise elements itself), with the simhash
        # = simhash.fingerprint(shingle_hashes(words)) made in the same C pass (tests check it)
        keys, texts, attrs, simhash, words, shallow = sign(
            root, json_parts, self.shingle_size, self.keep_bags
        )
        # the parser's errors are read only where it may have stopped at its depth limit
        # (the walk saw a deep path, or a <template> it skips, or elements were removed)
        deep = (
            None
            if watched or (shallow and not self._xpaths)
            else past_depth_limit(data, parser.error_log)
        )
        if deep is not None:
            self.too_deep += 1
            keys, texts, attrs, simhash, words, _ = sign(
                root,
                lambda scripts, deep=deep: with_part(json_parts(scripts), DEEP_KEY, deep),
                self.shingle_size,
                self.keep_bags,
                True,
            )
        bag = bag_from_hashes(words, self.bow_terms) if self.keep_bags else None
        return Signature.of_page(content_hash, simhash, keys, texts, attrs, bag, self.rules)

    def tree(self, body: bytes, url: str, content_type: str | None = None) -> Any:
        """``body`` parsed as a signature parses it, the ignored XPaths removed and only
        the watched elements kept (the rules): the lxml root, None for a body that is not
        HTML. What the report shows a change from (insight/last_change.py)."""
        body = bytes(body)
        if len(body) > self.max_parse_bytes or not is_html(body, url, content_type):
            return None
        data = as_utf8(body, content_type)
        try:
            root = None if data.isspace() else etree.fromstring(data, self._parser())
        except etree.XMLSyntaxError:
            root = None
        if root is None:
            return None
        for xpath in self._xpaths:
            remove_matches(xpath(root))
        if self._watch:
            keep_only(root, [x(root) for x in self._watch])
        return root

    def elements_by_key(
        self, body: bytes, url: str, content_type: str | None = None
    ) -> dict[int, list[Any]]:
        """The elements of ``body`` under each element key its signature would hold (the
        same parse, the same ignored XPaths and noise), in document order: what names a
        learned key as an XPath (``recrawl-report``). Empty for a body that is not HTML."""
        root = self.tree(body, url, content_type)
        if root is None:
            return {}
        walked = walk(root)
        keys = fmix64(walked[0][: walked[5]])  # the elements, not the data parts after them
        elements = list(walk_order(root))
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
        if not ignore and self.change_test != "chi2":
            # the common case in one compiled call (the diff below, the simhash distance
            # and the result): a compare is made on every changed response
            result: ChangeResult = _compare_html(
                old, new, self.simhash_distance, self.min_element_changes
            )
            return result
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
        # elements.diff's compiled core: a signature's arrays are contiguous uint64 already
        added, removed, modified, attributes = _diff(*before, *after)
        changes = added + removed + modified + attributes
        by_distance = dist >= self.simhash_distance and not had_volatile
        changed = by_distance or changes >= self.min_element_changes
        old_bag = old_bag if old_bag is not None else old.bag
        if self.change_test == "chi2" and old_bag is not None and new.bag is not None:
            changed = significant(old_bag, new.bag, self.chi2_p)  # paper 004, Eq. 1
        return ChangeResult(changed, dist, added, removed, modified, attributes)


# -- helpers ------------------------------------------------------------------------------------


def walk_order(root: Any) -> Iterable[Any]:
    """The elements ``walk`` hashes, in its order: document order, noise subtrees left out."""
    stack = [root]
    while stack:
        el = stack.pop()
        yield el
        stack.extend(
            reversed([c for c in el if isinstance(c.tag, str) and c.tag.lower() not in _NOISE])
        )
