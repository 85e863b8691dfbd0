"""What each cycle did, kept in the store's side storage: the crawl writes it, the
report (``scrapy recrawl-report``) reads it.

Side tables of plain records (:mod:`.records`, never pickles), keyed by cycle:

* ``cycle_plan``: what the cycle was planned to do, written once by whoever opened
  the cycle (one process; under the lock on Redis): its budget, the scorer, how many
  URLs were scored, the cut-off (the lowest score among the picked recrawls) and the
  picked URLs with their score, best first (rank = position), and the monitoring
  sample's membership (the share and seed of ``core.selection.monitor_mask``: which
  ids were in it, exactly, without a row per id; :func:`monitor_samples`). Picks are
  kept for the last :data:`KEEP_PICK_CYCLES` cycles only and at most
  :data:`MAX_PICKS` a cycle, so the table stays small whatever the crawl's length.
* ``cycle_log``: what was fetched, one summary per process and cycle, pushed with
  :meth:`HistoryStore.side_push` (atomic: many processes add to the same cycle);
  :func:`cycle_records` adds them up;
* ``start_urls``: the ids of the URLs the spider fetched as its start requests, so the
  report does not count them as budget wasted (:func:`start_url_ids`);
* ``cycle_freshness`` (schema version 8): the crawl's own freshness estimate of the
  known pages at a cycle's end (``recrawl/freshness_estimate``, its 90% interval and
  the pages it is over), written once by the process opening the next cycle, which
  computes it there (cycle_summary.py); the report reads it instead of refitting it
  (:func:`recorded_freshness`). A value that is not a share (non-finite, outside
  [0, 1], the interval not around it) is read as absent, with a warning: the report
  then computes that cycle's figure from the visit log, as for a cycle of an older
  crawl, which has none.

Side storage takes any table, and a reader takes a missing field's default and
ignores one it does not know, so an older reader reads a newer store's records. The
freshness table is a step of the schema-version sequence all the same (version 8:
history/sqlite_schema.py ``_migrate_7_to_8``): the report now shows a figure the store
holds instead of one it computes, so which stores may hold it is versioned; the step
moves nothing (cycles crawled before it have no estimate kept, and the report computes
theirs). A store without these tables has no per-cycle record (older crawls): readers
say so.
"""

from __future__ import annotations

import logging
import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

import numpy as np

from .records import RecordError, pack_record, unpack_list, unpack_record

logger = logging.getLogger("scrapy_recrawl.history")

PLAN_TABLE = "cycle_plan"
LOG_TABLE = "cycle_log"
#: the URL ids the spider fetched as its start requests (key: the id, value empty):
#: fetched every cycle on the spider's say-so, never the budget's waste
START_TABLE = "start_urls"
#: the crawl's freshness estimate of each cycle's end (key: that cycle; schema version 8)
FRESHNESS_TABLE = "cycle_freshness"
#: picks (URL ids and scores) are kept for this many of the latest cycles
KEEP_PICK_CYCLES = 8
#: and at most this many a cycle (the best ones): 1.6 MB a cycle at the most
MAX_PICKS = 100_000
#: summaries kept per cycle (one per process that fetched in it)
MAX_SUMMARIES = 256

#: the counters of a cycle summary, added up over processes
COUNTS = (
    "recrawl",  # fetched: the cycle's scored recrawls
    "new",  # fetched: URLs never fetched before
    "monitor",  # fetched: the monitoring sample
    "probe",  # fetched: loop-time probes
    "start",  # fetched outside the budget: the spider's start (and dont_filter) requests
    "changed",
    "unchanged",
    "not_modified",  # 304s (an unchanged observation when a copy is kept)
    "errors",  # 5xx, other 4xx, download errors
    "failed",  # downloads with no response (back-off counted)
    "gone",  # marked gone in this cycle (404/410, or failures)
)


@dataclass
class CyclePlan:
    cycle: int
    planned_at: float
    budget: int
    scorer: str
    candidates: int  # URLs scored
    cutoff: float | None  # lowest score among the picked recrawls (None: none scored)
    picks: int  # recrawls picked
    #: new URLs waiting from earlier cycles when the cycle opened (0 in older records)
    backlog: int = 0
    #: the new URLs' share of the budget's pages (core/budget.py: new_pages)
    new_share: int = 0
    #: the monitoring sample, fetched on top of the budget
    monitor: int = 0
    #: the sample's rule: ``monitor_mask(ids, monitor_share, monitor_seed)`` (a share of
    #: 0: no sample that cycle); ``monitor_seed`` None: not recorded (an older crawl)
    monitor_share: float = 0.0
    monitor_seed: int | None = None


