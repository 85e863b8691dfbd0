"""One URL's story: its visits as the log keeps them, and why it was (or was not)
picked in the last planned cycle.

The picks of the last cycles are kept with their rank and score, and each cycle's
cut-off (history/cycle_log.py); a URL not picked has no kept score, so its score is
computed now, as the crawl computes it (the scorer of the settings, its terminals
from the store's columns by the terminal registry), for the next cycle.

The terminals that solve for a whole cycle (``chogm_f``, ``lc_f``: scoring/policies.py)
need that cycle's recrawl budget. The next cycle's is not known yet; the story hands
them the last planned cycle's, as its plan keeps it (``CyclePlan.budget``), at most the
candidates scored now, through the crawl's own :func:`~scrapy_recrawl.core.selection.with_budget`.
Without a plan with a budget (no per-cycle records, or only warm-ups, which fetch
everything) it says so instead of a score.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from scrapy_recrawl.core.selection import candidate_mask, monitor_mask, with_budget
from scrapy_recrawl.history.cycle_log import CyclePlan, cycle_records, pick_of, picks

from .log import VisitLog
from .urls import UrlStory, visit_lines


def find_url(store: Any, url: str) -> tuple[int, Any] | None:
    """``(url_id, record or None)`` of ``url``: by its request fingerprint (Scrapy's
    default), else by its exact text among the known URLs."""
    from scrapy import Request
    from scrapy.utils.request import fingerprint

    try:
        rec = store.get(fingerprint(Request(url)), signature=False)
    except ValueError:  # not a URL Scrapy accepts
        rec = None
    if rec is not None:
        return int(rec.id), rec
    ids = store.arrays().ids
    for url_id, known in zip(ids.tolist(), store.urls(ids), strict=True):
        if known == url:
            return int(url_id), None
    return None


def record_of(store: Any, url_id: int) -> Any:
    """The URL's record, through its stored request's fingerprint (None: not found)."""
    from scrapy import Request
    from scrapy.utils.request import fingerprint

    req = store.requests(np.array([url_id]))[0]
    if not req:
        return None
    try:
        request = Request(req["url"], method=req.get("method", "GET"), body=req.get("body"))
    except (KeyError, TypeError, ValueError):
        return None
    return store.get(fingerprint(request), signature=False)


def story(store: Any, log: VisitLog, url: str, url_id: int, rec: Any, settings: Any) -> UrlStory:
    visits = visit_lines(log, url_id)
    recorded = int(rec.visits) if rec is not None else None
    s = UrlStory(
        url=url,
        url_id=url_id,
        visits=visits,
        visits_recorded=recorded,
        cut=recorded is not None and recorded > len(visits),
        gone=bool(rec.gone) if rec is not None else False,
    )
    if s.cut:
        s.notes.append(
            f"the visit log keeps {len(visits)} of its {recorded} visits (the oldest are cut)"
        )
    plans = _last_pick(store, s)
    _score_now(store, s, settings, _last_budget(plans))
    return s


def _last_pick(store: Any, s: UrlStory) -> list[CyclePlan]:
    """The last planned cycle's rank, score and cut-off of the URL; the plans, oldest first."""
    plans = [r.plan for r in cycle_records(store) if r.plan is not None]
    if not plans:
        s.notes.append(
            "no cycle plan is recorded in this store (a crawl before per-cycle records): "
            "its rank and the cut-off are not known"
        )
        return plans
    plan = plans[-1]
    s.last_cycle, s.cutoff, s.picks, s.scorer = plan.cycle, plan.cutoff, plan.picks, plan.scorer
    s.picks_kept = picks(store, plan.cycle) is not None
    got = pick_of(store, plan.cycle, s.url_id)
    if got is not None:
        s.picked_rank, s.picked_score = got
    return plans


def _last_budget(plans: list[CyclePlan]) -> int | None:
    """The budget of the last planned cycle that had one (a warm-up's 0 is none)."""
    return next((int(p.budget) for p in reversed(plans) if p.budget > 0), None)


def _score_now(store: Any, s: UrlStory, settings: Any, budget: int | None) -> None:
    from scrapy_recrawl.plugin_terminals import scorer_from_settings
    from scrapy_recrawl.settings import get

    # the crawl's scorer, over its terminals: the core's and its listed plug-ins'
    scorer = scorer_from_settings(settings)
    registry = scorer.registry
    assert registry is not None  # the one it was built over
    if s.scorer is None:  # no recorded plan: the scorer of the settings
        named = scorer.name not in ("expression", scorer.expression)
        s.scorer = f"{scorer.name} = {scorer.expression}" if named else scorer.expression
    arrays = store.arrays()
    arrays.cycle = store.cycle + 1  # as the next cycle sees it
    where = np.flatnonzero(arrays.ids == s.url_id)
    if where.size == 0:
        return
    i = int(where[0])
    share = float(get(settings, "RECRAWL_MONITOR_SHARE"))
    seed = int(get(settings, "RECRAWL_SEED"))
    live, _ = candidate_mask(arrays)
    monitored = live & monitor_mask(arrays.ids, share, seed)
    s.monitored = bool(monitored[i])
    if not live[i]:
        s.notes.append("it is not a candidate now (gone, or backed off after failed downloads)")
        return
    # scored as the crawl scores its candidates; the monitoring sample is fetched
    # outside the scored top-k, so its rank is among the other candidates
    rows = np.flatnonzero(live)
    state = {name: col[rows] for name, col in arrays.columns.items()}
    budgeted = any(registry.get(n).needs_budget for n in scorer.terminals_needed if n in registry)
    if budgeted and budget is None:
        s.notes.append(
            "its score needs a cycle's recrawl budget (the scorer solves for a whole "
            "cycle), and no recorded cycle plan has one (none recorded, or only "
            "warm-ups, which fetch everything): it is not computed"
        )
        return
    if budget is not None:
        # as the crawl's select_recrawls: the budget, at most the candidates it scores
        # (the monitoring sample is fetched outside it)
        state = with_budget(state, min(budget, int(np.count_nonzero(~monitored[rows]))))
        if budgeted:
            s.notes.append(
                f"scored with the recrawl budget of the last planned cycle ({budget} pages), "
                "which the scorer's per-cycle solution needs"
            )
    try:
        terms = scorer.terminals(state, arrays.cycle, time.time())
        scores = scorer.score(terms)
    except (KeyError, ValueError) as exc:
        s.notes.append(
            f"its score cannot be computed offline (the scorer needs {exc}, a plug-in's "
            "column the crawl adds)"
        )
        return
    p = int(np.flatnonzero(rows == i)[0])
    s.terminals = {name: float(v[p]) for name, v in sorted(terms.items())}
    s.score = float(scores[p])
    others = ~monitored[rows]
    s.candidates = int(np.count_nonzero(others))
    ranked = np.nan_to_num(scores, nan=-np.inf)
    s.rank_now = int(np.count_nonzero(others & (ranked > ranked[p]))) + 1
    s.ties = int(np.count_nonzero(others & (ranked == ranked[p]))) - int(others[p])
