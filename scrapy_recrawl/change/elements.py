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

How (for speed): one compiled pass over libxml2's tree (``_walk.pyx``, through
lxml's public C API) hashes every tag, attribute and word as it goes; no
Python object is made per element or word. Text and attribute values are
hashed as the parser decoded them (entities resolved, UTF-8). Words are runs
of bytes above 0x20 (U+00A0 separates like a space); a word or a text piece
runs on across a removed noise element (``a<script>..</script>b`` reads
``ab``, as the text a reader sees), but ends at any other element boundary.
The tag path is a running sum of hashes of (depth, tag). The words handed to
the shingles are in reading order.

Blank elements (no own text and no attributes left: ``<br>``, bare wrappers,
an implied ``<head>``) are structure only and are not represented; what they
contain is represented by their descendants.

Data parts: what a scraper reads outside the visible text is compared too, each
item an entry of its own (attrs 0) after the elements, so the diff counts a change
there as a modified element and the boilerplate learning (``boilerplate.py``) can
leave out one that moves on every fetch, by its key, as it does an element:

* one per ``<meta content>`` with a ``name``, ``property`` or ``itemprop`` (key: that
  name; ``http-equiv`` metas are HTTP headers and not read);
* one per element with own text and ``data-*`` attributes with a value (key: its tag
  path and a salt; the values hashed as attribute values, tokens left out);
* one per leaf of a JSON script (JSON-LD, ``__NEXT_DATA__``...; made by detector.py
  from the scripts the walk hands over; key: the script's id or type and the leaf's
  path).

Meta names and JSON keys that name per-request bookkeeping or presentation
(``_walk.BOOKKEEPING``: nonce, token, csrf, trace, session, viewport, robots...,
matched on the name folded to lowercase letters and digits) are not read.

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
  with build hashes, preload hints: nothing a reader sees) are not elements
  (``<meta content>`` and JSON scripts give data parts, above);
* attributes ``nonce`` and ``integrity``, custom data attributes ``data-*``
  (in the attributes hash; their values are a data part on elements with text,
  and not read on wrappers, where they are page-script state; valueless ones such
  as Vue's ``data-v-<hash>`` are never read) and inline event handlers ``on*``
  (script);
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

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from lxml import etree

from ._diff import diff as _diff
from ._walk import NOISE_TAGS, sign

__all__ = ["NOISE_TAGS", "ElementArrays", "diff", "extract"]

_U64 = np.uint64


class ElementArrays(NamedTuple):
    """Per-element hashes (sorted by key, document order within a key) + visible words."""

    keys: np.ndarray
    texts: np.ndarray
    attrs: np.ndarray
    #: hashes of the visible words in reading order, ready for shingling
    words: np.ndarray


#: ``(keys, texts)`` of parts that are not elements (attrs 0), keys already mixed
Parts = tuple[np.ndarray, np.ndarray]


def extract(
    root: etree._Element, more_parts: Callable[[list[Any]], Parts | None] | None = None
) -> ElementArrays:
    """Hash every element under ``root`` (noise elements skipped, see the module docstring),
    with the data parts (``data-*``, ``<meta content>``: the walk's) and what
    ``more_parts`` makes of the JSON ``<script>`` elements (detector.py) after them.

    Blank elements (no own text, no attributes left) are structure only: what they
    contain is counted in their descendants; they are not represented. The arrays
    are read-only. (Compiled: ``_walk.sign``, which the detector calls itself to have
    the simhash of the words made in the same pass.)"""
    keys, texts, attrs, _, words, _ = sign(root, more_parts, 0, True, True)
    return ElementArrays(keys, texts, attrs, words)


def diff(
    old: tuple[np.ndarray, np.ndarray, np.ndarray],
    new: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[int, int, int, int]:
    """``(added, removed, modified, attributes)`` between two ``(keys, texts, attrs)`` triples.

    See the module docstring for the matching rules. Arrays must be in the
    order :func:`extract` returns (sorted by key, document order within a key).
    Where several identical elements could match, copies in the same place
    (key) match first, then the others in order. (Compiled: ``_diff.pyx``.)
    """
    return _diff(*(np.ascontiguousarray(a, dtype=_U64) for a in (*old, *new)))
