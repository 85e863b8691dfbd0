"""Content-aware prediction (paper 004) as a plug-in: bags of words and C*, D*, Q columns.

Listed in ``RECRAWL_PLUGINS_BASE``; on when ``RECRAWL_CHANGE_TEST = "chi2"`` or
the scorer uses ``C*``, ``D*`` or ``Q``. Offers the middleware a bag keeper
(the last versions' bags of words beside the store, for the chi-squared rule
and the ``D*`` distances) and the scheduler a column provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..change.bow import Bag
from ..core.plugins import uses_terminals
from ..history.base import HistoryArrays
from ..scoring.registry import Terminal, optional_column
from ..settings import get
from .window import c_names, d_names

if TYPE_CHECKING:
    from .store import ContentSettings

# store.py and related.py are imported where used (check_settings, from_crawler,
# __init__), not here: reading the class's terminals (the crawl's terminal registry,
# plugin_terminals.py) loads neither; window.py names them, and is light


def _column(name: str, doc: str) -> Terminal:
    """A terminal that is a plain column of :class:`ContentColumns`, NaN where absent."""
    return Terminal(name, doc, optional_column(name))


class ContentPlugin:
    """Bags of words, the 2D window and related pages as experts (docs/content.md)."""

    #: paper 004's terminals: ``D1..D5`` then ``C1..C5`` (RECRAWL_WINDOW of them
    #: filled), then ``Q``
    terminals: ClassVar[tuple[Terminal, ...]] = (
        *(
            _column(name, f"cosine distance of the last version to the one {i} visit(s) back")
            for i, name in enumerate(d_names(), 1)
        ),
        *(
            _column(name, f"change indicator of the observation {i} visit(s) back (1/0)")
            for i, name in enumerate(c_names(), 1)
        ),
        _column("Q", "related pages' recent change evidence weighted by their cross-correlation"),
    )
    api_version = "1"
    #: an instance drops "bag_keeper" when this crawl needs no bag of words (__init__)
    capabilities: frozenset[str] = frozenset({"columns", "bag_keeper"})
    selects = False

    @classmethod
    def enabled(cls, settings: Any, terminals_needed: frozenset[str]) -> bool:
        chi2 = get(settings, "RECRAWL_CHANGE_TEST") == "chi2"
        return chi2 or uses_terminals(cls, terminals_needed)

    @classmethod
    def check_settings(cls, settings: Any) -> None:
        from .store import ContentSettings

        ContentSettings.from_settings(settings)

    @classmethod
    def from_crawler(
        cls, crawler: Any, store: Any, terminals_needed: frozenset[str]
    ) -> ContentPlugin:
        from .store import ContentSettings

        return cls(store, ContentSettings.from_settings(crawler.settings), terminals_needed)

    def __init__(self, store: Any, cfg: ContentSettings, terminals_needed: frozenset[str]):
        from .store import CONTENT_TERMINALS, BagStore, ContentColumns

        needed = terminals_needed & CONTENT_TERMINALS
        self.content = ContentColumns(store, cfg, needed) if needed else None
        uses_d = bool(needed & set(d_names()))
        # the detector computes a bag of words with each signature only when one is
        # kept: for the chi-squared rule, or the D* terminals the scorer uses
        keeps = cfg.change_test == "chi2" or uses_d
        if not keeps:
            self.capabilities = ContentPlugin.capabilities - {"bag_keeper"}
        self.bags = (
            BagStore(store, keep=cfg.window if uses_d else 1, window=cfg.window) if keeps else None
        )

    # -- ColumnProvider --------------------------------------------------------

    def columns(self, arrays: HistoryArrays, now: float) -> dict[str, np.ndarray]:
        return {} if self.content is None else self.content.columns(arrays)

    # -- BagKeeper -------------------------------------------------------------

    def previous(self, url_id: int) -> list[Bag]:
        return [] if self.bags is None else self.bags.bags(url_id)

    def keep(self, url_id: int, bag: Bag, previous: list[Bag]) -> None:
        if self.bags is not None:
            self.bags.update(url_id, bag, previous)
