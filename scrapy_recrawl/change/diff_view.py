"""The element diff as a person reads it: which elements were added, removed or modified
between two bodies, with their text.

Why: the detector's diff (:func:`~scrapy_recrawl.change.elements.diff`, compiled) counts;
``recrawl-report --url`` shows. This module makes, per body, the entries a signature holds
(the same parse, ignore and watch rules, walk and hashes: :meth:`ChangeDetector.tree`,
``_walk.walk``), each tied to its element (or to the data part it is: a ``<meta
content>``, a ``data-*`` value, a JSON leaf), and matches them by the same rules as the
compiled diff (identical elements in the same place, then anywhere, then the n-th leftover
of a key with the n-th on the other side; the learned boilerplate left out as
:func:`~scrapy_recrawl.change.signature.leave_out` does). So its counts are the
detector's (tests hold them equal on real pages), and each count has its elements.

Offline only (the report): it builds Python objects per element, which the crawl's
signing never does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._walk import walk
from .detector import ChangeDetector, walk_order
from .parts import MAX_JSON_LEAVES, json_leaves, json_parts
from .shingles import fmix64
from .signature import Ignore

__all__ = ["Entry", "ElementDiff", "diff_bodies", "entries"]

_U64 = np.uint64
_NOISE_ATTRS = ("nonce", "integrity")


@dataclass(frozen=True)
class Entry:
    """One thing a signature compares: an element (its tag path, own text, attributes)
    or a data part (``path`` names it: ``meta``, ``data-*`` or the JSON leaf's path)."""

    key: int
    text: int  # the hash of its tag and own text
    attrs: int  # the hash of its attributes (0: none)
    path: str
    shown: str  # its own text (an element's) or value (a part's), whitespace-normalised
    attributes: dict[str, str] = field(default_factory=dict)
    at: int = 0  # its place in the page (document order; data parts after the elements)


@dataclass
class ElementDiff:
    """What changed between two bodies, element by element."""

    added: list[Entry] = field(default_factory=list)
    removed: list[Entry] = field(default_factory=list)
    #: pairs (old, new) whose own text differs
    modified: list[tuple[Entry, Entry]] = field(default_factory=list)
    #: pairs (old, new) whose attributes differ (a pair can be in both lists)
    attributes: list[tuple[Entry, Entry]] = field(default_factory=list)

    def counts(self) -> tuple[int, int, int, int]:
        """``(added, removed, modified, attributes)``, as :meth:`ChangeDetector.compare`."""
        return len(self.added), len(self.removed), len(self.modified), len(self.attributes)

    def __bool__(self) -> bool:
        return any(self.counts())


def _own_text(el: Any) -> str:
    pieces = [el.text or ""] + [c.tail or "" for c in el]
    return " ".join(" ".join(pieces).replace("\xa0", " ").split())


def _tag_path(el: Any) -> str:
    """Its tag path, each step with its ``id`` when it has one and the last with its
    ``class`` else: ``/html/body/main/article/p[@class="price"]``, an XPath a user can
    paste into ``--ignore`` or ``--watch``."""
    steps = []
    last = True
    while el is not None:
        step, ident, klass = str(el.tag), el.get("id"), el.get("class")
        if ident and '"' not in ident:
            step += f'[@id="{ident}"]'
        elif last and klass and '"' not in klass:
            step += f'[@class="{klass}"]'
        steps.append(step)
        el = el.getparent()
        last = False
    return "/" + "/".join(reversed(steps))


def _attributes(el: Any) -> dict[str, str]:
    """Its attributes as the element diff reads them (noise left out: elements.py)."""
    return {
        str(k): str(v)
        for k, v in el.attrib.items()
        if k not in _NOISE_ATTRS and not str(k).startswith(("data-", "on"))
    }


def _data_labels(root: Any) -> Iterator[tuple[str, str]]:
    """The walk's data parts named, in its order (document order; a ``<meta>`` when met,
    an element's ``data-*`` values when it ends): what each is and its value. The walk
    reads them in C; these names are a guess checked by their count (:func:`entries`)."""

    def visit(el: Any) -> Iterator[tuple[str, str]]:
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            low = tag.lower()
            if low == "meta":
                name = child.get("name") or child.get("property") or child.get("itemprop")
                if name and child.get("content") is not None:
                    yield f"<meta {name}>", child.get("content", "")
            elif low and low not in _SKIPPED:
                yield from visit(child)
        values = {k: v for k, v in el.attrib.items() if str(k).startswith("data-") and v}
        if values and _own_text(el):
            yield f"{_tag_path(el)} data-*", " ".join(f"{k}={v}" for k, v in values.items())

    yield from visit(root)


_SKIPPED = frozenset({"script", "style", "template", "link", "base", "noscript"})


def entries(
    detector: ChangeDetector, body: bytes, url: str, content_type: str | None
) -> list[Entry]:
    """The entries of ``body``'s signature under ``detector``'s rules, sorted as the
    signature sorts them (by key, document order within a key); [] when it is not HTML."""
    root = detector.tree(body, url, content_type)
    if root is None:
        return []
    keys, codes, texts, attrs, _, elements, scripts = walk(root)
    shown = ((texts != 0) | (attrs != 0)).nonzero()[0]
    mixed_keys = fmix64(keys[shown]).tolist()
    mixed_texts = fmix64(texts[shown] ^ codes[shown]).tolist()
    attr_hashes = attrs[shown].tolist()
    nodes = list(walk_order(root))
    labels = list(_data_labels(root))
    parts = len(keys) - int(elements)
    out: list[Entry] = []
    for n, i in enumerate(shown.tolist()):
        if i < elements:
            el = nodes[i]
            out.append(
                Entry(
                    mixed_keys[n],
                    mixed_texts[n],
                    attr_hashes[n],
                    _tag_path(el),
                    _own_text(el),
                    _attributes(el),
                    i,
                )
            )
        else:
            j = i - int(elements)
            path, value = labels[j] if len(labels) == parts else ("a <meta> or data-* value", "")
            out.append(Entry(mixed_keys[n], mixed_texts[n], 0, path, value, at=i))
    out.extend(_json_entries(scripts, len(keys)))
    out.sort(key=lambda e: e.key)  # stable: document order within a key
    return out


def _json_entries(scripts: list[Any], at: int) -> list[Entry]:
    made = json_parts(scripts)
    if made is None:
        return []
    paths, values = json_leaves(scripts)  # as json_parts hashes them
    keys, texts = made[0].tolist(), made[1].tolist()
    named = len(paths) == len(keys) and len(keys) < MAX_JSON_LEAVES
    return [
        Entry(
            k,
            t,
            0,
            paths[n] if named else "a JSON leaf",
            values[n].decode("utf-8", "replace") if named else "",
            at=at + n,
        )
        for n, (k, t) in enumerate(zip(keys, texts, strict=True))
    ]


_TEXT_SALT = 0x2545F4914F6CDD1D
_KEY_SALT = 0x81DADEF4BC2DD44D
_MASK = (1 << 64) - 1


def _leftovers(
    old: list[int], new: list[int], ids_old: list[int], ids_new: list[int]
) -> tuple[list[int], list[int]]:
    """The multiset intersection of the compiled diff (_diff.pyx: leftovers): the n-th
    copy of a value on one side matches the n-th on the other; the unmatched, in order."""
    on_new = Counter(ids_new[i] for i in new)
    on_old = Counter(ids_old[i] for i in old)
    return _beyond(old, ids_old, on_new), _beyond(new, ids_new, on_old)


def _beyond(index: list[int], ids: list[int], other: Counter[int]) -> list[int]:
    """The entries of ``index`` past their value's count on the other side, in order."""
    seen: Counter[int] = Counter()
    left = []
    for i in index:
        v = ids[i]
        if seen[v] >= other[v]:
            left.append(i)
        seen[v] += 1
    return left


def _ignoring(items: list[Entry], ignore: Ignore | None) -> list[Entry]:
    """leave_out's rule: text-volatile keys dropped, attribute-volatile ones compared
    without their attributes."""
    if not ignore:
        return items
    drop = set(ignore.text.tolist())
    blank = set(ignore.attrs.tolist())
    out = []
    for e in items:
        if e.key in drop:
            continue
        if e.key in blank and e.attrs:
            e = Entry(e.key, e.text, 0, e.path, e.shown, e.attributes, e.at)
        out.append(e)
    return out


def diff_entries(
    before: list[Entry], after: list[Entry], ignore: Ignore | None = None
) -> ElementDiff:
    """The element diff of two entry lists (:func:`entries`), by the compiled diff's rules."""
    old, new = _ignoring(before, ignore), _ignoring(after, ignore)
    ident_old = [(e.text * _TEXT_SALT + e.attrs) & _MASK for e in old]
    ident_new = [(e.text * _TEXT_SALT + e.attrs) & _MASK for e in new]
    placed_old = [(v + e.key * _KEY_SALT) & _MASK for v, e in zip(ident_old, old, strict=True)]
    placed_new = [(v + e.key * _KEY_SALT) & _MASK for v, e in zip(ident_new, new, strict=True)]
    lo, ln = _leftovers(list(range(len(old))), list(range(len(new))), placed_old, placed_new)
    lo, ln = _leftovers(lo, ln, ident_old, ident_new)
    out = ElementDiff()
    i = j = 0
    paired_old, paired_new = set(), set()
    while i < len(lo) and j < len(ln):
        a, b = old[lo[i]], new[ln[j]]
        if a.key < b.key:
            i += 1
        elif a.key > b.key:
            j += 1
        else:
            paired_old.add(lo[i])
            paired_new.add(ln[j])
            if a.text != b.text:
                out.modified.append((a, b))
            if a.attrs != b.attrs:
                out.attributes.append((a, b))
            i += 1
            j += 1
    out.removed = sorted((old[k] for k in lo if k not in paired_old), key=_place)
    out.added = sorted((new[k] for k in ln if k not in paired_new), key=_place)
    out.modified.sort(key=lambda pair: pair[1].at)
    out.attributes.sort(key=lambda pair: pair[1].at)
    return out


def _place(e: Entry) -> int:
    return e.at


def diff_bodies(
    detector: ChangeDetector,
    before: tuple[bytes, str | None],
    after: tuple[bytes, str | None],
    url: str,
    ignore: Ignore | None = None,
) -> ElementDiff:
    """The element diff of two ``(body, content_type)`` under ``detector``'s rules."""
    return diff_entries(
        entries(detector, before[0], url, before[1]),
        entries(detector, after[0], url, after[1]),
        ignore,
    )
