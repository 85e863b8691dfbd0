"""Sitemap announcements as data: reading ``<lastmod>`` / ``<changefreq>``, the record
kept per URL, the check of an announcement against the change detector, the trust rule.

Pure (numpy and the standard library): the plug-in (plugin.py) reads and writes the
records through the store's side storage; everything that decides is here, testable
without a crawl.

One record per URL that a sitemap (or the spider's meta) told something about, kept in
the side table :data:`TABLE` as a fixed-size little-endian row (:data:`RECORD`), never a
pickle. An *announced change* is a ``lastmod`` newer than the URL's last visit; it stays
*pending* until the URL is next observed (its change-observation count ``n`` grows past
the ``n0`` kept with the announcement), and that observation *confirms* it when the
detector saw a change (``X`` grew past ``X0``), or leaves it *unconfirmed*. The trust
rule (:func:`trust`) turns the counts into a share per URL, pooled per host for URLs
with few checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime, timezone
from typing import Any

import numpy as np

#: the side table of the per-URL records (key: URL id)
TABLE = "sitemap"
#: the side table of recent cycle openings (key 1): the cycle length ``cfreq`` divides by
CLOCK_TABLE = "sitemap_clock"
#: cycle openings kept to measure the cycle length
CLOCK_KEEP = 8

#: one URL's record; ``v`` is the format's version (1), checked on read
RECORD = np.dtype(
    [
        ("v", "u1"),
        ("pending", "u1"),  # 1: an announced change not observed yet
        ("lastmod", "<f8"),  # the newest lastmod announced, unix seconds (NaN: none)
        ("period", "<f8"),  # changefreq as seconds between changes (NaN: none; inf: never)
        ("n0", "<i8"),  # the URL's n when the pending announcement was made
        ("X0", "<i8"),  # ... and its X
        ("ok", "<u4"),  # announced changes the fetch confirmed
        ("bad", "<u4"),  # ... and those it did not
    ]
)
_VERSION = 1

#: seconds between changes each changefreq word stands for (sitemaps.org). ``always``
#: (changes at every access) is taken as once a minute: more than any crawl's cycle
#: can see; ``never`` (archived) as no change at all.
CHANGEFREQ_SECONDS: dict[str, float] = {
    "always": 60.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 365.25 * 86400.0 / 12,
    "yearly": 365.25 * 86400.0,
    "never": math.inf,
}


def parse_lastmod(value: Any) -> float | None:
    """``<lastmod>`` as unix seconds, or None when it is not a date.

    A W3C datetime string (``2024-05-01``, ``2024-05-01T10:00:00+02:00``, ``...Z``,
    fractions of a second), a ``datetime`` / ``date`` or unix seconds (a number). A
    date or a datetime without a zone is UTC, as the sitemap protocol reads it.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 10:  # YYYY-MM-DD
                value = date.fromisoformat(text)
            else:
                value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp()
    return None


def parse_changefreq(value: Any) -> float | None:
    """``<changefreq>`` as seconds between changes (inf: never), or None when it is not
    one of the protocol's words."""
    if not isinstance(value, str):
        return None
    return CHANGEFREQ_SECONDS.get(value.strip().lower())


def empty_record() -> np.ndarray:
    rec = np.zeros((), dtype=RECORD)
    rec["v"] = _VERSION
    rec["lastmod"] = np.nan
    rec["period"] = np.nan
    return rec


def pack(rec: np.ndarray) -> bytes:
    return np.asarray(rec, dtype=RECORD).tobytes()


