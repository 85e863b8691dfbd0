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

How (for speed): libxml2 serialises the cleaned tree to XML in one C call and
numpy reads the markup back: ``<``/``>`` delimit tags (text and attribute
values escape them), ``"`` delimit attribute values, runs of bytes above 0x20
are words. All spans (tag names, attributes, words) are hashed in one
vectorised pass (:func:`~scrapy_recrawl.change.shingles.span_hashes`); the
tag path is a running sum, over opening and closing tags, of hashes of
(depth, tag), so no Python code runs per element. Text is hashed as
serialised (``&amp;``, ``&lt;``, ``&gt;`` stay entity references, consistently
on every page). The words handed to the shingles are in reading order.
Element or attribute names that the serialiser would write ambiguously
(libxml2's HTML5 tokenizer accepts ``<a"b>`` or ``<p x<y=1>``) are renamed
to a hash of the name first; markup that still cannot be read back makes
:meth:`~scrapy_recrawl.change.ChangeDetector.signature` fall back to the
content hash.

Blank elements (no own text and no attributes left: ``<br>``, bare wrappers,
an implied ``<head>``) are structure only and are not represented; what they
contain is represented by their descendants.

The diff (:func:`diff`) counts, in the spirit of Meegahapola et al. (2018):

1. elements with the same tag, own text and attributes on both sides are
   unchanged, wherever they are (a multiset intersection: repeated identical
   siblings are matched one for one, copies with the same key first, then
   the others in order; content that was merely re-wrapped or moved is not
   a change);
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
* inside the other attribute values, token-like runs are left out (an
  attribute with tokens is hashed as the sequence of the pieces between
  them): a maximal run of 16 or more ``[A-Za-z0-9_-]`` with a digit and
  a letter that is either purely alphanumeric (hex digests, ids) or mixes
  upper and lower case (base64url session ids, CSRF tokens, signed link-shim
  parameters). So ``app.3f9a...c1.css`` and ``app.77b0...e2.css`` hash alike,
  while ``/legal`` vs ``/legal/``, slugs, UUIDs and a changed ``mailto:``
  still differ.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import xxhash
from lxml import etree

from .shingles import fmix64, run_edges, sequence_hashes, span_hashes, u64_view

__all__ = ["NOISE_TAGS", "ElementArrays", "diff", "extract", "keep_attribute"]

_U64 = np.uint64
_EMPTY = np.zeros(0, dtype=_U64)
_LEVEL_MUL = _U64(0xD6E8FEB86659FD93)
_RANK_MUL = _U64(0x9FB21C651E98DF25)
_TEXT_SALT = _U64(0x2545F4914F6CDD1D)
_KEY_SALT = _U64(0x81DADEF4BC2DD44D)
_SCRUBBED = _U64(0x6A09E667F3BCC909)  # marks attributes whose tokens were left out

#: Elements removed with their content before signatures are computed
#: (comments and processing instructions are dropped by the parser).
NOISE_TAGS: tuple[str, ...] = ("script", "style", "template", "link", "meta", "base")

_NOISE_ATTRS = frozenset({"nonce", "integrity"})
_TOKEN_MIN = 16
# Byte classes for token detection: 1 digit, 2 lowercase, 4 uppercase, 8 "-" or "_".
_DIGIT, _LOWER, _UPPER, _JOINER = 1, 2, 4, 8
_CODES = np.zeros(256, dtype=np.uint8)
_CODES[list(b"0123456789")] = _DIGIT
_CODES[list(b"abcdefghijklmnopqrstuvwxyz")] = _LOWER
_CODES[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")] = _UPPER
_CODES[list(b"-_")] = _JOINER

# Bytes of the serialised markup.
_SPACE, _QUOTE, _SLASH, _LT, _EQ, _GT = 32, 34, 47, 60, 61, 62
# Attribute names (little-endian prefixes) that are noise; "| _CASE" folds ASCII case.
_CASE = _U64(0x2020202020202020)
_ON, _ON_MASK = _U64(int.from_bytes(b"on", "little")), _U64(0xFFFF)
_DATA, _MASK5 = _U64(int.from_bytes(b"data-", "little")), _U64(0xFF_FFFF_FFFF)
_NONCE, _MASK6 = _U64(int.from_bytes(b"nonce=", "little")), _U64(0xFFFF_FFFF_FFFF)
_INTEGRIT = _U64(int.from_bytes(b"integrit", "little"))
# Names the XML serialiser would write so that the markup cannot be re-read
# (the HTML5 tokenizer of libxml2 >= 2.14 accepts e.g. <a"b> or <p x<y=1>).
_BAD_NAME = re.compile(r"[\s<>\"'&=/]|^$")
_NAME_END = re.compile(rb"[ />]")


def keep_attribute(name: str) -> bool:
    """False for attributes that are noise by name (see the module docstring)."""
    name = name.lower()
    return not (name in _NOISE_ATTRS or name.startswith("data-") or name.startswith("on"))


class ElementArrays(NamedTuple):
    """Per-element hashes (sorted by key, document order within a key) + visible words."""

    keys: np.ndarray
    texts: np.ndarray
    attrs: np.ndarray
    #: hashes of the visible words in reading order, ready for shingling
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


def _run_starts(grouped: np.ndarray) -> np.ndarray:
    """Offsets where a new run of equal values begins in a grouped array."""
    new_run = np.empty(len(grouped), dtype=bool)
    new_run[:1] = True
    np.not_equal(grouped[1:], grouped[:-1], out=new_run[1:])
    return new_run.nonzero()[0]


def _tokens(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the tokens in the spans ``buf[starts:ends]``.

    Each span must be followed by a byte that cannot be part of a token.

    A token is a maximal run of ``[A-Za-z0-9_-]`` of 16 or more bytes that has
    a digit and a letter and is either purely alphanumeric (hex digests, ids)
    or mixes upper and lower case (base64url session ids, CSRF tokens). Slugs
    (``privacy-policy-2024``) and UUIDs (lowercase, hyphenated) are not.
    """
    lens = ends - starts + 1  # with the byte after each run: a separator
    before = lens.cumsum() - lens
    pos = np.arange(int(before[-1] + lens[-1])) + (starts - before).repeat(lens)
    code = _CODES.take(buf[pos])
    in_token = code != 0
    edges = np.empty(len(code) + 1, dtype=bool)
    edges[0] = in_token[0]
    np.not_equal(in_token[1:], in_token[:-1], out=edges[1:-1])
    edges[-1] = False
    edges = edges.nonzero()[0]
    s, e = edges[0::2], edges[1::2]
    long = (e - s >= _TOKEN_MIN).nonzero()[0]
    if len(long) == 0:
        return _NONE, _NONE
    s, e = s[long], e[long]
    bounds = np.empty(2 * len(s), dtype=np.int64)
    bounds[0::2] = s
    bounds[1::2] = e
    classes = np.bitwise_or.reduceat(code, bounds)[0::2]
    letters = classes & (_LOWER | _UPPER)
    token = (
        ((classes & _DIGIT) != 0)
        & (letters != 0)
        & (((classes & _JOINER) == 0) | (letters == (_LOWER | _UPPER)))
    )
    return pos[s[token]], pos[e[token] - 1] + 1


def _name_lengths(view: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Offset of the first " ", "/" or ">" in the 8 bytes at each ``at`` (-1: none)."""
    chars = view[at].view(np.uint8).reshape(len(at), 8)
    hit = chars == _SPACE
    hit |= chars == _SLASH
    hit |= chars == _GT
    first = hit.argmax(axis=1)
    first[~hit.any(axis=1)] = -1
    return first


def _occurrences(data: bytes, buf: np.ndarray, sep: bytes) -> np.ndarray:
    """Offsets of the (non-overlapping) occurrences of ``sep`` in ``data`` (``buf`` its bytes)."""
    count = data.count(sep)
    if count == 0:
        return _NONE
    if count < 256:  # few: let bytes.split find them
        lens = np.fromiter(map(len, data.split(sep)), dtype=np.int64, count=count + 1)
        return lens[:-1].cumsum() + len(sep) * np.arange(count)
    hit = buf[: len(buf) - len(sep) + 1] == sep[0]
    for i in range(1, len(sep)):
        hit &= buf[i : len(buf) - len(sep) + 1 + i] == sep[i]
    return hit.nonzero()[0]  # (the separators used here cannot overlap themselves)


def _count_before(marks: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """For sorted ``xs``, how many of the sorted ``marks`` are smaller than each (none equal)."""
    counts = np.bincount(xs.searchsorted(marks), minlength=len(xs) + 1)[: len(xs)]
    return counts.cumsum()


def extract(root: etree._Element) -> ElementArrays:
    """Hash every element of a cleaned tree.

    libxml2 serialises the tree to XML (one C call); the markup is then read
    back with numpy: tags, attributes and text are found by their delimiters
    and hashed in bulk. Element and attribute names the serialiser cannot
    write unambiguously (rare junk) are renamed first (see :func:`_sanitise`).
    """
    arrays = _extract_markup(etree.tostring(root, encoding="utf-8", with_tail=False))
    if arrays is None:
        _sanitise(root)
        arrays = _extract_markup(etree.tostring(root, encoding="utf-8", with_tail=False))
        if arrays is None:
            raise ValueError("cannot read back the serialised page")
    return arrays


def _safe_name(name: str) -> str:
    return "x-" + xxhash.xxh64_hexdigest(name.encode("utf-8", "replace"))


def _sanitise(root: etree._Element) -> None:
    """Rename elements and attributes whose names would make ambiguous markup."""
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        if _BAD_NAME.search(el.tag):
            el.tag = _safe_name(el.tag)
        for name in [n for n in el.attrib if _BAD_NAME.search(n)]:
            value = el.attrib.pop(name)
            try:
                el.set(_safe_name(name), value)
            except ValueError:  # not XML-compatible text: drop the attribute
                pass


def _extract_markup(data: bytes) -> ElementArrays | None:
    """:func:`extract` on the XML serialisation of a tree; None if it cannot be read back.

    Every ``<`` and ``>`` of the markup delimits a tag (text and attribute
    values escape them), every ``"`` inside a tag delimits an attribute value,
    and attributes are written `` name="value"``: anything else returns None.
    All the byte spans (tag names, attributes, token-free pieces of attributes,
    words) are hashed together, in one :func:`span_hashes` call.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    size = len(buf)
    special = buf == _LT  # "<", ">" and '"', found in one pass
    special |= buf == _GT
    special |= buf == _QUOTE
    special = special.nonzero()[0]
    is_quote = buf[special] == _QUOTE
    delims, quotes = special[~is_quote], special[is_quote]
    n_tags = len(delims) >> 1
    if n_tags == 0 or len(delims) & 1 or delims[0] != 0 or delims[-1] != size - 1:
        return None
    lt, gt = delims[0::2], delims[1::2]
    if not ((buf[lt] == _LT).all() and (buf[gt] == _GT).all()):
        return None  # "<" and ">" do not alternate
    closing = buf[lt + 1] == _SLASH
    empty = buf[gt - 1] == _SLASH  # <br/>
    step = np.ones(n_tags, dtype=np.int64)
    step[empty] = 0
    step[closing] = -1
    depth = step.cumsum()  # elements open after each tag
    if depth[-1] != 0 or (n_tags > 1 and depth[:-1].min() <= 0):
        return None  # unbalanced, or not one root
    opening = ~closing
    ev = opening.nonzero()[0]  # tag of each element, in document order
    n = len(ev)
    elem_of_tag = opening.cumsum() - 1
    level = depth[ev] - step[ev]  # open elements around it (root: 0)
    # The innermost open element after tag j is the last element opened up to j
    # at level depth[j] - 1 (elements of one level never overlap).
    width = n_tags + 1
    by_level = level * width + ev
    by_level.sort()
    at = by_level.searchsorted((depth - 1) * width + np.arange(n_tags), side="right")
    owner = elem_of_tag[by_level[at - 1] % width]
    owner[depth == 0] = -1

    # Tag names end at the first " ", "/" or ">" (looked for 8 bytes at a time).
    view = u64_view(data)
    name_at = lt[ev] + 1
    name_len = _name_lengths(view, name_at)
    todo = (name_len < 0).nonzero()[0]
    if len(todo):  # 8 bytes or more
        name_len[todo] = _name_lengths(view, name_at[todo] + 8) + 8
        for i in (name_len < 8).nonzero()[0]:  # 16 bytes or more: rare
            name_len[i] = _NAME_END.search(data, int(name_at[i])).start() - name_at[i]
    stop = name_at + name_len

    # Text bytes: the bytes between tags.
    seg_len = np.empty(2 * n_tags, dtype=np.int64)
    seg_len[0::2] = gt - lt + 1
    seg_len[1:-1:2] = lt[1:] - gt[:-1] - 1
    seg_len[-1] = 0
    pattern = _TAG_THEN_TEXT[: 2 * n_tags] if n_tags <= _MAX_TAGS else _tag_then_text(n_tags)
    in_text = pattern.repeat(seg_len)
    # Words: runs of text bytes above 0x20.
    word = buf > 32
    word &= in_text
    # U+00A0, and control characters (which XML cannot hold: libxml2 writes
    # them &#xFFFD;) separate words like a space.
    for sep in (b"\xc2\xa0", b"&#xFFFD;"):
        found = _occurrences(data, buf, sep)
        if len(found):
            word[(found[:, None] + np.arange(len(sep))).ravel()] = False
    ws, we = run_edges(word)
    piece = _count_before(gt, ws) - 1  # the text after tag j is piece j

    # Attributes: pairs of quotes inside tags, written ` name="value"`.
    quotes = quotes[~in_text[quotes]]
    if len(quotes) & 1:
        return None
    opens, ends = quotes[0::2], quotes[1::2]
    tag = lt.searchsorted(opens) - 1  # the last "<" before
    after = buf[ends + 1]
    if not (
        (lt.searchsorted(ends) - 1 == tag).all()
        and opening[tag].all()
        and (buf[opens - 1] == _EQ).all()
        and ((after == _SPACE) | (after == _SLASH) | (after == _GT)).all()
    ):
        return None
    el = elem_of_tag[tag]
    first_attr = _run_starts(el)
    starts = np.empty_like(opens)
    starts[1:] = ends[:-1] + 2
    starts[first_attr] = stop[el[first_attr]] + 1
    if not ((buf[starts - 1] == _SPACE).all() and (opens - starts >= 2).all()):
        return None
    keep = ~_noise_attributes(buf, view, starts)
    # Tokens, in long values.
    scrub = cut_s = cut_e = _NONE
    long = (keep & (ends - opens > _TOKEN_MIN)).nonzero()[0]
    if len(long):
        ts, te = _tokens(buf, opens[long] + 1, ends[long])
        if len(ts):
            # Attributes with tokens are hashed as the sequence of their pieces between tokens.
            scrub = ends.searchsorted(ts)  # the attribute of each token
            keep[scrub] = False
            scrub = scrub[_run_starts(scrub)]
            cut_s = np.concatenate((starts[scrub], te))  # the pieces are disjoint and
            cut_e = np.concatenate((ts, ends[scrub]))  # in order: sorted, they pair up
            cut_s.sort()
            cut_e.sort()
    keep = keep.nonzero()[0]

    # Hash every span at once.
    h = span_hashes(
        view,
        np.concatenate((name_at, starts[keep], cut_s, ws)),
        np.concatenate((name_len, ends[keep] - starts[keep], cut_e - cut_s, we - ws)),
        mix=False,  # words are mixed by sequence and shingle hashing; the rest here
    )
    n_attr, n_cut = len(keep), len(cut_s)
    h[: n + n_attr + n_cut] = fmix64(h[: n + n_attr + n_cut])
    codes, seq = h[:n], h[n + n_attr :]  # seq: the pieces of attributes with tokens, words
    words = seq[n_cut:]
    # Sequence hashes, in one call: of the pieces of each attribute with tokens,
    # and of the words of each text piece.
    cut_first = cut_s.searchsorted(starts[scrub])
    piece_first = _run_starts(piece)
    first = np.concatenate((cut_first, piece_first + n_cut))
    last = np.empty_like(first)
    last[:-1] = first[1:]
    last[-1:] = len(seq)
    seq_h = sequence_hashes(seq, first, last)
    attr_h = np.zeros(len(starts), dtype=_U64)
    attr_h[keep] = h[n : n + n_attr]
    attr_h[scrub] = seq_h[: len(scrub)] ^ _SCRUBBED
    attrs = np.zeros(n, dtype=_U64)
    if len(starts):
        attrs[el[first_attr]] = np.add.reduceat(attr_h, first_attr)

    # Tag-path keys: the sum, over the element and its ancestors, of a hash of
    # (level, tag), kept as a running total over the tags (added at an opening
    # tag, taken off at its closing tag).
    g = fmix64(codes + level.astype(_U64) * _LEVEL_MUL)
    solo = empty[ev].nonzero()[0]
    step_h = np.zeros(n_tags, dtype=_U64)
    step_h[ev] = g
    step_h[ev[solo]] = 0
    shut = closing.nonzero()[0]
    step_h[shut] = _U64(0) - g[owner[shut - 1]]
    keys = step_h.cumsum()[ev]
    keys[solo] += g[solo]

    # Text: the words of each piece; an element's own text is its pieces (its
    # text, then its children's tails) numbered in document order and summed.
    texts = np.zeros(n, dtype=_U64)
    if len(words):
        own = owner[piece[piece_first]]
        order = own.argsort(kind="stable")
        own = own[order]
        piece_h = seq_h[len(scrub) :][order]
        piece_h += _run_ranks(own).astype(_U64) * _RANK_MUL
        runs_at = _run_starts(own)
        texts[own[runs_at]] = np.add.reduceat(fmix64(piece_h), runs_at)

    # Blank elements (no own text, no attributes left) are structure only: what
    # they contain is counted in their descendants. They are not represented.
    shown = ((texts != 0) | (attrs != 0)).nonzero()[0]
    keys = fmix64(keys[shown])
    by_key = keys.argsort(kind="stable")
    shown = shown[by_key]
    return ElementArrays(keys[by_key], fmix64(texts[shown] ^ codes[shown]), attrs[shown], words)


def _tag_then_text(n_tags: int) -> np.ndarray:
    """False, True, False, True, ...: tag j, then the text after it."""
    return (np.arange(2 * n_tags) & 1).astype(bool)


_MAX_TAGS = 1 << 15
_TAG_THEN_TEXT = _tag_then_text(_MAX_TAGS)
_NONE = np.zeros(0, dtype=np.int64)


def _noise_attributes(buf: np.ndarray, view: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """True for the attributes (``name="value"`` at ``starts``) that are noise by name."""
    # Bytes after a name ("=", "\"") never match a letter, so prefixes need no length check.
    head = view[starts] | _CASE
    noise = (head & _ON_MASK) == _ON
    noise |= (head & _MASK5) == _DATA
    noise |= (head & _MASK6) == _NONCE
    nine = (head == _INTEGRIT).nonzero()[0]
    if len(nine):
        at = starts[nine]
        noise[nine] = ((buf[at + 8] | 0x20) == ord("y")) & (buf[at + 9] == _EQ)
    return noise


def _leftovers(ids_old: np.ndarray, ids_new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices (ascending) left over on each side by a multiset intersection of the ids.

    One stable sort of both sides together: within a run of equal ids the old
    copies come first, and the first ``min(old, new)`` copies of each side match.
    """
    n_old = len(ids_old)
    ids = np.concatenate((ids_old, ids_new))
    order = ids.argsort(kind="stable")
    is_new = order >= n_old
    starts = _run_starts(ids[order])
    run = np.zeros(len(ids), dtype=np.int64)
    run[starts[1:]] = 1
    run.cumsum(out=run)
    news = np.add.reduceat(is_new.view(np.int8), starts, dtype=np.int64)
    olds = np.append(starts[1:], len(ids)) - starts - news
    rank = np.arange(len(ids)) - starts[run]  # old copies rank 0.., then new copies
    left = rank >= np.where(is_new, 2 * olds[run], news[run])
    old_left, new_left = order[left & ~is_new], order[left & is_new] - n_old
    old_left.sort()
    new_left.sort()
    return old_left, new_left


def diff(
    old: tuple[np.ndarray, np.ndarray, np.ndarray],
    new: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[int, int, int, int]:
    """``(added, removed, modified, attributes)`` between two ``(keys, texts, attrs)`` triples.

    See the module docstring for the matching rules. Arrays must be in the
    order :func:`extract` returns (sorted by key, document order within a key).
    Where several identical elements could match, copies in the same place
    (key) match first, then the others in order.
    """
    ok, ot, oa = old
    nk, nt, na = new
    if len(ok) == len(nk) and (ok == nk).all() and (ot == nt).all() and (oa == na).all():
        return 0, 0, 0, 0
    # Identity of an element: its own text (which includes its tag) and attributes.
    id_old, id_new = ot * _TEXT_SALT + oa, nt * _TEXT_SALT + na
    lo, ln = _leftovers(id_old + ok * _KEY_SALT, id_new + nk * _KEY_SALT)
    if len(lo) == 0 or len(ln) == 0:
        return len(ln), len(lo), 0, 0
    if len(lo) + len(ln) <= _SMALL:  # the usual case: a few changes; plain Python is faster
        return _diff_leftovers(
            id_old[lo].tolist(), ok[lo].tolist(), ot[lo].tolist(), oa[lo].tolist(),
            id_new[ln].tolist(), nk[ln].tolist(), nt[ln].tolist(), na[ln].tolist(),
        )  # fmt: skip
    lo2, ln2 = _leftovers(id_old[lo], id_new[ln])
    lo, ln = lo[lo2], ln[ln2]
    if len(lo) == 0 or len(ln) == 0:
        return len(ln), len(lo), 0, 0
    # Pair the n-th leftover of a key on one side with the n-th of the other:
    # keys arrive sorted (document order within a key), so number each run.
    ko, kn = ok[lo], nk[ln]
    ids = np.concatenate(
        (ko + _run_ranks(ko).astype(_U64) * _RANK_MUL, kn + _run_ranks(kn).astype(_U64) * _RANK_MUL)
    )
    order = ids.argsort(kind="stable")
    same = (ids[order[1:]] == ids[order[:-1]]).nonzero()[0]
    io, jn = lo[order[same]], ln[order[same + 1] - len(lo)]
    pairs = len(same)
    modified = int(np.count_nonzero(ot[io] != nt[jn]))
    attributes = int(np.count_nonzero(oa[io] != na[jn]))
    return len(ln) - pairs, len(lo) - pairs, modified, attributes


_SMALL = 64


def _diff_leftovers(
    old_ids: list[int],
    old_keys: list[int],
    old_texts: list[int],
    old_attrs: list[int],
    new_ids: list[int],
    new_keys: list[int],
    new_texts: list[int],
    new_attrs: list[int],
) -> tuple[int, int, int, int]:
    """:func:`diff` after the same-place matching, for short lists (same rules, same result)."""
    # Match identical elements wherever they are: the n-th copy on one side with the n-th on the other.
    waiting: dict[int, list[int]] = {}
    for j, x in enumerate(new_ids):
        waiting.setdefault(x, []).append(j)
    old_left = []
    matched_new = set()
    for i, x in enumerate(old_ids):
        copies = waiting.get(x)
        if copies:
            matched_new.add(copies.pop(0))
        else:
            old_left.append(i)
    new_left = [j for j in range(len(new_ids)) if j not in matched_new]
    # Pair the n-th leftover of a key on one side with the n-th of the other.
    by_key: dict[int, list[int]] = {}
    for j in new_left:
        by_key.setdefault(new_keys[j], []).append(j)
    pairs = modified = attributes = 0
    for i in old_left:
        same = by_key.get(old_keys[i])
        if same:
            j = same.pop(0)
            pairs += 1
            modified += old_texts[i] != new_texts[j]
            attributes += old_attrs[i] != new_attrs[j]
    return len(new_left) - pairs, len(old_left) - pairs, modified, attributes
