"""A URL's last change, shown: the version before it (kept by the crawl,
history/previous_body.py) against the kept copy, as a readable element diff; and a trial
of rules (``--ignore XPATH``, ``--watch XPATH``) on those two versions: would the last
change still be a change under them?

The verdicts are the detector's own (:meth:`ChangeDetector.compare` of the two bodies'
signatures, with the URL's learned boilerplate and its request's own watch list, as the
crawl compares now); the lines under them come from the same rules
(:mod:`scrapy_recrawl.change.diff_view`). More sections plug in through
:data:`SECTIONS`: each a function of the two versions returning sections. (The page's
items at their last change, old -> new, are not one: they come from a record of their
own, with or without bodies kept, and no trial rule changes them: insight/last_items.py.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scrapy_recrawl.change import ChangeDetector, ChangeResult, Ignore
from scrapy_recrawl.change.diff_view import ElementDiff, Entry, diff_bodies
from scrapy_recrawl.history.previous_body import PreviousBody, content_type_of, previous_body
from scrapy_recrawl.history.records import RecordError

#: characters of an element's text shown (longer texts are cut in the middle)
TEXT_WIDTH = 160
#: lines shown per kind of change (the rest counted)
MAX_LINES = 40


class NoPrevious(ValueError):
    """No version before the last change is kept for the URL (the message says why)."""


@dataclass(frozen=True)
class Version:
    """One version of the URL's body: what a section compares."""

    url: str
    body: bytes
    content_type: str | None
    cycle: int  # the cycle it was fetched in (-1: not known)
    time: float  # when (NaN: not known)
    meta: Mapping[str, Any] = field(default_factory=dict)  # its stored request's meta


@dataclass
class Line:
    """One line of a section: a ``kind`` (added, removed, modified, attributes, data), what
    it is (``path``) and its ``old`` / ``new`` text."""

    kind: str
    path: str
    old: str = ""
    new: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path, "old": self.old, "new": self.new}


@dataclass
class Section:
    """A titled list of lines, plus a count of the lines left out."""

    title: str
    lines: list[Line] = field(default_factory=list)
    more: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "lines": [x.as_dict() for x in self.lines], "more": self.more}


@dataclass
class Verdict:
    """A comparison of the two versions under some rules."""

    rules: str  # what they were, in words
    result: ChangeResult
    sections: list[Section]

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "rules": self.rules,
            "changed": r.changed,
            "distance": r.distance,
            "added": r.added,
            "removed": r.removed,
            "modified": r.modified,
            "attributes": r.attributes,
            "sections": [s.as_dict() for s in self.sections],
        }


@dataclass
class LastChange:
    url: str
    before: Version
    after: Version
    change_cycle: int
    now: Verdict  # as the crawl compares today
    trial: Verdict | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "change_cycle": self.change_cycle,
            "before": {"cycle": self.before.cycle, "time": _finite(self.before.time),
                       "bytes": len(self.before.body)},
            "after": {"cycle": self.after.cycle, "time": _finite(self.after.time),
                      "bytes": len(self.after.body)},
            "now": self.now.as_dict(),
            "trial": None if self.trial is None else self.trial.as_dict(),
            "notes": self.notes,
        }  # fmt: skip


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


# -- the sections ---------------------------------------------------------------------------

SectionMaker = Callable[[ChangeDetector, Version, Version, Ignore | None], list[Section]]


def cut(text: str, width: int = TEXT_WIDTH) -> str:
    """``text`` at most ``width`` characters: its start and end around an ellipsis."""
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    return f"{text[:head]}…{text[-(width - 1 - head) :]}"


def _text(e: Entry) -> str:
    return cut(e.shown) if e.shown else "(no text)"


def _attrs(a: Entry, b: Entry) -> tuple[str, str]:
    keys = sorted(set(a.attributes) | set(b.attributes))
    differ = [k for k in keys if a.attributes.get(k) != b.attributes.get(k)] or keys

    def show(e: Entry) -> str:
        return cut(" ".join(f'{k}="{e.attributes[k]}"' for k in differ if k in e.attributes))

    return show(a) or "(none)", show(b) or "(none)"


