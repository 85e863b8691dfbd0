"""What a page's Last-Modified says before its first fetch, for the freshness estimate.

A page fetched once says nothing about how often it changes, unless its server says
when it last changed. ``Last-Modified`` read against the same response's ``Date``
(one server's clock for both: no skew with ours) gives the page's age at its first
fetch: it changed then and not since (scoring/freshness.py, "Before the first
fetch"). Cycles are the estimate's clock, so the age in seconds is turned into cycles
with the server's own seconds per cycle, measured from the ``Date`` of its responses
in the cycles it was fetched in (a simulated site's clock is as good as a real one's).

Kept in the store's side storage (history/base.py), so both backends and every
process share it:

* :data:`TABLE`: per URL id, the age at its first good fetch and that response's
  ``Date`` (``{"age": seconds, "date": epoch}``), written once;
* :data:`CLOCK_TABLE`: per host (:func:`host_key`), its ``Date`` at the first
  response of each cycle, the newest :data:`CLOCK_KEEP` (``{"c": cycle, "d": epoch}``);
* :data:`START_TABLE`: per host, its ``Date`` at the first response the crawl ever
  had from it (``{"c": cycle, "d": epoch}``), written once.

**Only dates from before the crawl began are read as ages** (:func:`prior_ages`):
what changed since, the crawl's own visits see. And a page made after the crawl
began (a news article) carries its creation date, which is no change: read as one, a
host whose new pages are found a few days late would look as if every page changed
days before its first fetch. Such a page is marked (:data:`SINCE_START`) instead:
it shows the host makes pages, so that its older pages' dates may be creations too
(the creation hazard in scoring/freshness.py).

Not kept: a date that does not parse, one later than the response's ``Date`` (a
server that says so is not to be believed), and one within :data:`MIN_AGE_SECONDS` of
it (a page stamped with the time it was rendered: that is no change, only a clock).
The middleware notes responses in a per-crawler tally (:func:`tally_for_crawler`);
the scheduler writes it at each cycle's end (:func:`keep`), as for hubs.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Sequence
from email.utils import parsedate_to_datetime
from typing import Any

import numpy as np

from .change.boilerplate import section_key
from .core.groups import group_key, group_keys
from .history.records import RecordError, pack_list, pack_record, unpack_list, unpack_record
from .runtime import CrawlerRuntime

logger = logging.getLogger("scrapy_recrawl.last_modified")

#: side table of the URLs' Last-Modified ages at their first fetch
TABLE = "last_modified"
#: side table of each host's Date per cycle
CLOCK_TABLE = "server_clock"
#: side table of each host's Date at the crawl's first response from it
START_TABLE = "server_start"
#: cycles of a host's clock kept
CLOCK_KEEP = 64
#: a Last-Modified closer than this to the response's Date is a render time, not a change
MIN_AGE_SECONDS = 60.0
#: :func:`prior_ages`'s value for a page dated after the crawl began (no age)
SINCE_START = -np.inf


def _epoch(value: bytes | str | None) -> float | None:
    return None if value is None else _cached_epoch(value)


def _parsed_epoch(value: bytes | str) -> float | None:
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    try:
        when = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a bare one is read as such
        return when.replace(tzinfo=dt.timezone.utc).timestamp()
    return when.timestamp()


# Every good response's Date is read, and a first fetch's Last-Modified too: the same few
# values come again and again (a server's clock moves once a second, many pages share a
# Last-Modified), and email.utils parses one in about 10 µs
_cached_epoch = functools.lru_cache(maxsize=512)(_parsed_epoch)


def server_date(headers: Any) -> float | None:
    """The response's ``Date`` (POSIX seconds), None when absent or unreadable."""
    return _epoch(headers.get(b"Date") if headers is not None else None)


def modified_age(headers: Any) -> float | None:
    """Seconds from the response's ``Last-Modified`` to its ``Date``; None when either
    is missing or unreadable, the first is later than the second, or closer to it
    than :data:`MIN_AGE_SECONDS` (module docstring)."""
    if headers is None:
        return None
    return _age(server_date(headers), headers)


def _age(date: float | None, headers: Any) -> float | None:
    modified = _epoch(headers.get(b"Last-Modified"))
    if date is None or modified is None:
        return None
    age = date - modified
    return age if age >= MIN_AGE_SECONDS else None


def host_key(host: str) -> int:
    """The side-storage key of a host (:func:`~scrapy_recrawl.core.groups.group_key`'s
    group of a URL)."""
    return section_key(host)


class LastModifiedTally:
    """This process's notes since the last :func:`keep`."""

    def __init__(self) -> None:
        self.ages: dict[int, tuple[float, float]] = {}  # URL id -> (age, Date)
        self.clock: dict[tuple[str, int], float] = {}  # (host, cycle) -> first Date seen

    def fetched(self, url_id: int, url: str, cycle: int, headers: Any, first: bool) -> None:
        """A good response (200) of ``url`` in ``cycle``; ``first``: its first good fetch."""
        key = (group_key(url), int(cycle))
        if key in self.clock and not first:
            return  # the host's clock is read once a cycle: nothing else to read here
        date = server_date(headers)
        if date is None:
            return
        self.clock.setdefault(key, date)
        if first:
            age = _age(date, headers)
            if age is not None:
                self.ages[int(url_id)] = (age, date)

    def drain(self) -> tuple[dict[int, tuple[float, float]], dict[tuple[str, int], float]]:
        out = (self.ages, self.clock)
        self.ages, self.clock = {}, {}
        return out


def tally_for_crawler(crawler: Any) -> LastModifiedTally:
    """The one Last-Modified tally of this crawler (kept by its runtime: runtime.py)."""
    return CrawlerRuntime.of(crawler).part(LastModifiedTally)


