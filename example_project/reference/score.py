"""Score a crawl of the reference site against its truth: detection, freshness, new pages.

Why here and not in scrapy_recrawl: the truth belongs to the site; the package must
never need it. Tests and benchmarks feed these functions the site's truth
(``ReferenceSite.changes()`` in process, or :func:`truth_from_doc` of
``GET /_truth/changes``) and the crawl's visits (:func:`visits_from_store` reads a
store's visit log; :func:`visits_from_served` the site's served log). All functions
are pure.

Definitions (``version(path, day)`` is the page's real-content version, ``truth.py``):

* A visit is a fetch when its status is 200 or 304 (a 304 confirms the current
  version) and the page is live that day. A fetch is **truly changed** iff the page's
  version differs from the version at that URL's previous fetch.
* **Detection**: over fetches that have a previous fetch and a verdict (``changed``
  not None), precision = flagged-and-truly-changed / flagged, recall =
  flagged-and-truly-changed / truly changed (None when the denominator is 0).
* **True freshness** at the end of day ``d``: of the *known* pages (fetched at least
  once by day ``d``, live on ``d``), the share whose last fetched version is their
  version on ``d``. None when no page is known.
* **The chance floor** of a freshness estimate: :func:`expected_freshness_by_day`, the
  share an estimator would give that knew each page's change process exactly (the
  site's model, ``ReferenceSite.unchanged_chance``) and the crawl's fetches, but not
  the draws. Its error against the true freshness is chance alone: no estimate from
  the crawl's observations is expected to do better.
* **New-page latency**: for each page created after day ``after`` (and by
  ``up_to``), its first fetch day minus its creation day; the pages never fetched by
  ``up_to`` are listed apart.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .truth import PageTruth, Served

__all__ = [
    "FETCH_STATUSES",
    "Detection",
    "Latency",
    "Visit",
    "detection",
    "expected_freshness_by_day",
    "freshness_by_day",
    "new_page_latency",
    "page_path",
    "true_freshness",
    "truth_from_doc",
    "visits_from_served",
    "visits_from_store",
]

#: Statuses under which a live page delivered (or confirmed) its content.
FETCH_STATUSES = (200, 304)

Truth = Mapping[str, PageTruth]


@dataclass(frozen=True)
class Visit:
    """One visit of the crawler: which URL, on which site day, its status and verdict."""

    url: str  # a full URL or a path; the query (session ids) is ignored
    day: int
    changed: bool | None = None  # the crawler's verdict (None: not an observation)
    status: int = 200


@dataclass(frozen=True)
class Detection:
    tp: int  # flagged changed, truly changed
    fp: int  # flagged changed, truly unchanged
    fn: int  # flagged unchanged, truly changed
    tn: int  # flagged unchanged, truly unchanged
    unjudged: int  # refetches without a verdict (changed None)

    @property
    def compared(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


@dataclass(frozen=True)
class Latency:
    latency: dict[str, int]  # path -> first fetch day minus creation day
    never: list[str]  # new pages never fetched by ``up_to``

    @property
    def mean(self) -> float | None:
        return sum(self.latency.values()) / len(self.latency) if self.latency else None

    @property
    def max(self) -> int | None:
        return max(self.latency.values()) if self.latency else None


def page_path(url: str) -> str:
    """The truth's key of a URL: its path (``http://h:1/shop/product/3?sid=x`` ->
    ``/shop/product/3``)."""
    return urlsplit(url).path or "/"


def _keep(t: PageTruth, kinds: Collection[str] | None, sections: Collection[str] | None) -> bool:
    return (kinds is None or t.kind in kinds) and (sections is None or t.section in sections)


def _fetches(truth: Truth, visits: Iterable[Visit]) -> Iterable[tuple[Visit, str, int]]:
    """(visit, path, version) for each visit that is a fetch of a live truth page,
    in day order (stable within a day)."""
    for v in sorted(visits, key=lambda v: v.day):
        if v.status not in FETCH_STATUSES:
            continue
        path = page_path(v.url)
        t = truth.get(path)
        version = None if t is None else t.version(v.day)
        if version is not None:
            yield v, path, version


def detection(
    truth: Truth,
    visits: Iterable[Visit],
    *,
    from_day: int = 0,
    kinds: Collection[str] | None = None,
    sections: Collection[str] | None = None,
) -> Detection:
    """Precision/recall of the visits' ``changed`` verdicts against the truth, over the
    visits on days ``>= from_day`` of pages of the given ``kinds`` (e.g.
    ``{"product", "category"}``; None: all) and ``sections`` (``{"shop"}``; None: all).
    Earlier visits still set the previous version."""
    last: dict[str, int] = {}
    tp = fp = fn = tn = unjudged = 0
    for v, path, version in _fetches(truth, visits):
        prev = last.get(path)
        last[path] = version
        if prev is None or v.day < from_day:
            continue
        if not _keep(truth[path], kinds, sections):
            continue
        if v.changed is None:
            unjudged += 1
            continue
        really = version != prev
        if v.changed:
            tp += really
            fp += not really
        else:
            fn += really
            tn += not really
    return Detection(tp, fp, fn, tn, unjudged)


def _held_by_day(
    truth: Truth, visits: Iterable[Visit], days: Iterable[int]
) -> Iterator[tuple[int, dict[str, tuple[int, int]]]]:
    """For each of ``days`` in order, the known pages at its end (fetched by then, live
    that day): path -> (the version of its last fetch, the day of that fetch). The one
    walk behind :func:`freshness_by_day` and :func:`expected_freshness_by_day`."""
    fetches = list(_fetches(truth, visits))
    held: dict[str, tuple[int, int]] = {}
    k = 0
    for d in sorted(days):
        while k < len(fetches) and fetches[k][0].day <= d:
            v, path, version = fetches[k]
            held[path] = (version, v.day)
            k += 1
        yield d, {p: h for p, h in held.items() if truth[p].version(d) is not None}


def expected_freshness_by_day(
    unchanged_chance: Callable[[str, int, int], float | None],
    truth: Truth,
    visits: Iterable[Visit],
    days: Iterable[int],
) -> dict[int, float | None]:
    """The chance floor's figure at the end of each of ``days`` (module docstring): over
    the same known pages as :func:`freshness_by_day`, the mean of
    ``unchanged_chance(path, day of its last fetch, day)``. None when no page is known
    or the model does not describe one of them."""
    out: dict[int, float | None] = {}
    for d, known in _held_by_day(truth, visits, days):
        chances = [unchanged_chance(path, since, d) for path, (_, since) in known.items()]
        ok = bool(chances) and None not in chances
        out[d] = sum(chances) / len(chances) if ok else None  # type: ignore[arg-type]
    return out


def freshness_by_day(
    truth: Truth,
    visits: Iterable[Visit],
    days: Iterable[int],
    *,
    kinds: Collection[str] | None = None,
    sections: Collection[str] | None = None,
) -> dict[int, float | None]:
    """The true freshness of the known pages at the end of each of ``days`` (``kinds``,
    ``sections``: only those pages count)."""
    out: dict[int, float | None] = {}
    for d, known in _held_by_day(truth, visits, days):
        kept = [
            (truth[p].version(d), v)
            for p, (v, _) in known.items()
            if _keep(truth[p], kinds, sections)
        ]
        out[d] = sum(now == v for now, v in kept) / len(kept) if kept else None
    return out


def true_freshness(
    truth: Truth,
    visits: Iterable[Visit],
    day: int,
    *,
    kinds: Collection[str] | None = None,
    sections: Collection[str] | None = None,
) -> float | None:
    """The true freshness of the known pages at the end of ``day``."""
    return freshness_by_day(truth, visits, [day], kinds=kinds, sections=sections)[day]


def new_page_latency(
    truth: Truth,
    visits: Iterable[Visit],
    *,
    up_to: int,
    after: int = 0,
    kinds: Collection[str] | None = None,
    sections: Collection[str] | None = None,
) -> Latency:
    """Fetch latency in days of the pages created on days ``after+1 .. up_to``."""
    first: dict[str, int] = {}
    for v, path, _ in _fetches(truth, visits):
        if v.day <= up_to:
            first.setdefault(path, v.day)
    latency: dict[str, int] = {}
    never: list[str] = []
    for path, t in truth.items():
        if not after < t.created <= up_to or not _keep(t, kinds, sections):
            continue
        if path in first:
            latency[path] = first[path] - t.created
        else:
            never.append(path)
    return Latency(latency, sorted(never))


def truth_from_doc(doc: Mapping[str, Any]) -> dict[str, PageTruth]:
    """The truth from ``GET /_truth/changes``'s JSON, as ``ReferenceSite.changes()``."""
    return {row["path"]: PageTruth.from_json(row) for row in doc["pages"]}


