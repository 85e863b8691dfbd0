"""The ground truth of the reference site: each page's real-content versions, day by day.

Why it is computed and not declared: a page's version changes exactly when the hash of
its real content (its template with the boilerplate slots blanked, see
``boilerplate.canonical``) differs from the day before. That covers the obvious changes
(a price, a correction) and the derived ones (a category listing a changed price, a
listing shifted by a new article, the "Older" link that appears with a new listing
page) without a second model that could disagree with what is served.

Day ``0`` is the initial state; changes happen at day boundaries, so everything served
during day ``d`` is version ``version(d)``. A page is live on the days of its
``live`` intervals (``[start, end)``, ``end`` None: still live); ``created`` is the first
start, ``removed`` the last end (None while live).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .boilerplate import canonical
from .model import Page, content_hash

__all__ = ["ContentHistory", "PageTruth", "Served"]


@dataclass(frozen=True)
class PageTruth:
    """One page's history: when it existed and on which days its real content changed."""

    path: str
    section: str  # "shop", "news"
    kind: str  # "home", "category", "product", "index", "listing", "article"
    validators: str  # "etag", "lm", "none"
    live: tuple[tuple[int, int | None], ...]  # [start, end) day intervals
    changes: tuple[int, ...]  # days on which the real content changed (not creation)
    meta: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def created(self) -> int:
        return self.live[0][0]

    @property
    def removed(self) -> int | None:
        return self.live[-1][1]

    def is_live(self, day: int) -> bool:
        return any(s <= day and (e is None or day < e) for s, e in self.live)

    def version(self, day: int) -> int | None:
        """The real-content version served on ``day`` (0: as created); None: not live."""
        if not self.is_live(day):
            return None
        return bisect.bisect_right(self.changes, day)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "section": self.section,
            "kind": self.kind,
            "validators": self.validators,
            "created": self.created,
            "removed": self.removed,
            "live": [list(iv) for iv in self.live],
            "changes": list(self.changes),
            **self.meta,
        }

    @classmethod
    def from_json(cls, row: dict) -> PageTruth:
        known = {"path", "section", "kind", "validators", "created", "removed", "live", "changes"}
        return cls(
            path=row["path"],
            section=row["section"],
            kind=row["kind"],
            validators=row["validators"],
            live=tuple((int(s), None if e is None else int(e)) for s, e in row["live"]),
            changes=tuple(int(d) for d in row["changes"]),
            meta={k: v for k, v in row.items() if k not in known},
        )


@dataclass(frozen=True)
class Served:
    """One response of the site: the served log's row."""

    url: str  # the request target as received (path and query)
    path: str  # the page it names (query dropped: session ids do not name pages)
    day: int
    time: float  # real time (time.time())
    status: int  # 200, 304, 404, 410
    version: int | None  # the real-content version served (or confirmed by a 304)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "path": self.path,
            "day": self.day,
            "time": self.time,
            "status": self.status,
            "version": self.version,
        }


@dataclass
class _Record:
    section: str
    kind: str
    validators: str
    live: list[list[int | None]]
    changes: list[int]
    last_hash: str


class ContentHistory:
    """Every page's versions, computed day by day from content hashes, incrementally.

    ``paths(day)`` lists the live (section, path) pairs of a day and ``page(path, day)``
    renders one; :meth:`ensure` plays the days not yet played.
    """

    def __init__(
        self,
        paths: Callable[[int], Iterable[tuple[str, str]]],
        page: Callable[[str, int], Page | None],
        meta: Callable[[str], dict[str, object]],
    ) -> None:
        self._paths = paths
        self._page = page
        self._meta = meta
        self._records: dict[str, _Record] = {}
        self._day = -1  # the last day played
        self._lock = threading.Lock()

    def ensure(self, day: int) -> None:
        """Play every day up to ``day``."""
        with self._lock:
            while self._day < day:
                self._day += 1
                self._play(self._day)

    def _play(self, d: int) -> None:
        seen = set()
        for section, path in self._paths(d):
            page = self._page(path, d)
            if page is None or page.status != 200:
                raise AssertionError(f"{path} is listed live on day {d} but answers {page}")
            h = content_hash(canonical(page.template))
            seen.add(path)
            rec = self._records.get(path)
            if rec is None:
                self._records[path] = _Record(
                    section, page.kind, page.validators, [[d, None]], [], h
                )
                continue
            if rec.live[-1][1] is not None:  # back after a removal
                rec.live.append([d, None])
            if h != rec.last_hash:
                rec.changes.append(d)
                rec.last_hash = h
        for path, rec in self._records.items():
            if path not in seen and rec.live[-1][1] is None:
                rec.live[-1][1] = d

    def truth(self, path: str, up_to: int) -> PageTruth | None:
        """``path``'s history as known at the end of day ``up_to`` (None: not yet seen)."""
        self.ensure(up_to)
        with self._lock:
            rec = self._records.get(path)
            if rec is None:
                return None
            live: list[tuple[int, int | None]] = []
            for s, e in rec.live:
                assert s is not None
                if s > up_to:
                    break
                live.append((s, e if e is not None and e <= up_to else None))
            if not live:
                return None
            changes = tuple(c for c in rec.changes if c <= up_to)
            kind, section, validators = rec.kind, rec.section, rec.validators
        return PageTruth(path, section, kind, validators, tuple(live), changes, self._meta(path))

    def all(self, up_to: int) -> dict[str, PageTruth]:
        """Every page seen up to day ``up_to``, by path (sorted)."""
        self.ensure(up_to)
        with self._lock:
            paths = sorted(self._records)
        out = {}
        for p in paths:
            t = self.truth(p, up_to)
            if t is not None:
                out[p] = t
        return out