@dataclass
class CycleSummary:
    """One process's figures for one cycle (or, from :func:`cycle_records`, all of them)."""

    cycle: int
    started: float
    ended: float
    recrawl: int = 0
    new: int = 0
    monitor: int = 0
    probe: int = 0
    changed: int = 0
    unchanged: int = 0
    not_modified: int = 0
    errors: int = 0
    failed: int = 0
    gone: int = 0
    start: int = 0
    #: new URLs left waiting for a later cycle when the cycle ended for the process (the
    #: store's frontier and the cycle's queues); not added up over processes: the largest
    backlog: int = 0

    @property
    def fetched(self) -> int:
        """Every visit: the budget's and those outside it (monitoring sample, start)."""
        return self.recrawl + self.new + self.monitor + self.probe + self.start

    @property
    def budgeted(self) -> int:
        """The visits the budget paid for: recrawls, new URLs and probes."""
        return self.recrawl + self.new + self.probe


@dataclass
class CycleFreshness:
    """The crawl's freshness estimate of the known pages at the end of ``cycle``
    (scoring/freshness.py :class:`~scrapy_recrawl.scoring.freshness.FreshnessEstimate`,
    unrounded): the share, its 90% interval, and the pages it is over."""

    cycle: int
    share: float
    low: float
    high: float
    pages: int


@dataclass
class CycleRecord:
    """A cycle as the report shows it: its plan (None: not kept) and its figures."""

    cycle: int
    plan: CyclePlan | None
    summary: CycleSummary | None
    processes: int  # summaries added up


#: What a field's annotation (a string: ``from __future__ import annotations``) allows,
#: by its first word, and how a value that is not one is named.
_KINDS: dict[str, tuple[Any, str]] = {
    "int": (int, "an int"),
    "str": (str, "a str"),
    "float": ((int, float), "a number"),
}


def _from_record(cls: Any, data: bytes) -> Any:
    raw = unpack_record(data)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in raw:
            if f.default is not MISSING:  # a field added since the record was written
                kwargs[f.name] = f.default
                continue
            raise RecordError(f"a {cls.__name__} record without {f.name!r}")
        value = raw[f.name]
        kind, _, optional = f.type.partition(" | ")  # "float | None"
        types, named = _KINDS[kind]
        if value is None:
            if optional != "None":
                raise RecordError(f"{cls.__name__}.{f.name} is None")
        elif isinstance(value, float) and not math.isfinite(value):
            raise RecordError(f"{cls.__name__}.{f.name} is {value}")
        elif not isinstance(value, types):
            raise RecordError(f"{cls.__name__}.{f.name} is not {named}")
        kwargs[f.name] = value
    return cls(**kwargs)


# -- writing (the crawl) -------------------------------------------------------------


def save_plan(
    store: Any, plan: CyclePlan, ids: np.ndarray | None = None, scores: np.ndarray | None = None
) -> None:
    """Keep the cycle's plan and its picked URLs (``ids``, ``scores``: best first);
    forget the picks of cycles older than the last :data:`KEEP_PICK_CYCLES`."""
    fields_ = asdict(plan)
    if ids is not None and scores is not None:
        n = min(len(ids), MAX_PICKS)
        fields_["pick_ids"] = np.asarray(ids[:n], dtype="<i8").tobytes()
        fields_["pick_scores"] = np.asarray(scores[:n], dtype="<f8").tobytes()
    store.side_put(PLAN_TABLE, [(int(plan.cycle), pack_record(fields_))])
    old = int(plan.cycle) - KEEP_PICK_CYCLES
    if old >= 0:
        data = store.side_get(PLAN_TABLE, [old])[0]
        if data is not None:
            try:
                raw = unpack_record(data)
            except RecordError:
                return
            if "pick_ids" in raw:
                raw.pop("pick_ids")
                raw.pop("pick_scores", None)
                store.side_put(PLAN_TABLE, [(old, pack_record(raw))])


def push_summary(store: Any, summary: CycleSummary) -> None:
    """Add this process's figures for a cycle (atomic; many processes may push)."""
    store.side_push(LOG_TABLE, int(summary.cycle), pack_record(asdict(summary)), MAX_SUMMARIES)


def save_freshness(
    store: Any, cycle: int, share: float, low: float, high: float, pages: int
) -> None:
    """Keep the crawl's freshness estimate of the end of ``cycle`` (:data:`FRESHNESS_TABLE`):
    plain numbers in a record (history/records.py), never a pickle."""
    record = CycleFreshness(int(cycle), float(share), float(low), float(high), int(pages))
    store.side_put(FRESHNESS_TABLE, [(int(cycle), pack_record(asdict(record)))])


def note_start_urls(store: Any, ids: list[int]) -> None:
    """Remember these URL ids as the spider's start URLs (:data:`START_TABLE`)."""
    if ids:
        store.side_put(START_TABLE, [(int(i), b"") for i in ids])


# -- reading (the report) ------------------------------------------------------------


def start_url_ids(store: Any) -> np.ndarray:
    """The URL ids fetched as the spider's start requests (:func:`note_start_urls`)."""
    return np.fromiter((int(k) for k, _ in store.side_items(START_TABLE)), dtype=np.int64)


