"""Boilerplate, as the report shows it: what the crawl learned (:func:`learned`: per
section of a site, the parts that differ between two fetches a moment apart, which every
comparison leaves out; change/boilerplate.py), and pages whose "changes" still look like
boilerplate (:func:`find`): a date, a counter or an ad slot that moves at every visit
but not per request, each with the ``RECRAWL_IGNORE_XPATHS`` line that would silence it.

What the store can tell: per visit, whether it was a change, the simhash distance
``D`` and how many elements were added, removed, modified or had attributes changed
(the visit log). A page that changed at (nearly) every observation, each time by one
or two elements and a small distance, is most likely boilerplate. What it cannot
tell: *which* element moved (the log keeps counts, not paths). The one clue left is
the page's kept copy (when the store keeps bodies): elements whose text looks like a
date, a time or a counter, or whose id/class says so (``date``, ``updated``, ``ad``
...), are offered as a guess, and said to be one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .log import VisitLog

#: at least this many observations, and this share of them changes
MIN_OBSERVATIONS = 3
MIN_CHANGE_SHARE = 0.9
#: a change this small (medians): one element (a date or counter is one element's text;
#: a real edit usually touches more, e.g. the text and an "Updated on" line) and a
#: small simhash distance
MAX_ELEMENTS = 1
MAX_DISTANCE = 8

_DATE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}|\d{1,2}:\d{2}(:\d{2})?|"
    r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2})\b",
    re.IGNORECASE,
)
_COUNTER = re.compile(r"\b(\d[\d,.]*\s*(views?|visits?|visitors?|hits?|online)|"
                      r"(views?|visits?|visitors?|hits?):?\s*\d)", re.IGNORECASE)  # fmt: skip
_NAMES = re.compile(
    r"(^|[-_ ])(date|time|updated|timestamp|clock|counter|views|visits|ad|ads|advert|banner)"
    r"($|[-_ ])",
    re.IGNORECASE,
)


@dataclass
class Boilerplate:
    url: str
    observations: int
    changes: int
    median_distance: float
    median_elements: float  # added + removed + modified + attributes per change
    suspects: list[str]  # XPath guesses from the kept copy (may be empty)
    ignore_line: str  # the RECRAWL_IGNORE_XPATHS line to add

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def suspects(log: VisitLog) -> list[tuple[int, int, int, float, float]]:
    """``(url_id, observations, changes, median distance, median elements)`` of the
    pages whose changes look like boilerplate, the most changes first.

    One pass over the log, grouped by URL (a mask per URL made the report quadratic:
    issue 29)."""
    obs = log.observed
    ids, row = np.unique(log["url_id"][obs], return_inverse=True)
    row = row.ravel()
    n = np.bincount(row, minlength=ids.size)
    changed = log["changed"][obs] == 1
    x = np.bincount(row[changed], minlength=ids.size)
    # the share test first: the medians are needed only for the pages that pass it
    many = (n >= MIN_OBSERVATIONS) & (x >= MIN_CHANGE_SHARE * n)
    keep = changed & many[row]
    if not keep.any():
        return []
    cols = {c: log[c][obs][keep] for c in ("distance", "added", "removed", "modified")}
    elements = cols["added"] + cols["removed"] + cols["modified"] + log["attributes"][obs][keep]
    group = row[keep]
    dist, elem = group_median(group, cols["distance"]), group_median(group, elements)
    at = np.flatnonzero(many)  # the groups of `group`, in order (each has a change)
    small = (elem[at] <= MAX_ELEMENTS) & (dist[at] <= MAX_DISTANCE)
    at = at[small]
    out = list(
        zip(
            ids[at].tolist(),
            n[at].tolist(),
            x[at].tolist(),
            dist[at].tolist(),
            elem[at].tolist(),
            strict=True,
        )
    )
    out.sort(key=lambda s: (-s[2], s[0]))
    return out


def group_median(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per group code ``0..group.max()``, the median of its ``values`` (as ``np.median``:
    the mean of the two middle ones for an even count; NaN for a group with none)."""
    size = int(group.max()) + 1 if group.size else 0
    out = np.full(size, np.nan)
    if not group.size:
        return out
    order = np.lexsort((values, group))
    g, v = group[order], values[order].astype(np.float64)
    codes, start, count = np.unique(g, return_index=True, return_counts=True)
    lo, hi = start + (count - 1) // 2, start + count // 2
    out[codes] = (v[lo] + v[hi]) / 2.0
    return out


def guess_xpaths(body: bytes, ignored: Sequence[str] = (), limit: int = 2) -> list[str]:
    """XPaths of elements of ``body`` that look like a date, time, counter or ad slot,
    leaving out those the ``ignored`` XPaths (RECRAWL_IGNORE_XPATHS) already silence."""
    from lxml import etree, html

    try:
        root = html.fromstring(body)
    except (etree.ParserError, ValueError):
        return []
    silenced: set[Any] = set()
    for xpath in ignored:
        try:
            hits = root.xpath(xpath)
        except etree.XPathError:
            continue
        for hit in hits if isinstance(hits, list) else ():
            if isinstance(hit, etree._Element):
                silenced.update(hit.iter())
    found: list[str] = []
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag in ("script", "style", "html", "body", "head"):
            continue
        if el in silenced:
            continue
        own = (el.text or "").strip()
        named = " ".join(filter(None, (el.get("id"), el.get("class"))))
        if not ((own and (_DATE.search(own) or _COUNTER.search(own))) or _NAMES.search(named)):
            continue
        xpath = _xpath_of(el)
        if xpath not in found:
            found.append(xpath)
        if len(found) >= limit:
            break
    return found


