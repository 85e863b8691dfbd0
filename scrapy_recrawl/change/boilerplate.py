"""Boilerplate learned from the site itself: the parts of a page that change on every
request (a render time, a CSRF token, an "N people are viewing this" counter, a
rotating "you may also like" block, an ad slot, session ids in links).

The definition is the operational one: **what differs between two fetches of the same
URL a moment apart is not content.** A real change between two requests seconds apart is
rare; boilerplate differs every time. So, once per *section* of a site (a host and the
first segment of the path, digits folded: ``shop.example/product``, ``news.example/N``),
at the first fetches of its pages, the crawl fetches a page a second time at once (a
*confirmation pair*, :meth:`BoilerplateModel.wants_pair`: a few requests per section,
once per store, so the section is learned before its pages are first compared) and
compares the two signatures element by element
(:func:`touched`): the element keys (tag paths, :mod:`.elements`) whose own text differs
are *text-volatile*, those whose attributes alone differ (a session id in an ``href``)
are *attribute-volatile*. Keys present in the pair and untouched are known stable.

Comparisons of later visits then leave the volatile parts out (:class:`Ignore`, applied by
:meth:`ChangeDetector.compare <scrapy_recrawl.change.detector.ChangeDetector.compare>`):
text-volatile elements are dropped on both sides, attribute-volatile ones compared
without their attributes. Nothing is removed from the stored signatures, so what is
learned applies to every kept signature at once, and a section learned anew needs no
re-signing.

Once a section has its pairs, a change on keys none of them had (a template grew a new
block) asks for one more pair (at most one per section and cycle), so a new kind of
boilerplate is learned the cycle it appears, and a real new block is confirmed stable.

What this cannot see: parts that move with time but not per request ("3 hours ago"
relative dates, a "today's deals" block rotated daily). Those stay changes; the report
(``recrawl-report --table boilerplate``) lists them as suspects with the
``RECRAWL_IGNORE_XPATHS`` line to pin them.

Pure: no Scrapy, no I/O; the middleware owns an instance and keeps it in the store's
side storage (:meth:`BoilerplateModel.records`, :meth:`BoilerplateModel.load`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

import numpy as np
import xxhash

from .detector import Ignore, Signature

__all__ = [
    "TABLE",
    "BoilerplateModel",
    "Ignore",
    "SectionStats",
    "section_of",
    "touched",
]

#: the side-storage table the middleware keeps the learned sections in
TABLE = "boilerplate"

_U64 = np.uint64
_SALT = np.uint64(0x9E3779B97F4A7C15)
_DIGITS = re.compile(r"\d+")
_SIGNED63 = (1 << 63) - 1


_NOTHING = Ignore(np.zeros(0, _U64), np.zeros(0, _U64))


# cached: a response asks two or three times (its pair, the sections it teaches and is
# compared under), about 8 µs each
@lru_cache(maxsize=4096)
def section_of(url: str) -> tuple[str, str]:
    """``(host, section)`` of a URL. The section is the host and the folders of the path
    (the last segment, the page's own name, left out; at most two; digit runs folded to
    ``N``): ``/shop/product/12`` is ``shop/product``, ``/2024/05/slug`` is ``N/N``,
    ``/about.html`` the host's top level. Pages made from one template usually share it,
    and so share what is learned."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in _PLAIN_SCHEMES and _PLAIN_URL.fullmatch(rest):
        # the common URL, read as urlsplit reads it (tests/test_boilerplate.py compares)
        end = len(rest)
        for stop in "/?#":
            at = rest.find(stop)
            if 0 <= at < end:
                end = at
        host, colon, port = rest[:end].partition(":")
        if host and (not colon or (port.isdigit() and port[0] != "0" and int(port) <= 65535)):
            path = rest[end:].partition("?")[0].partition("#")[0]
            return _section(host.lower() + colon + port, path)
    return _section_by_urlsplit(url)


#: schemes whose URLs section_of reads itself (others: urlsplit)
_PLAIN_SCHEMES = frozenset({"http", "https"})
#: what follows "scheme://" in a URL section_of reads itself: printable ASCII, no user
#: info, no IPv6 literal, nothing urlsplit would strip or reject
_PLAIN_URL = re.compile(r"[!-?A-Z\\^-~]+")