def unpack_many(values: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The records of ``values`` (a structured array) and a mask of those that were not
    records of this format (another writer, corruption): those rows are empty records."""
    size = RECORD.itemsize
    good = np.fromiter((len(v) == size for v in values), dtype=bool, count=len(values))
    out = np.empty(len(values), dtype=RECORD)
    if good.all():
        out[:] = np.frombuffer(b"".join(values), dtype=RECORD)
    else:
        for i, v in enumerate(values):
            out[i] = np.frombuffer(v, dtype=RECORD)[0] if good[i] else empty_record()
    bad = ~good | (out["v"] != _VERSION)
    out[bad] = empty_record()
    return out, bad


def announce(
    rec: np.ndarray,
    *,
    lastmod: float | None,
    period: float | None,
    n: int,
    X: int,
    last_visit_time: float,
) -> tuple[bool, bool]:
    """Fold one announcement into ``rec`` (in place) for a URL whose record now has ``n``
    observations, ``X`` changes and was last visited at ``last_visit_time``.

    Returns ``(changed, new_pending)``: whether the record changed (to write it), and
    whether this is a new announced change (a lastmod newer than the last visit, none
    pending). A pending announcement keeps its ``n0``/``X0``: the next observation
    checks it, however many times it is announced again meanwhile.
    """
    changed = new_pending = False
    if period is not None and not _same(float(rec["period"]), period):
        rec["period"] = period
        changed = True
    if lastmod is not None:
        if not _same(float(rec["lastmod"]), lastmod):
            rec["lastmod"] = lastmod
            changed = True
        if lastmod > last_visit_time and not rec["pending"]:  # NaN visit time: False
            rec["pending"] = 1
            rec["n0"] = n
            rec["X0"] = X
            changed = new_pending = True
    return changed, new_pending


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def resolve(
    recs: np.ndarray, n: np.ndarray, X: np.ndarray, last_visit_time: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Check the pending announcements of ``recs`` (in place) against each URL's current
    ``n``, ``X`` and ``last_visit_time`` (rows aligned with ``recs``).

    Returns the masks ``(confirmed, unconfirmed)`` of the rows checked now: observed
    since the announcement, with a change seen (confirmed) or not. A row whose newest
    lastmod is newer than that observation (announced again after the fetch) is pending
    anew, from the URL's current counts.
    """
    checked = (recs["pending"] == 1) & (n > recs["n0"])
    confirmed = checked & (X > recs["X0"])
    unconfirmed = checked & ~confirmed
    recs["ok"] += confirmed.astype(np.uint32)
    recs["bad"] += unconfirmed.astype(np.uint32)
    recs["pending"][checked] = 0
    again = checked & (recs["lastmod"] > last_visit_time)
    recs["pending"][again] = 1
    recs["n0"][again] = n[again]
    recs["X0"][again] = X[again]
    return confirmed, unconfirmed


def trust(ok: np.ndarray, bad: np.ndarray, hosts: np.ndarray, *, checks: int) -> np.ndarray:
    """The share of each URL's announced changes that its fetches confirmed: its own once
    it has ``checks`` checked ones; before that its host's (``hosts``: a code per row),
    pooled over every row of the host, once the host has ``checks``; before that 1.0
    (nothing against it yet)."""
    ok = ok.astype(np.float64)
    done = ok + bad.astype(np.float64)
    out = np.ones(len(ok))
    if len(ok) == 0:
        return out
    codes = np.asarray(hosts, dtype=np.int64)
    host_ok = np.bincount(codes, weights=ok)
    host_done = np.bincount(codes, weights=done)
    pooled = host_done[codes] >= checks
    out[pooled] = host_ok[codes][pooled] / host_done[codes][pooled]
    own = done >= checks
    out[own] = ok[own] / done[own]
    return out


def cycle_seconds(clock: np.ndarray, default: float) -> float:
    """The crawl's cycle length from its recent openings (``clock``: rows of (cycle,
    time)): the time between the first and the last kept opening over the cycles
    between them; ``default`` (RECRAWL_CYCLE_SECONDS) until two openings are known."""
    if len(clock) < 2:
        return default
    cycles = clock[-1, 0] - clock[0, 0]
    seconds = clock[-1, 1] - clock[0, 1]
    if cycles <= 0 or not seconds > 0:
        return default
    return float(seconds / cycles)


def rate_per_cycle(period: np.ndarray, seconds: float) -> np.ndarray:
    """Changes per cycle a changefreq announces: the cycle length over its period (0 for
    never, NaN where none was announced)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return seconds / period
