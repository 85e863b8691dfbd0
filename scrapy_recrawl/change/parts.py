"""The parts of a page the compiled walk does not make itself.

The walk (``_walk.pyx``) makes the elements' parts, the ``<meta content>`` ones and
the ``data-*`` ones, and hands over the page's JSON ``<script>`` elements unread.
Here: :func:`json_parts`, the leaves of those scripts (JSON-LD, ``__NEXT_DATA__``,
any ``application/json`` or ``+json`` type), each a part of its own; and
:func:`past_depth_limit` with :func:`with_part`, the text past libxml2's depth
limit as one more part, so a change there is still a change. Both are parts as
:func:`~scrapy_recrawl.change.elements.extract` takes them: ``(keys, texts)``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import xxhash

from ._hashes import leaf_parts, value_hashes
from ._walk import BOOKKEEPING
from .elements import Parts

__all__ = ["DEEP_KEY", "MAX_JSON_LEAVES", "json_parts", "past_depth_limit", "with_part"]

_U64 = np.uint64

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
DEEP_KEY = np.uint64(xxhash.xxh3_64_intdigest(b"scrapy-recrawl: past the depth limit"))
_DEPTH_ERROR = "Excessive depth"
_UNSEEN = re.compile(rb"<(script|style)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>", re.S | re.I)


def _documents(scripts: list[Any]) -> list[tuple[str, Any, str]]:
    """``(name, document, text)`` of the page's JSON scripts, in page order: the
    document is ``json.loads`` of the text, or the text where it is no JSON."""
    documents = []
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
        documents.append((name, doc, text))
    return documents


def json_leaves(scripts: list[Any]) -> tuple[list[str], list[bytes]]:
    """The ``(path, value)`` of every leaf of the page's JSON scripts, in page order, as
    :func:`json_parts` hashes them (and the report's diff names them)."""
    paths: list[str] = []
    values: list[bytes] = []
    for name, doc, text in _documents(scripts):
        mark = len(paths)
        try:
            _leaves(doc, name, paths, values)
        except RecursionError:  # as deep as json.loads could go: the text as one part
            del paths[mark:], values[mark:]
            _leaves(text, name, paths, values)
    return paths, values


def json_parts(scripts: list[Any]) -> Parts | None:
    """``(keys, texts)`` of the leaves of the page's JSON scripts (JSON-LD,
    ``__NEXT_DATA__``, any ``application/json`` or ``+json`` type; ``scripts``: the
    walk's, whose ``<meta content>`` and ``data-*`` parts it makes itself): key = the
    script's id, else its type, and the leaf's path, list indices left out
    (``offers[].price``: repeated items are told apart by value and order, as
    siblings are); text = the value, hashed as attribute values are (tokens left
    out). Keys that name bookkeeping (nonce, token, trace... ``_walk.BOOKKEEPING``)
    are not read. A script that is not JSON is one part (its text). None: no part."""
    documents = _documents(scripts)
    if not documents:
        return None
    # json_leaves, then the leaves past MAX_JSON_LEAVES joined and each (path, value)
    # hashed, in one compiled pass (tests check both ways agree)
    return leaf_parts(  # type: ignore[no-any-return]
        documents,
        MAX_JSON_LEAVES,
        int(_JSON_SALT),
        _BOOKKEEPING_SEEN,
        _bookkeeping,
        xxhash.xxh3_64_intdigest,
    )


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


def past_depth_limit(data: bytes, errors: Any) -> bytes | None:
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


def with_part(parts: Parts | None, key: np.uint64, value: bytes) -> Parts:
    """``parts`` and one more part (``value`` hashed as an attribute value is)."""
    keys = np.array([key], dtype=_U64)
    texts = value_hashes([value], int(_DEEP_SALT))
    if parts is None:
        return keys, texts
    return np.concatenate([parts[0], keys]), np.concatenate([parts[1], texts])