def _xpath_of(el: Any) -> str:
    if el.get("id"):
        return f'//*[@id="{el.get("id")}"]'
    if el.get("class"):
        return f'//{el.tag}[@class="{el.get("class")}"]'
    return str(el.getroottree().getpath(el))


def ignore_line(current: list[str], add: list[str]) -> str:
    """The settings line: the current XPaths and the new ones."""
    new = [x for x in add if x not in current] or ["//XPATH-OF-THE-MOVING-ELEMENT"]
    items = ", ".join(repr(x) for x in [*current, *new])
    return f"RECRAWL_IGNORE_XPATHS = [{items}]"


def find(
    store: Any, log: VisitLog, current: list[str], limit: int, body_of: Any
) -> list[Boilerplate]:
    """The boilerplate suspects (at most ``limit``); ``body_of(url_id)``: the kept copy's
    bytes or None."""
    found = suspects(log)[:limit]
    urls = store.urls(np.array([s[0] for s in found], dtype=np.int64)) if found else []
    out = []
    for (url_id, n, x, dist, elem), url in zip(found, urls, strict=True):
        body = body_of(url_id)
        guesses = guess_xpaths(body, current) if body else []
        out.append(Boilerplate(url, n, x, dist, elem, guesses, ignore_line(current, guesses)))
    return out


# -- what was learned ----------------------------------------------------------------------


@dataclass
class Learned:
    """One section's learned boilerplate, named from a kept copy of one of its pages."""

    section: str
    pairs: int  # confirmation pairs it was learned from
    volatile: list[str]  # XPaths of the parts left out (text-volatile)
    attributes: list[str]  # XPaths of the parts compared without their attributes
    named_from: str | None  # the URL whose kept copy named them (None: no copy kept)
    unnamed: int  # learned parts no kept copy had (counted, not named)
    pin_line: str  # the RECRAWL_IGNORE_XPATHS line that pins them (attributes as <path>/@*)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tag_path(el: Any) -> str:
    """The XPath of every element with ``el``'s tag path, e.g. ``/html/body/footer/p``: the
    elements one learned key stands for (a key has no sibling indices)."""
    tags = [el.tag]
    parent = el.getparent()
    while parent is not None:
        tags.append(parent.tag)
        parent = parent.getparent()
    return "/" + "/".join(reversed(tags))


def pinning_line(current: list[str], volatile: list[str], attributes: list[str]) -> str:
    """The ``RECRAWL_IGNORE_XPATHS`` line that does what was learned: the text-volatile
    parts left out, and the attributes of the parts compared without them (``<path>/@*``:
    an ignore-XPath that selects attributes removes them) unless a volatile part already
    holds them. Without the attributes, pinning the line with learning off leaves every
    page whose links carry a session id changed at every visit. "" when nothing is named."""
    covered = tuple(v + "/" for v in volatile)
    attrs = [f"{a}/@*" for a in attributes if a not in volatile and not a.startswith(covered)]
    pinned = [*volatile, *attrs]
    return ignore_line(current, pinned) if pinned else ""


def learned(
    store: Any,
    detector: Any,
    urls_by_id: dict[int, str],
    body_of: Any,
    current: list[str],
) -> list[Learned]:
    """Every section kept in the store's ``boilerplate`` table, each named from the kept
    copy of one of its pages among ``urls_by_id`` (``body_of(url_id)``: bytes or None)."""
    from scrapy_recrawl.change.boilerplate import TABLE, SectionStats, section_of

    sections = []
    for _, value in store.side_items(TABLE):
        try:
            sections.append(SectionStats.from_bytes(value))
        except ValueError:
            continue
    if not sections:  # no section learned: no page to name one from
        return []
    pages: dict[str, list[int]] = {}
    for url_id, url in urls_by_id.items():
        pages.setdefault(section_of(url)[1], []).append(url_id)
    out = []
    for stats in sorted(sections, key=lambda s: s.section):
        ignore = stats.ignore()
        wanted = set(ignore.text.tolist()) | set(ignore.attrs.tolist())
        names: dict[int, str] = {}
        named_from = None
        for url_id in pages.get(stats.section, [])[:20]:
            body = body_of(url_id)
            if not body:
                continue
            found = detector.elements_by_key(body, urls_by_id[url_id], "text/html")
            here = {k: tag_path(found[k][0]) for k in wanted if k in found}
            if here:
                names.update(here)
                named_from = named_from or urls_by_id[url_id]
            if len(names) == len(wanted):
                break
        volatile = sorted({names[k] for k in ignore.text.tolist() if k in names})
        attributes = sorted({names[k] for k in ignore.attrs.tolist() if k in names})
        out.append(
            Learned(
                stats.section,
                stats.pairs,
                volatile,
                attributes,
                named_from,
                len(wanted) - len(names),
                pinning_line(current, volatile, attributes),
            )
        )
    return out