def _section_by_urlsplit(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.port:
        host = f"{host}:{parts.port}"
    return _section(host, parts.path)


def _section(host: str, path: str) -> tuple[str, str]:
    folders = [s for s in (path or "/").split("/")[:-1] if s][:2]
    return host, f"{host}/{'/'.join(_DIGITS.sub('N', f) for f in folders)}"


def _unique_sorted(keys: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array."""
    if keys.size == 0:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _differing_keys(
    old_keys: np.ndarray, old_vals: np.ndarray, new_keys: np.ndarray, new_vals: np.ndarray
) -> np.ndarray:
    """Keys whose multiset of values differs between the two sides (sorted, distinct)."""
    if old_keys.size == 0 and new_keys.size == 0:
        return old_keys
    with np.errstate(over="ignore"):
        vals = np.concatenate([old_keys * _SALT + old_vals, new_keys * _SALT + new_vals])
    keys = np.concatenate([old_keys, new_keys])
    sign = np.concatenate([np.ones(old_keys.size, np.int64), np.full(new_keys.size, -1, np.int64)])
    order = np.argsort(vals, kind="stable")
    v = vals[order]
    starts = np.flatnonzero(np.concatenate([[True], v[1:] != v[:-1]]))
    unbalanced = starts[np.add.reduceat(sign[order], starts) != 0]
    return np.unique(keys[order][unbalanced])


def touched(old: Signature, new: Signature) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(present, text, attrs)``: the distinct element keys of either side, those whose
    elements' own text differs between the two, and those whose attributes differ."""
    present = np.union1d(_unique_sorted(old.keys), _unique_sorted(new.keys))
    if old.content_hash == new.content_hash:
        empty = np.zeros(0, _U64)
        return present, empty, empty
    text = _differing_keys(old.keys, old.texts, new.keys, new.texts)
    attrs = _differing_keys(old.keys, old.attrs, new.keys, new.attrs)
    return present, text, attrs


@dataclass
class SectionStats:
    """What the confirmation pairs of one section showed, per element key."""

    section: str
    pairs: int = 0
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, _U64))
    present: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    text: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    attrs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    _ignore: Ignore | None = field(default=None, repr=False)

    #: a key is volatile when its text (attributes) differed in at least this share of
    #: the pairs it was in: a counter may repeat a value, a rotation a pick
    VOLATILE_SHARE = 0.5

    def add(self, present: np.ndarray, text: np.ndarray, attrs: np.ndarray) -> None:
        """Fold in one confirmation pair's :func:`touched` keys."""
        keys = np.union1d(self.keys, present)
        counts = []
        for mine, theirs in (
            (self.present, present),
            (self.text, text),
            (self.attrs, attrs),
        ):
            grown = np.zeros(keys.size, np.uint32)
            grown[np.searchsorted(keys, self.keys)] = mine
            grown[np.searchsorted(keys, theirs)] += 1
            counts.append(grown)
        self.keys, (self.present, self.text, self.attrs) = keys, counts
        self.pairs += 1
        self._ignore = None

    def ignore(self) -> Ignore:
        """The keys to leave out when comparing two visits of a page of this section."""
        if self._ignore is None:
            share = self.VOLATILE_SHARE
            present = np.maximum(self.present, 1)
            text = self.keys[(self.text > 0) & (self.text >= share * present)]
            attrs = self.keys[(self.attrs > 0) & (self.attrs >= share * present)]
            self._ignore = Ignore(text, np.setdiff1d(attrs, text))
        return self._ignore

    def knows(self, keys: np.ndarray) -> bool:
        """Whether every one of ``keys`` was in at least one pair."""
        return bool(np.isin(keys, self.keys, assume_unique=True).all())

    # -- bytes (side storage; no pickle) ---------------------------------------

    _MAGIC = b"RCBP"
    _VERSION = 1

    def to_bytes(self) -> bytes:
        name = self.section.encode("utf-8")
        return b"".join(
            [
                struct.pack("<4sBH", self._MAGIC, self._VERSION, len(name)),
                name,
                struct.pack("<II", self.pairs, self.keys.size),
                self.keys.astype("<u8").tobytes(),
                self.present.astype("<u4").tobytes(),
                self.text.astype("<u4").tobytes(),
                self.attrs.astype("<u4").tobytes(),
            ]
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> SectionStats:
        """Inverse of :meth:`to_bytes`; ValueError on anything else."""
        try:
            magic, version, size = struct.unpack_from("<4sBH", data, 0)
            if magic != cls._MAGIC or version != cls._VERSION:
                raise ValueError("not a boilerplate record of this version")
            pos = 7
            section = data[pos : pos + size].decode("utf-8")
            pos += size
            pairs, n = struct.unpack_from("<II", data, pos)
            pos += 8
        except (struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"unreadable boilerplate record: {exc}") from None
        if len(data) != pos + 20 * n:
            raise ValueError("truncated boilerplate record")
        keys = np.frombuffer(data, "<u8", n, pos).astype(_U64)
        pos += 8 * n
        counts = []
        for _ in range(3):
            counts.append(np.frombuffer(data, "<u4", n, pos).astype(np.uint32))
            pos += 4 * n
        if n and not (np.diff(keys) > 0).all():
            raise ValueError("boilerplate record's keys are not sorted")
        return cls(section, pairs, keys, counts[0], counts[1], counts[2])


def section_key(section: str) -> int:
    """The side-storage key of a section (a non-negative 63-bit int)."""
    return xxhash.xxh3_64_intdigest(section.encode("utf-8")) & _SIGNED63


class BoilerplateModel:
    """The learned sections of one crawl, and when to ask for another pair.

    ``pairs``: confirmation pairs wanted per section before its set is trusted (the first
    decides; more make a counter that repeated a value less likely to slip through).
    """

    def __init__(self, pairs: int = 2) -> None:
        if pairs < 1:
            raise ValueError("pairs must be >= 1")
        self.pairs = pairs
        self.sections: dict[str, SectionStats] = {}
        self._in_flight: dict[str, int] = {}
        #: the cycle each section last asked for a pair in (a template's new block asks
        #: for one at most once per cycle)
        self._asked_cycle: dict[str, int] = {}
        self.dirty: set[str] = set()
        #: per host, the union its unpaired sections use (ignore_for), until a pair lands
        self._host_union: dict[str, Ignore] = {}

    # -- what a comparison uses -------------------------------------------------

    def ignore_for(self, url: str) -> Ignore:
        """What to leave out comparing two visits of ``url``: its section's volatile keys,
        or, before its section has a pair, the union of its host's other sections'."""
        host, section = section_of(url)
        stats = self.sections.get(section)
        if stats is not None and stats.pairs:
            return stats.ignore()
        union = self._host_union.get(host)
        if union is None:  # once per host until a pair changes what is learned
            parts = [s.ignore() for s in self.sections.values() if _host_of(s.section) == host]
            union = self._host_union[host] = (
                Ignore(
                    np.unique(np.concatenate([p.text for p in parts])),
                    np.unique(np.concatenate([p.attrs for p in parts])),
                )
                if parts
                else _NOTHING
            )
        return union

    # -- when to fetch a page twice ---------------------------------------------

    def wants_pair(
        self,
        url: str,
        cycle: int,
        old: Signature | None = None,
        new: Signature | None = None,
    ) -> bool:
        """Whether to fetch ``url`` again now, to tell boilerplate from content: yes while
        its section has fewer than ``pairs`` pairs (done or in flight), so a section is
        learned at its first fetches, before any comparison; after that, when a
        comparison that read as changed (``old`` to ``new``) has changes on element keys
        no pair of the section had (a template grew a block), once per cycle. A yes
        counts the pair as in flight: call :meth:`add_pair` or :meth:`pair_failed` after.
        """
        _, section = section_of(url)
        stats = self.sections.get(section)
        done = 0 if stats is None else stats.pairs
        in_flight = self._in_flight.get(section, 0)
        if done + in_flight < self.pairs:
            want = True
        elif (
            old is None
            or new is None
            or in_flight
            or stats is None
            or self._asked_cycle.get(section) == cycle
        ):
            want = False
        else:
            _, text, attrs = touched(old, new)
            want = not stats.knows(np.union1d(text, attrs))
        if want:
            self._in_flight[section] = in_flight + 1
            self._asked_cycle[section] = cycle
        return want

    def add_pair(self, url: str, first: Signature, second: Signature) -> SectionStats:
        """Fold in the pair of two fetches of ``url`` a moment apart."""
        _, section = section_of(url)
        self._done(section)
        stats = self.sections.setdefault(section, SectionStats(section))
        stats.add(*touched(first, second))
        self.dirty.add(section)
        self._host_union.clear()
        return stats

    def pair_failed(self, url: str) -> None:
        """The second fetch of a pair failed: the section may ask again."""
        self._done(section_of(url)[1])

    def _done(self, section: str) -> None:
        left = self._in_flight.get(section, 0) - 1
        if left > 0:
            self._in_flight[section] = left
        else:
            self._in_flight.pop(section, None)

    # -- keeping it ---------------------------------------------------------------

    def records(self, only_dirty: bool = True) -> list[tuple[int, bytes]]:
        """``(side key, bytes)`` of the sections to keep (those changed since the last
        call, by default), and marks them kept."""
        names = sorted(self.dirty) if only_dirty else sorted(self.sections)
        self.dirty.clear()
        return [(section_key(n), self.sections[n].to_bytes()) for n in names]

    def load(self, items: Iterable[tuple[int, bytes]]) -> list[str]:
        """Read kept sections; returns a message per unreadable record (which is skipped:
        its section is learned again)."""
        problems = []
        for key, value in items:
            try:
                stats = SectionStats.from_bytes(value)
            except ValueError as exc:
                problems.append(f"boilerplate record {key}: {exc}")
                continue
            self.sections[stats.section] = stats
        self._host_union.clear()
        return problems

    def __iter__(self) -> Iterator[SectionStats]:
        return iter(sorted(self.sections.values(), key=lambda s: s.section))


def _host_of(section: str) -> str:
    return section.rsplit("/", 1)[0]