def monitor_samples(store: Any) -> dict[int, tuple[float, int]]:
    """``{cycle: (share, seed)}``: the monitoring sample's rule, as each cycle's plan
    recorded it (cycles planned by a crawl that did not record it are absent). The
    ids in the sample of cycle ``c`` are ``monitor_mask(ids, *samples[c])``."""
    out: dict[int, tuple[float, int]] = {}
    for cycle, data in store.side_items(PLAN_TABLE):
        try:
            plan = _from_record(CyclePlan, data)
        except RecordError as exc:
            raise RecordError(f"side table {PLAN_TABLE!r}, cycle {cycle}: {exc}") from None
        if plan.monitor_seed is not None:
            out[int(cycle)] = (float(plan.monitor_share), int(plan.monitor_seed))
    return dict(sorted(out.items()))


def recorded_freshness(store: Any, since: int = 0) -> dict[int, CycleFreshness]:
    """``{cycle: estimate}``: the crawl's freshness estimate of each cycle from ``since``
    on that has one (:func:`save_freshness`). A record that does not read as one (not
    this module's encoding, a field missing or of another type, a share that is not
    finite or outside [0, 1], an interval not around it, a negative page count) is left
    out with a warning naming the cycle: the caller computes that cycle's figure as
    for a cycle without a record. Nothing is evaluated: the fields are parsed as
    numbers and checked."""
    out: dict[int, CycleFreshness] = {}
    for cycle, data in store.side_items(FRESHNESS_TABLE):
        if cycle < since:
            continue
        try:
            est = _from_record(CycleFreshness, data)
            _check_freshness(est, int(cycle))
        except RecordError as exc:
            logger.warning(
                "recrawl: the recorded freshness estimate of cycle %d is not read (%s): "
                "it is computed again from the visit log",
                cycle,
                exc,
            )
            continue
        out[int(cycle)] = est
    return out


def _check_freshness(est: CycleFreshness, key: int) -> None:
    """What :func:`_from_record` does not check: the figures are a share and its interval."""
    share, low, high = float(est.share), float(est.low), float(est.high)
    if est.cycle != key:
        raise RecordError(f"it says cycle {est.cycle}")
    if not all(math.isfinite(x) and 0.0 <= x <= 1.0 for x in (share, low, high)):
        raise RecordError(f"share {share!r}, interval {low!r}-{high!r}: not in [0, 1]")
    if not low <= share <= high:
        raise RecordError(f"share {share!r} outside its interval {low!r}-{high!r}")
    if est.pages < 0:
        raise RecordError(f"{est.pages} pages")


def cycle_records(store: Any, since: int = 0) -> list[CycleRecord]:
    """Every cycle from ``since`` on that has a plan or a summary, ascending.

    A record that is not this module's (another writer, corruption) raises
    :class:`~scrapy_recrawl.history.records.RecordError` naming the cycle.
    """
    plans: dict[int, CyclePlan] = {}
    for cycle, data in store.side_items(PLAN_TABLE):
        if cycle >= since:
            try:
                plans[cycle] = _from_record(CyclePlan, data)
            except RecordError as exc:
                raise RecordError(f"side table {PLAN_TABLE!r}, cycle {cycle}: {exc}") from None
    sums: dict[int, tuple[CycleSummary, int]] = {}
    for cycle, data in store.side_items(LOG_TABLE):
        if cycle < since:
            continue
        try:
            parts = [_from_record(CycleSummary, item) for item in unpack_list(data)]
        except RecordError as exc:
            raise RecordError(f"side table {LOG_TABLE!r}, cycle {cycle}: {exc}") from None
        if not parts:
            continue
        total = CycleSummary(cycle, min(p.started for p in parts), max(p.ended for p in parts))
        for name in COUNTS:
            setattr(total, name, sum(getattr(p, name) for p in parts))
        # what each process saw waiting as it left the cycle: the largest of them
        total.backlog = max(p.backlog for p in parts)
        sums[cycle] = (total, len(parts))
    return [
        CycleRecord(
            c,
            plans.get(c),
            sums[c][0] if c in sums else None,
            sums[c][1] if c in sums else 0,
        )
        for c in sorted(set(plans) | set(sums))
    ]


def picks(store: Any, cycle: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The cycle's picked URL ids and scores, best first (None: not kept)."""
    data = store.side_get(PLAN_TABLE, [int(cycle)])[0]
    if data is None:
        return None
    raw = unpack_record(data)
    ids, scores = raw.get("pick_ids"), raw.get("pick_scores")
    if not isinstance(ids, bytes) or not isinstance(scores, bytes):
        return None
    if len(ids) % 8 or len(ids) != len(scores):
        raise RecordError(f"side table {PLAN_TABLE!r}, cycle {cycle}: picks of unequal length")
    return np.frombuffer(ids, dtype="<i8"), np.frombuffer(scores, dtype="<f8")


def pick_of(store: Any, cycle: int, url_id: int) -> tuple[int, float] | None:
    """``(rank, score)`` of ``url_id`` among the cycle's picks (rank 1 = best), or None
    when it was not picked (or the picks of that cycle are no longer kept)."""
    got = picks(store, cycle)
    if got is None:
        return None
    ids, scores = got
    where = np.flatnonzero(ids == int(url_id))
    if where.size == 0:
        return None
    return int(where[0]) + 1, float(scores[where[0]])