def visits_from_served(served: Iterable[Served | Mapping[str, Any]]) -> list[Visit]:
    """The site's served log as visits (no verdicts): for freshness and latency."""
    out = []
    for s in served:
        row: Mapping[str, Any] = s.to_json() if isinstance(s, Served) else s
        out.append(Visit(str(row["url"]), int(row["day"]), None, int(row["status"])))
    return out


def visits_from_store(
    store: Any, day_of_cycle: Callable[[int], int] = lambda c: c - 1
) -> list[Visit]:
    """The visits of a scrapy-recrawl store (``HistoryStore.visit_log``) with their
    verdicts; ``day_of_cycle`` maps a crawl cycle to the site's day (default: cycle 1
    was day 0, one ``POST /_admin/advance`` after each cycle)."""
    log = store.visit_log()
    ids = log["url_id"]
    uids = sorted(set(ids.tolist()))
    urls = dict(zip(uids, store.urls(uids), strict=True))
    out = []
    for uid, cycle, status, changed in zip(
        ids.tolist(),
        log["cycle"].tolist(),
        log["status"].tolist(),
        log["changed"].tolist(),
        strict=True,
    ):
        verdict = None if changed < 0 else bool(changed)
        out.append(Visit(urls[uid], day_of_cycle(int(cycle)), verdict, int(status)))
    return out
