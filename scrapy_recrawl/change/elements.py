"""Element-level signature of a parsed page, and the diff of two signatures.

Every element of the (cleaned) tree is reduced to three 64-bit hashes:

``key``
    its tag path from the root, e.g. ``/html/body/div/p`` (tags only, no
    sibling indices: an index would shift, and so "change", every later
    sibling when one paragraph is inserted; repeated siblings are told apart
    by content and document order instead, see the diff below);
``text``
    its tag and its *own* text: ``el.text`` and the tails of its children,
    i.e. the text directly inside it, not its descendants'. Each text piece is
    whitespace-normalised (runs of ASCII whitespace or U+00A0 are one word
    separator; leading and trailing whitespace is ignored);
``attrs``
    its attributes, order-independent, minus the noise below (0 when none).

Blank elements (no own text and no attributes left: ``<br>``, bare wrappers,
an implied ``<head>``) are structure only and are not represented; what they
contain is represented by their descendants.

The diff (:func:`diff`) counts, in the spirit of Meegahapola et al. (2018):

1. elements with the same tag, own text and attributes on both sides are
   unchanged, wherever they are (a multiset intersection: repeated identical
   siblings are matched one for one, and content that was merely re-wrapped
   or moved is not a change);
2. the remaining elements are paired by key in document order (the *n*-th
   leftover ``/html/body/div/p`` of the old page with the *n*-th of the new);
   a pair whose text differs is **modified**, a pair whose attributes differ is
   an **attribute change** (one pair can be both);
3. unpaired old elements are **removed**, unpaired new ones **added**.

Noise, ignored so that a re-deploy or a new session is not a "change":

* ``<script>``, ``<style>``, ``<template>`` (with their content), comments and
  processing instructions, ``<link>``, ``<meta>`` and ``<base>`` (asset URLs
  with build hashes, preload hints, CSRF ``<meta>`` tokens: nothing a reader
  sees) are removed before anything is hashed;
* attributes ``nonce`` and ``integrity``, custom data attributes ``data-*``
  (page-script state, e.g. Cloudflare's ``data-cfemail`` or Vue's
  ``data-v-<hash>``) and inline event handlers ``on*`` (script);
* inside the other attribute values, token-like runs are replaced by one
  placeholder: a maximal run of 16 or more ``[A-Za-z0-9_-]`` with a digit and
  a letter that is either purely alphanumeric (hex digests, ids) or mixes
  upper and lower case (base64url session ids, CSRF tokens, signed link-shim
  parameters). So ``app.3f9a...c1.css`` and ``app.77b0...e2.css`` hash alike,
  while ``/legal`` vs ``/legal/``, slugs, UUIDs and a changed ``mailto:``
  still differ.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
from lxml import etree

from .shingles import fmix64, hash_spans, prefix_hashes, run_edges, sequence_hashes, word_hashes

__all__ = ["NOISE_TAGS", "ElementArrays", "diff", "extract", "keep_attribute"]

_U64 = np.uint64
_EMPTY = np.zeros(0, dtype=_U64)
_MASK64 = (1 << 64) - 1
_PATH_MUL = 0xD6E8FEB86659FD93  # odd: path hash = parent * _PATH_MUL + tag code
_RANK_MUL = _U64(0x9FB21C651E98DF25)
_TEXT_SALT = _U64(0x2545F4914F6CDD1D)
_OCC_SALT = _U64(0x81DADEF4BC2DD44D)

#: Elements removed with their content before signatures are computed
#: (comments and processing instructions are dropped by the parser).
NOISE_TAGS: tuple[str, ...] = ("script", "style", "template", "link", "meta", "base")

_NOISE_ATTRS = frozenset({"nonce", "integrity"})
_TOKEN_MIN = 16
_PLACEHOLDER = 1  # byte that stands for a scrubbed token (never in lxml text)
# Byte classes for token detection: 1 digit, 2 lowercase, 4 uppercase, 8 "-" or "_".
_DIGIT, _LOWER, _UPPER, _JOINER = 1, 2, 4, 8
_CODES = np.zeros(256, dtype=np.uint8)
_CODES[list(b"0123456789")] = _DIGIT
_CODES[list(b"abcdefghijklmnopqrstuvwxyz")] = _LOWER
_CODES[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")] = _UPPER
_CODES[list(b"-_")] = _JOINER


def keep_attribute(name: str) -> bool:
    """False for attributes that are noise by name (see the module docstring)."""
    name = name.lower()
    return not (name in _NOISE_ATTRS or name.startswith("data-") or name.startswith("on"))


class _Memo(dict):
    """A small memo of a pure function of strings (tag codes, attribute names)."""

    def __init__(self, fn: Callable[[str], Any], limit: int = 4096) -> None:
        super().__init__()
        self.fn = fn
        self.limit = limit

    def __missing__(self, key: str) -> Any:
        if len(self) >= self.limit:  # junk markup can invent any number of names
            self.clear()
        value = self[key] = self.fn(key)
        return value


def _tag_code(tag: str) -> int:
    buf = np.frombuffer(b"\x00" + tag.encode("utf-8", "replace") + b"\x00", dtype=np.uint8)
    return int(hash_spans(prefix_hashes(buf), np.array([1]), np.array([len(buf) - 1]))[0])


_TAG_CODES = _Memo(_tag_code)
_KEEP_ATTR = _Memo(keep_attribute)


class ElementArrays(NamedTuple):
    """Per-element hashes (sorted by key, document order within a key) + visible words."""

    keys: np.ndarray
    texts: np.ndarray
    attrs: np.ndarray
    #: hashes of the visible words, element by element in document order
    #: (each element's own text), ready for shingling
    words: np.ndarray


def _run_ranks(sorted_values: np.ndarray) -> np.ndarray:
    """Position of each entry within its run of equal values (0, 1, 2, ... per run)."""
    n = len(sorted_values)
    idx = np.arange(n)
    if n == 0:
        return idx
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=new_run[1:])
    return idx - np.maximum.accumulate(np.where(new_run, idx, 0))


def _scrub_tokens(buf: np.ndarray) -> np.ndarray:
    """Replace each token-like run of a NUL-delimited buffer by one placeholder byte.

    A candidate run is a maximal run of ``[A-Za-z0-9_-]`` of 16 or more bytes;
    it is a token when it has a digit and a letter and is either purely
    alphanumeric (hex digests, ids) or mixes upper and lower case (base64url).
    Slugs (``privacy-policy-2024``) and UUIDs (lowercase, hyphenated) are not.
    """
    code = _CODES.take(buf)
    starts, ends = run_edges(code != 0)
    long = (ends - starts) >= _TOKEN_MIN
    if not long.any():
        return buf
    starts, ends = starts[long], ends[long]
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = ends
    classes = np.bitwise_or.reduceat(code, bounds[:-1] if ends[-1] == len(buf) else bounds)[0::2]
    letters = classes & (_LOWER | _UPPER)
    token = (
        ((classes & _DIGIT) != 0)
        & (letters != 0)
        & (((classes & _JOINER) == 0) | (letters == (_LOWER | _UPPER)))
    )
    if not token.any():
        return buf
    starts, ends = starts[token], ends[token]
    delta = np.zeros(len(buf) + 1, dtype=np.int8)
    delta[starts + 1] = 1
    delta[ends] = -1
    keep = np.cumsum(delta[:-1], dtype=np.int8) == 0
    out = buf.copy()
    out[starts] = _PLACEHOLDER
    return out[keep]


def _attribute_hashes(items: list[list[tuple[str, str]]], n: int) -> np.ndarray:
    """Order-independent hash of each element's non-noise attributes (0: none)."""
    counts = np.fromiter(map(len, items), dtype=np.int64, count=n)
    flat = list(chain.from_iterable(items))
    if not flat:
        return np.zeros(n, dtype=_U64)
    keep = np.fromiter(
        map(_KEEP_ATTR.__getitem__, map(itemgetter(0), flat)), dtype=bool, count=len(flat)
    )
    joined = "\x00" + "\x00".join(map("\x01".join, flat)) + "\x00"
    buf = _scrub_tokens(np.frombuffer(joined.encode("utf-8", "replace"), dtype=np.uint8))
    seps = np.flatnonzero(buf == 0)
    h = hash_spans(prefix_hashes(buf), seps[:-1] + 1, seps[1:])
    h *= keep  # noise attributes contribute 0
    prefix = np.zeros(len(h) + 1, dtype=_U64)
    np.cumsum(h, out=prefix[1:])  # wraps mod 2**64: an order-independent sum per element
    last = np.cumsum(counts)
    return prefix[last] - prefix[last - counts]