def _limited(title: str, lines: list[Line]) -> Section:
    return Section(title, lines[:MAX_LINES], max(0, len(lines) - MAX_LINES))


def element_sections(
    detector: ChangeDetector, before: Version, after: Version, ignore: Ignore | None
) -> list[Section]:
    """Elements added, removed and modified (their text), and attributes changed."""
    d: ElementDiff = diff_bodies(
        detector,
        (before.body, before.content_type),
        (after.body, after.content_type),
        after.url,
        ignore,
    )
    out = []
    if d.modified:
        out.append(_limited("modified", [Line("modified", a.path, _text(a), _text(b))
                                         for a, b in d.modified]))  # fmt: skip
    if d.added:
        out.append(_limited("added", [Line("added", e.path, new=_text(e)) for e in d.added]))
    if d.removed:
        out.append(_limited("removed", [Line("removed", e.path, old=_text(e)) for e in d.removed]))
    if d.attributes:
        out.append(_limited("attributes", [Line("attributes", a.path, *_attrs(a, b))
                                           for a, b in d.attributes]))  # fmt: skip
    return out


#: what a last change shows, each a function of the two versions (and the rules: the
#: detector, the learned boilerplate) returning its sections, in this order.
SECTIONS: list[SectionMaker] = [element_sections]


# -- building it ----------------------------------------------------------------------------


def _verdict(
    detector: ChangeDetector, before: Version, after: Version, ignore: Ignore | None, rules: str
) -> Verdict:
    sig = [detector.signature(v.body, v.url, v.content_type) for v in (before, after)]
    result = detector.compare(sig[0], sig[1], ignore=ignore)
    sections = [s for make in SECTIONS for s in make(detector, before, after, ignore)]
    return Verdict(rules, result, sections)


def _rules(detector: ChangeDetector, learned: bool) -> str:
    parts = []
    if detector.ignore_xpaths:
        parts.append("ignoring " + ", ".join(detector.ignore_xpaths))
    if detector.watch_xpaths:
        parts.append("watching " + ", ".join(detector.watch_xpaths))
    if learned:
        parts.append("the learned boilerplate left out")
    return "; ".join(parts) or "the whole page"


def learned_ignore(store: Any, url: str) -> Ignore | None:
    """What the crawl's comparisons of ``url`` leave out (the learned boilerplate)."""
    from scrapy_recrawl.change import BoilerplateModel
    from scrapy_recrawl.change.boilerplate import TABLE

    model = BoilerplateModel()
    model.load(store.side_items(TABLE))
    ignore = model.ignore_for(url)
    return ignore if ignore else None


def last_change(
    store: Any,
    url_id: int,
    url: str,
    fingerprint: bytes | None,
    detector: ChangeDetector,
    *,
    ignore: list[str] | None = None,
    watch: list[str] | None = None,
) -> LastChange:
    """The URL's last change as the crawl compares now, and under the trial rules
    (``ignore``: XPaths added to the ignore list; ``watch``: the watch list instead of
    the URL's). :class:`NoPrevious` when no version before it is kept;
    :class:`~scrapy_recrawl.settings.RecrawlSettingError` for a bad XPath."""
    try:
        prev = previous_body(store, url_id)
    except RecordError as exc:  # damaged or foreign data in the side table: said, not raised
        raise NoPrevious(
            f"its kept previous version is unreadable ({exc}); the crawl keeps a new one at "
            "the URL's next change"
        ) from None
    if prev is None:
        raise NoPrevious(
            "no version before its last change is kept (kept from the first change seen "
            "with RECRAWL_KEEP_PREVIOUS and RECRAWL_STORE_BODIES on: none seen since)"
        )
    if prev.body is None:
        raise NoPrevious(
            f"the version before its last change (cycle {prev.cycle}) was {prev.size} bytes, "
            "over RECRAWL_PREVIOUS_BODY_MAX_BYTES: not kept"
        )
    current = store.body(fingerprint) if fingerprint is not None else None
    if current is None:
        raise NoPrevious("no current copy is kept to compare the previous version with")
    request = (store.requests([url_id]) or [None])[0] or {}
    meta = request.get("meta") or {}
    before = Version(url, prev.body, prev.content_type, prev.before_cycle, prev.before_time, meta)
    after = Version(url, current.body, content_type_of(current), prev.cycle, prev.time, meta)
    here = detector.for_request(meta)
    learned = learned_ignore(store, url)
    out = LastChange(url, before, after, prev.cycle,
                     _verdict(here, before, after, learned, _rules(here, bool(learned))))  # fmt: skip
    if detector.content_hash(current.body) != prev.after:
        out.notes.append(
            "the kept copy was fetched again after the change (unchanged under the crawl's "
            "rules, or a 304): the diff is between the previous version and that copy"
        )
    _trial_of(out, here, learned, ignore, watch)
    return out


