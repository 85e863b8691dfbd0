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
  report does not count them as budget wasted (:func:`start_url_ids`).

Adding these tables is no change of stored format (side storage takes any table), nor
is a field added to a record (a reader takes a missing field's default and ignores one
it does not know); a store without them has no per-cycle record (older crawls):
readers say so.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

import numpy as np

from .records import RecordError, pack_record, unpack_list, unpack_record

PLAN_TABLE = "cycle_plan"
LOG_TABLE = "cycle_log"
#: the URL ids the spider fetched as its start requests (key: the id, value empty):
#: fetched every cycle on the spider's say-so, never the budget's waste
START_TABLE = "start_urls"
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
