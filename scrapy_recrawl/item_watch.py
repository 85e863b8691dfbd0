"""Each page's items against its previous visit's, as the callback yields them.

Why here: the spider middleware (skip.py) sees every item a callback yields for a
response, in order, and sees the output end. :class:`ItemWatch` (one per crawler) gives
each recorded response a :class:`PageWatch`, which

* gives each item its :class:`~scrapy_recrawl.item_change.ItemChange` as it passes
  (new, changed with the field names and, with ``RECRAWL_ITEM_VALUES``, old -> new
  values, or unchanged), against the page's record of its previous visit, read from
  the store's side storage (``item_changes``, keyed by the page's URL id);
* when the output is exhausted, lists the items that disappeared, keeps this visit's
  record and, when an item was new, changed or removed, the page's last change
  (``item_last_change``: :class:`~scrapy_recrawl.item_change.PageChange`, which
  ``recrawl-report --url`` shows; both written in batches: :meth:`ItemWatch.flush`),
  hands the change records to
  the change feed (change_feed.py) and gives a held visit its verdict
  (held_observations.py: ``RECRAWL_CHANGE_SIGNAL = "items"``).

The spider and its pipelines see it in ``response.meta["recrawl_items"]``
(:class:`ItemChanges`), never on the items themselves: a user's item is passed on as
the callback made it. :meth:`ItemChanges.status` gives one item's change (by identity),
e.g. from an ``item_scraped`` signal handler, which gets the response.

A callback that yields no item leaves the page to the text detector (no record kept);
a page with no record yet (its first visit, or the first with items) has only new items
and no verdict: a first observation.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scrapy.http import Response

from .core.meta import META_CYCLE
from .cycle_summary import tally_for_crawler
from .held_observations import META_HELD, HeldObservation
from .history import HistoryStoreError
from .item_change import (
    CHANGED,
    ITEMS_TABLE,
    LAST_CHANGE_TABLE,
    NEW,
    REMOVED,
    UNCHANGED,
    ItemChange,
    ItemKeyer,
    ItemState,
    PageChange,
    PageItems,
    ValueBudget,
    compare,
    item_state,
    removed,
)
from .settings import get
from .visit_recorder import META_ITEMS_PAGE

logger = logging.getLogger(__name__)

#: ``response.meta`` key of the page's :class:`ItemChanges`
META_ITEMS = "recrawl_items"
#: page records kept in memory before they are written in one batch
WRITE_BATCH = 100


class ItemChanges:
    """What the page's items did since its previous visit (``response.meta["recrawl_items"]``).

    Filled as the callback yields; :attr:`complete` once its output is exhausted (only
    then is :attr:`removed` known). :attr:`compared`: the page had a record to compare
    with (False: its first visit with items; every item is new)."""

    def __init__(self, url: str, compared: bool) -> None:
        self.url = url
        self.compared = compared
        self.complete = False
        self.changes: list[ItemChange] = []
        self.removed: list[ItemChange] = []
        self._by_id: dict[int, ItemChange] = {}

    def add(self, change: ItemChange) -> None:
        self.changes.append(change)
        if change.item is not None:
            self._by_id[id(change.item)] = change

    def status(self, item: Any) -> ItemChange | None:
        """The change of ``item`` (this very object) on this page, or None."""
        return self._by_id.get(id(item))

    def of(self, status: str) -> list[ItemChange]:
        return (
            self.removed if status == REMOVED else [c for c in self.changes if c.status == status]
        )

    @property
    def new(self) -> list[ItemChange]:
        return self.of(NEW)

    @property
    def changed(self) -> list[ItemChange]:
        return self.of(CHANGED)

    @property
    def unchanged(self) -> list[ItemChange]:
        return self.of(UNCHANGED)

    @property
    def page_changed(self) -> bool | None:
        """The page's verdict: an item new, changed or removed; None when there is
        nothing to compare (no items, or no previous record)."""
        if not self.compared or not self.changes:
            return None
        return bool(self.removed) or any(c.status != UNCHANGED for c in self.changes)

    def __repr__(self) -> str:
        counts = ", ".join(f"{s} {len(self.of(s))}" for s in (NEW, CHANGED, UNCHANGED, REMOVED))
        return f"<ItemChanges {self.url}: {counts}{'' if self.complete else ', incomplete'}>"


class PageWatch:
    """One response's items (module docstring)."""

    def __init__(self, watch: ItemWatch, response: Response, page_id: int) -> None:
        self.watch = watch
        self.response = response
        self.page_id = page_id
        self.held: HeldObservation | None = response.meta.get(META_HELD)
        self.before = watch.previous(page_id)
        self._before = {s.key: s for s in self.before.items} if self.before else {}
        self.keyer = ItemKeyer(watch.item_key())
        self.values = ValueBudget(watch.keep_values, watch.values_max)
        self.states: list[ItemState] = []
        self.changes = ItemChanges(response.url, self.before is not None)
        response.meta[META_ITEMS] = self.changes
        self.finished = False
        #: the items per status, counted in the stats once, when the output ends
        self._counts: dict[str, int] = {}

    def item(self, item: Any) -> ItemChange:
        state = item_state(item, self.keyer, self.values)
        self.states.append(state)
        change = compare(state, self._before.get(state.key), item)
        self.changes.add(change)
        self._counts[change.status] = self._counts.get(change.status, 0) + 1
        return change

    def finish(self, ok: bool) -> None:
        """The callback's output is exhausted (``ok``), or it failed / was abandoned:
        then the page keeps its previous record and a held visit its text verdict."""
        if self.finished:
            return
        self.finished = True
        for status, n in self._counts.items():
            self.watch.inc(f"items/{status}", n)
        changes = self.changes
        verdict: bool | None = None
        if ok and self.states:
            changes.removed = removed(self.before, (s.key for s in self.states))
            if changes.removed:
                self.watch.inc("items/removed", len(changes.removed))
            changes.complete = True
            verdict = changes.page_changed
            if verdict:  # compared, and an item new, changed or removed
                self.watch.keep_change(self.page_id, self.response, changes)
            self.watch.keep(self.page_id, PageItems(self.states))
            self.watch.feed_changes(self.response, changes)
        if self.held is not None:
            self.held.complete(verdict)