def keep(store: Any, tally: LastModifiedTally) -> int:
    """Write this process's notes to the store; returns the ages written."""
    ages, clock = tally.drain()
    if ages:
        items = sorted(ages.items())
        store.side_put(
            TABLE, [(i, pack_record({"age": float(a), "date": float(d)})) for i, (a, d) in items]
        )
    first: dict[int, tuple[int, float]] = {}
    for (host, cycle), date in sorted(clock.items()):
        key = host_key(host)
        store.side_push(CLOCK_TABLE, key, pack_record({"c": cycle, "d": float(date)}), CLOCK_KEEP)
        first.setdefault(key, (cycle, date))
    if first:
        keys = sorted(first)
        known = store.side_get(START_TABLE, keys)
        new = [(k, pack_record({"c": first[k][0], "d": float(first[k][1])}))
               for k, had in zip(keys, known, strict=True) if had is None]  # fmt: skip
        if new:
            store.side_put(START_TABLE, new)
    return len(ages)


def seconds_per_cycle(samples: Sequence[tuple[int, float]], up_to: int) -> float | None:
    """A server's seconds per cycle from its ``(cycle, Date)`` samples of cycles up to
    ``up_to``: the slope between the earliest and the latest cycle (None: one cycle
    only, or a clock that did not move on)."""
    kept = [(c, d) for c, d in samples if c <= up_to]
    if not kept:
        return None
    c0 = min(c for c, _ in kept)
    c1 = max(c for c, _ in kept)
    if c1 <= c0:
        return None
    d0 = min(d for c, d in kept if c == c0)
    d1 = min(d for c, d in kept if c == c1)
    rate = (d1 - d0) / (c1 - c0)
    return rate if rate > 0 else None


def _samples(data: bytes | None) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    try:
        items = unpack_list(data)
    except RecordError:
        return out
    for item in items:
        try:
            rec = unpack_record(item)
            out.append((int(rec["c"]), float(rec["d"])))  # type: ignore[arg-type]
        except (RecordError, KeyError, TypeError, ValueError):
            continue  # a sample another version wrote: not ours to read
    return out


def prior_ages(store: Any, ids: np.ndarray, urls: Sequence[str], up_to: int) -> np.ndarray:
    """Per URL id, its Last-Modified age at its first fetch in cycles of its server's
    clock as of cycle ``up_to`` (NaN: none kept, or the server's clock not yet known;
    :data:`SINCE_START`: a date from after the crawl's first response from the host)."""
    return PriorAges(store)(ids, urls, up_to)


class PriorAges:
    """:func:`prior_ages` for one reader of a store that does not change while it reads
    (recrawl-report: one estimate per cycle, each over a sample of the URLs): each
    URL's record, its host and each host's clocks are read from the side storage once,
    the first time they are asked for; each call applies the clocks as of its cycle.
    Not for a running crawl, whose side tables grow between cycles (new ages, new
    clock samples, new hosts): it reads them afresh each cycle (:func:`prior_ages`)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._records: dict[int, tuple[float, float] | None] = {}  # id -> (age, date)
        self._hosts: dict[int, str] = {}  # id -> host (of the ids with a record)
        # host -> its (cycle, Date) samples and its first response's (None: not kept)
        self._clocks: dict[str, tuple[list[tuple[int, float]], tuple[int, float] | None]] = {}

    def __call__(self, ids: np.ndarray, urls: Sequence[str], up_to: int) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.full(ids.size, np.nan)
        if not ids.size:
            return out
        wanted = ids.tolist()
        self._read_records([i for i in dict.fromkeys(wanted) if i not in self._records])
        have = [k for k, i in enumerate(wanted) if self._records[i] is not None]
        if not have:
            return out
        new = [k for k in have if wanted[k] not in self._hosts]
        for k, host in zip(new, group_keys([urls[k] for k in new]), strict=True):
            self._hosts[wanted[k]] = host
        names = sorted({self._hosts[wanted[k]] for k in have})
        self._read_clocks([h for h in names if h not in self._clocks])
        per_cycle: dict[str, float | None] = {}
        began: dict[str, float] = {}
        for host in names:
            samples, start = self._clocks[host]
            per_cycle[host] = seconds_per_cycle(samples, up_to)
            if start is not None and start[0] <= up_to:
                began[host] = start[1]
        for k in have:
            host = self._hosts[wanted[k]]
            seconds = per_cycle.get(host)
            if seconds is None or host not in began:
                continue
            age, date = self._records[wanted[k]]  # type: ignore[misc]
            if date - age < began[host]:  # a date from before the crawl began (docstring)
                out[k] = age / seconds
            else:  # a page made (or changed) since: the host makes pages (docstring)
                out[k] = SINCE_START
        return out

    def _read_records(self, ids: list[int]) -> None:
        if not ids:
            return
        for i, data in zip(ids, self.store.side_get(TABLE, ids), strict=True):
            record: tuple[float, float] | None = None
            if data is not None:
                try:
                    rec = unpack_record(data)
                    record = float(rec["age"]), float(rec["date"])  # type: ignore[arg-type]
                except (RecordError, KeyError, TypeError, ValueError):
                    record = None  # another version's record: not ours to read
            self._records[i] = record

    def _read_clocks(self, hosts: list[str]) -> None:
        if not hosts:
            return
        keys = [host_key(h) for h in hosts]
        clocks = self.store.side_get(CLOCK_TABLE, keys)
        starts = self.store.side_get(START_TABLE, keys)
        for host, data, start in zip(hosts, clocks, starts, strict=True):
            first = _samples(pack_list([start])) if start is not None else []
            self._clocks[host] = (_samples(data), first[0] if first else None)
