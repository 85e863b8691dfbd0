"""Loop-time baskets (paper 001) as a plug-in: probes of new URLs and the ``due`` column.

Listed in ``RECRAWL_PLUGINS_BASE``; on when ``RECRAWL_PROBE`` is true, or when
it is None and the scorer uses ``due``. Offers the scheduler a column provider
(``basket_seconds``, the interval of each URL's basket) and a probe source
(URLs due for a probe, within ``RECRAWL_PROBE_SHARE`` of the budget).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from scrapy import signals

from ..change import ChangeDetector
from ..core.meta import META_PAIR
from ..core.plugins import uses_terminals
from ..history.base import HistoryArrays
from ..scoring.registry import Terminal

# baskets.py, probes.py and forest.py are imported where used (enabled, check_settings,
# __init__, cap), not here: reading the class's terminals (the crawl's terminal
# registry, plugin_terminals.py) loads none of them


def _due(state: Mapping[str, np.ndarray], cycle: int, now: float | None, *_: object) -> np.ndarray:
    # Loop-time baskets (paper 001): overdue-ness relative to the page's basket interval.
    if now is None:
        raise ValueError("the 'due' terminal needs the current time (now=...)")
    if "basket_seconds" not in state:
        return np.full(np.shape(state["n"]), np.nan)
    out = np.subtract(float(now), state["last_visit_time"], dtype=np.float64)
    out /= state["basket_seconds"]
    return out


class BasketsPlugin:
    """Probes new URLs at fixed offsets, classifies them into baskets (docs/baskets.md)."""

    terminals: ClassVar[tuple[Terminal, ...]] = (
        Terminal(
            "due",
            "time since the last visit / the page's basket interval (loop-time baskets)",
            _due,
            needs_now=True,
        ),
    )
    api_version = "1"
    capabilities: ClassVar[frozenset[str]] = frozenset({"columns", "probes"})
    selects = False

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        from .baskets import BasketSettings

        probe = BasketSettings.from_settings(settings).probe
        return bool(probe) if probe is not None else uses_terminals(cls, terminals_needed)

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        from .baskets import BasketSettings

        BasketSettings.from_settings(settings)

    @classmethod
    def from_crawler(
        cls, crawler: Any, store: Any, terminals_needed: frozenset[str]
    ) -> BasketsPlugin:
        return cls(crawler, store)

    def __init__(self, crawler: Any, store: Any) -> None:
        from .baskets import BasketSettings
        from .probes import Prober

        self.crawler = crawler
        self.settings = BasketSettings.from_settings(crawler.settings)
        self.prober = Prober(store, self.settings, ChangeDetector.from_settings(crawler.settings))
        crawler.signals.connect(self._on_response, signal=signals.response_received)

    # -- ColumnProvider ------------------------------------------------------

    def columns(self, arrays: HistoryArrays, now: float) -> dict[str, np.ndarray]:
        self.prober.classify_pending()
        self.prober.forget_stuck()
        return {"basket_seconds": self.prober.basket_column(arrays.ids)}

    # -- ProbeSource -----------------------------------------------------------

    def cap(self, budget_total: int | None) -> int | None:
        from .probes import probe_cap

        return probe_cap(self.settings.probe_share, budget_total)

    def has_due(self) -> bool:
        return self.prober.has_due()

    def pop_due(self) -> int | None:
        return self.prober.pop_due()

    def next_due_time(self) -> float | None:
        return self.prober.next_due_time()

    def dispatched(self, fingerprint: bytes, url_id: int) -> None:
        self.prober.dispatched(fingerprint, url_id)
        self._inc("recrawl/probes/fetched")

    def _on_response(self, response: Any, request: Any, spider: Any) -> None:
        if META_PAIR in request.meta:
            return  # a boilerplate pair's second fetch: not a visit, nothing probed
        before = dict(self.prober.stats)
        fingerprint = self.crawler.request_fingerprinter.fingerprint(request)
        self.prober.on_response(fingerprint, response.status)
        for key, value in self.prober.stats.items():
            if value != before[key] and key != "fetched":
                self._inc(f"recrawl/probes/{key}", value - before[key])

    def _inc(self, key: str, count: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, count)