class ItemWatch:
    """The crawl's item comparison (module docstring): settings, the store's records."""

    def __init__(self, crawler: Any, store_of: Any, feed: Any = None) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.key_fields: list[str] = list(get(settings, "RECRAWL_ITEM_KEY"))
        self.keep_values: bool = get(settings, "RECRAWL_ITEM_VALUES")
        self.values_max: int = get(settings, "RECRAWL_ITEM_VALUES_MAX_BYTES")
        self.flush_seconds: float = get(settings, "RECRAWL_FLUSH_SECONDS")
        self._store_of = store_of  # the crawl's open store, asked for when first needed
        self._store: Any = None
        self.feed = feed
        self._pending: dict[int, bytes] = {}
        self._pending_changes: dict[int, bytes] = {}  # LAST_CHANGE_TABLE's, same batches
        self._last_write = time.monotonic()
        self._warned = False
        self._item_key: list[str] | None = None

    def item_key(self) -> list[str]:
        """The item key's fields: the spider's ``recrawl_item_key``, else the setting's
        (read at the first page: the spider is the crawl's from then on)."""
        if self._item_key is None:
            spider = getattr(self.crawler, "spider", None)
            if spider is None:
                return self.key_fields
            own = getattr(spider, "recrawl_item_key", None)
            if isinstance(own, str):  # one field, or "a,b": read as the setting reads it
                own = get({"RECRAWL_ITEM_KEY": own}, "RECRAWL_ITEM_KEY")
            self._item_key = list(own or self.key_fields)
        return self._item_key

    @property
    def store(self) -> Any:
        # kept once open: the store's close hooks (flush) run after the runtime let it go
        if self._store is None:
            self._store = self._store_of()
        return self._store

    def inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"recrawl/{key}", n)

    def page(self, response: Response | None) -> PageWatch | None:
        """A watch of ``response``'s items; None for a response the crawl did not record
        (not one of the spider's pages, the add-on off)."""
        if response is None:
            return None
        page_id = response.meta.get(META_ITEMS_PAGE)
        if page_id is None:
            return None
        return PageWatch(self, response, int(page_id))

    def previous(self, page_id: int) -> PageItems | None:
        data = self._pending.get(page_id)
        if data is None:
            try:
                data = self.store.side_get(ITEMS_TABLE, [page_id])[0]
            except HistoryStoreError as exc:
                self._warn(f"could not read the previous items of page {page_id}: {exc}")
                return None
        if data is None:
            return None
        try:
            return PageItems.from_bytes(data)
        except ValueError:
            self.inc("items/unreadable_records")
            return None  # no baseline: a first observation of the items

    def keep(self, page_id: int, record: PageItems) -> None:
        self._pending[page_id] = record.to_bytes()
        # a batch, or the store's flush bound (RECRAWL_FLUSH_SECONDS; 0: batches only)
        due = 0 < self.flush_seconds <= time.monotonic() - self._last_write
        if len(self._pending) >= WRITE_BATCH or due:
            self.flush()

    def keep_change(self, page_id: int, response: Response, changes: ItemChanges) -> None:
        """The page's last item change (written with the next batch of records)."""
        wall = tally_for_crawler(self.crawler).wall()
        budget = ValueBudget(self.keep_values, self.values_max)  # the record's bound
        cycle = response.meta.get(META_CYCLE)
        record = PageChange.of([*changes.changes, *changes.removed], cycle, wall, budget)
        self._pending_changes[page_id] = record.to_bytes()

    def flush(self) -> int:
        """Write the kept records in one batch; returns 0 (a hook of the store's close:
        a record that could not be written is no visit lost, only a baseline)."""
        self._last_write = time.monotonic()
        for table, pending, what in (
            (ITEMS_TABLE, self._pending, "the items"),
            (LAST_CHANGE_TABLE, self._pending_changes, "the last item change"),
        ):
            if not pending:
                continue
            items = sorted(pending.items())
            try:
                self.store.side_put(table, items)
            except HistoryStoreError as exc:
                self._warn(f"could not keep {what} of {len(items)} pages (retried): {exc}")
                continue
            pending.clear()
        return 0

    def feed_changes(self, response: Response, changes: ItemChanges) -> None:
        if self.feed is None:
            return
        wall = tally_for_crawler(self.crawler).wall()
        for change in [*changes.changes, *changes.removed]:
            if change.status != UNCHANGED:
                self.feed.export(response, change, wall)

    def _warn(self, message: str) -> None:
        self.inc("items/store_errors")
        if not self._warned:
            self._warned = True
            logger.error("recrawl: %s", message)