def _trial_of(
    out: LastChange,
    here: ChangeDetector,
    learned: Ignore | None,
    ignore: list[str] | None,
    watch: list[str] | None,
) -> None:
    if not ignore and watch is None:
        return
    trial = ChangeDetector(
        here.shingle_size,
        here.simhash_distance,
        here.min_element_changes,
        [*here.ignore_xpaths, *(ignore or [])],
        here.max_parse_bytes,
        here.change_test,
        here.chi2_p,
        here.bow_terms,
        watch_xpaths=here.watch_xpaths if watch is None else watch,
    )
    out.trial = _verdict(trial, out.before, out.after, learned, _rules(trial, bool(learned)))


def version_line(v: Version) -> str:
    """``cycle 4, 2026-11-28 10:11 UTC, 12,345 bytes``."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(v.time)) if math.isfinite(v.time) else ""
    cycle = f"cycle {v.cycle}" if v.cycle >= 0 else "cycle unknown"
    return ", ".join(x for x in (cycle, when, f"{len(v.body):,} bytes") if x)


# -- shown ----------------------------------------------------------------------------------


def _print_verdict(con: Any, v: Verdict, head: str) -> None:
    r = v.result
    counts = (
        f"{r.added} added, {r.removed} removed, {r.modified} modified, "
        f"{r.attributes} with other attributes; simhash distance {r.distance}"
    )
    said = "a change" if r.changed else "no change"
    con.print(f"{head}: {said} ({counts})", markup=False)
    con.print(f"  rules: {v.rules}", markup=False)
    for section in v.sections:
        con.print(f"  {section.title}:", markup=False)
        for line in section.lines:
            if line.kind in ("modified", "attributes"):
                con.print(f"    {line.path}", markup=False)
                con.print(f"      - {line.old}", markup=False)
                con.print(f"      + {line.new}", markup=False)
            else:
                sign = "+" if line.kind == "added" else "-"
                con.print(f"    {sign} {line.path}: {line.new or line.old}", markup=False)
        if section.more:
            con.print(f"    ... and {section.more} more", markup=False)


def print_last_change(lc: LastChange, out: Any = None) -> None:
    """The last change as a person reads it (after the URL's story)."""
    from .render import _console

    con = _console(out)
    con.print(f"Last change, seen in cycle {lc.change_cycle}:", markup=False, style="bold")
    con.print(f"  before: {version_line(lc.before)}", markup=False)
    con.print(f"  after:  {version_line(lc.after)} (the kept copy)", markup=False)
    _print_verdict(con, lc.now, "as the crawl compares now")
    if lc.trial is not None:
        _print_verdict(con, lc.trial, "under the trial rules")
        if lc.trial.result.changed == lc.now.result.changed:
            still = "still a change" if lc.now.result.changed else "still no change"
            con.print(f"verdict: {still} under the trial rules", markup=False)
        elif lc.now.result.changed:
            con.print("verdict: no longer a change under the trial rules", markup=False)
        else:
            con.print("verdict: a change under the trial rules", markup=False)
    for note in lc.notes:
        con.print(f"note: {note}", markup=False)


__all__ = [
    "SECTIONS",
    "LastChange",
    "Line",
    "NoPrevious",
    "PreviousBody",
    "Section",
    "Verdict",
    "Version",
    "element_sections",
    "last_change",
    "print_last_change",
]
