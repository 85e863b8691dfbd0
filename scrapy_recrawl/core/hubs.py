"""Hubs: pages whose refetches keep yielding new links (a news index's ``/page/N``, a
shop's category pages), recognised and made due often enough to find new pages.

Per URL, :func:`fold` keeps a rate of **new links per cycle**: at each refetch of a
known page (not its first fetch, whose links are all new), ``links`` newly found URLs
(never seen by the store before) over the ``cycles`` since its previous fetch, folded
into an exponentially weighted mean (:data:`WEIGHT` to the latest). A page is a hub
while its rate is at least :data:`MIN_RATE` (one new link in 20 cycles); below it the
entry is dropped. Kept in the store's side storage (``hub_links``, key: the URL id), so
both backends keep it and nothing of the store's schema changes; only hubs have an
entry.

:func:`due_hubs` marks a hub due when it is expected to hold at least one new link
since its last visit, ``rate * t >= 1``, best (most expected) first, at most
:func:`hub_cap` of the cycle's recrawls (half, at least one): the cycle core ranks due
URLs first (core/selection.py: DUE_NOW), whatever the scorer says, within the budget.
Pure: the scheduler reads and writes the entries, the cycle core calls these.
"""

from __future__ import annotations

import numpy as np

#: the side table of the hubs' rates (history/base.py: side storage)
HUB_TABLE = "hub_links"
#: the latest refetch's weight in the rate
WEIGHT = 0.5
#: below this many new links a cycle a page is no hub (its entry is dropped)
MIN_RATE = 0.05


def fold(rate: float | None, links: int, cycles: int) -> float:
    """A page's rate of new links per cycle after a refetch that found ``links`` new URLs
    ``cycles`` cycles after its previous fetch (``rate`` None: the first such refetch)."""
    latest = max(0, int(links)) / max(1, int(cycles))
    return latest if rate is None else (1.0 - WEIGHT) * float(rate) + WEIGHT * latest


def is_hub(rate: float) -> bool:
    return rate >= MIN_RATE


def hub_cap(k: int) -> int:
    """At most this many of a cycle's ``k`` recrawls go to due hubs: half, at least one."""
    return max(1, k // 2) if k > 0 else 0


def due_hubs(rate: np.ndarray, t: np.ndarray, k: int) -> np.ndarray:
    """Positions (into ``rate`` / ``t``, the hubs' rates and cycles since their visit) of
    the hubs due this cycle: ``rate * t >= 1``, the most expected new links first, at
    most :func:`hub_cap` of ``k``."""
    expected = np.asarray(rate, dtype=np.float64) * np.asarray(t, dtype=np.float64)
    due = np.flatnonzero(expected >= 1.0)
    order = np.argsort(-expected[due], kind="stable")
    return due[order][: hub_cap(k)]