def _path_keys(parents: list[int], tags: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(tag-path hashes, tag codes)``; parents come before children (document order)."""
    codes = list(map(_TAG_CODES.__getitem__, tags))
    keys = [0] * len(codes)
    mul, mask = _PATH_MUL, _MASK64
    for i, (p, code) in enumerate(zip(parents, codes, strict=True)):
        keys[i] = ((keys[p] * mul if p >= 0 else 0) + code) & mask
    return np.array(keys, dtype=_U64), np.array(codes, dtype=_U64)


def extract(root: etree._Element) -> ElementArrays:
    """Hash every element of a cleaned tree (one pass over ``root.iter()``, then numpy)."""
    els = list(root.iter(etree.Element))
    n = len(els)
    if n == 0:
        return ElementArrays(_EMPTY, _EMPTY, _EMPTY, _EMPTY)
    index = dict(zip(els, range(n), strict=True))
    get = index.get
    parents = [get(e.getparent(), -1) for e in els]
    tags = [e.tag for e in els]
    pieces = [e.text or "" for e in els]
    pieces += [e.tail or "" for e in els]
    items = [e.items() for e in els]
    del index, els

    keys, codes = _path_keys(parents, tags)
    attrs = _attribute_hashes(items, n)

    # Text pieces: 0..n-1 are el.text (owner: the element), n..2n-1 are el.tail
    # (owner: the parent; the root's tail has none). One hashing pass over all.
    joined = "\x00" + "\x00".join(pieces).replace("\xa0", " ") + "\x00"
    buf = np.frombuffer(joined.encode("utf-8", "replace"), dtype=np.uint8)
    wh, wstart = word_hashes(buf)
    piece_of_word = np.searchsorted(np.flatnonzero(buf == 0), wstart) - 1
    per_piece = np.bincount(piece_of_word, minlength=2 * n)
    last = np.cumsum(per_piece)
    first = last - per_piece
    piece_h = sequence_hashes(wh, first, last)

    owner = np.concatenate((np.arange(n), np.asarray(parents, dtype=np.int64)))
    live = np.flatnonzero((per_piece > 0) & (owner >= 0))
    # Stable sort by owner: an element's own text first, then its children's
    # tails in document order, i.e. the reading order of its own text.
    order = live[np.argsort(owner[live], kind="stable")]
    own_owner = owner[order]
    ranks = _run_ranks(own_owner).astype(_U64)
    vals = fmix64(piece_h[order] + ranks * _RANK_MUL)
    texts = np.zeros(n, dtype=_U64)
    if len(order):
        run_start = np.flatnonzero(np.concatenate(([True], own_owner[1:] != own_owner[:-1])))
        texts[own_owner[run_start]] = np.add.reduceat(vals, run_start)

    # Visible words in the same order (element by element), for the shingles.
    lens = per_piece[order]
    total = int(lens.sum())
    offsets = np.repeat(first[order] - (np.cumsum(lens) - lens), lens) + np.arange(total)
    words = wh[offsets]

    # Blank elements (no own text, no attributes left) are structure only: what
    # they contain is counted in their descendants. They are not represented.
    shown = np.flatnonzero((texts != 0) | (attrs != 0))
    keys, texts, attrs = keys[shown], fmix64(texts[shown] ^ codes[shown]), attrs[shown]
    by_key = np.argsort(keys, kind="stable")
    return ElementArrays(keys[by_key], texts[by_key], attrs[by_key], words)


def _unmatched(ids: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Indices of ``ids`` left over by a multiset intersection with ``other``.

    Repeats are numbered (``id + rank * salt``) so that two copies of an
    element on one side match at most two copies on the other.
    """
    order = np.argsort(ids)
    s = ids[order]
    tagged = s + _run_ranks(s).astype(_U64) * _OCC_SALT
    o = np.sort(other)
    tagged_other = o + _run_ranks(o).astype(_U64) * _OCC_SALT
    tagged_other.sort()
    pos = np.searchsorted(tagged_other, tagged)
    pos[pos == len(tagged_other)] = 0
    return np.sort(order[tagged_other[pos] != tagged]) if len(o) else np.sort(order)


def diff(
    old: tuple[np.ndarray, np.ndarray, np.ndarray],
    new: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[int, int, int, int]:
    """``(added, removed, modified, attributes)`` between two ``(keys, texts, attrs)`` triples.

    See the module docstring for the matching rules. Arrays must be in the
    order :func:`extract` returns (sorted by key, document order within a key).
    """
    ok, ot, oa = old
    nk, nt, na = new
    if len(ok) == len(nk) and (
        np.array_equal(ok, nk) and np.array_equal(ot, nt) and np.array_equal(oa, na)
    ):
        return 0, 0, 0, 0
    # Identity of an element: its own text (which includes its tag) and attributes.
    id_old = ot * _TEXT_SALT + oa
    id_new = nt * _TEXT_SALT + na
    lo = _unmatched(id_old, id_new)
    ln = _unmatched(id_new, id_old)
    if len(lo) == 0 or len(ln) == 0:
        return len(ln), len(lo), 0, 0

    def pair_ids(keys: np.ndarray) -> np.ndarray:
        # keys arrive sorted (document order within a key): number each run.
        return keys + _run_ranks(keys).astype(_U64) * _RANK_MUL

    _, io, jn = np.intersect1d(
        pair_ids(ok[lo]), pair_ids(nk[ln]), assume_unique=True, return_indices=True
    )
    pairs = len(io)
    modified = int(np.count_nonzero(ot[lo[io]] != nt[ln[jn]]))
    attributes = int(np.count_nonzero(oa[lo[io]] != na[ln[jn]]))
    return len(ln) - pairs, len(lo) - pairs, modified, attributes
