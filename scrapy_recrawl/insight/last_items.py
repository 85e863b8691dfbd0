"""A page's items at its last item change, field by field, old -> new
(``recrawl-report --url``), as the crawl's item watch kept it (item_watch.py: side table
``item_last_change``, one record per page, replaced at its next item change).

Its own part of the URL's story, beside the body diff (insight/last_change.py) rather
than one of that diff's :data:`~scrapy_recrawl.insight.last_change.SECTIONS`: those are
made from the two kept bodies and the detector's rules, and a trial rule re-runs them;
this one reads a record of its own, is there without any body kept (items can be on with
``RECRAWL_STORE_BODIES`` off), may come from another visit than the body's last change
(the text and the items disagree, with the items signal or without it), and no
``--ignore`` / ``--watch`` rule changes it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from scrapy_recrawl.item_change import (
    CHANGED,
    ITEMS_TABLE,
    LAST_CHANGE_TABLE,
    ItemChange,
    PageChange,
    canonical_json,
)

from .last_change import MAX_LINES, cut


def shown(value: Any) -> str:
    """A kept value as one short line: its JSON (strings quoted), cut like the body
    diff's texts."""
    return cut(canonical_json(value))


@dataclass
class ItemsAtLastChange:
    """The page's last item change, ready to show."""

    change: PageChange
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per new or removed item, one per changed field (``MAX_LINES`` at
        most, the rest counted): ``changed  KEY  price: 463.99 -> 431.99``."""
        out: list[str] = []
        for c in self.change.items:
            out.extend(_lines_of(c))
        if len(out) > MAX_LINES:
            out = [*out[:MAX_LINES], f"... and {len(out) - MAX_LINES} more"]
        return out

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: the values as kept (plain JSON data, not cut)."""
        c = self.change
        return {
            "cycle": c.cycle,
            "time": c.time if math.isfinite(c.time) else None,
            "values_kept": c.values,
            "items": [
                {
                    "status": i.status,
                    "key": i.key,
                    "fields": list(i.fields),
                    "changes": {
                        n: {"old": i.old.get(n), "new": i.new.get(n)}
                        for n in i.fields
                        if n in i.old or n in i.new
                    },
                }
                for i in c.items
            ],
            "notes": self.notes,
        }


def _lines_of(c: ItemChange) -> list[str]:
    if c.status == CHANGED:
        if not (c.old or c.new):
            return [f"changed  {c.key}  {', '.join(c.fields)}"]
        return [
            f"changed  {c.key}  {n}: {shown(c.old.get(n))} -> {shown(c.new.get(n))}"
            if n in c.old or n in c.new
            else f"changed  {c.key}  {n}"
            for n in c.fields
        ]
    values = c.new or c.old  # a new item's values, or a removed one's
    if not values:
        return [f"{c.status}  {c.key}"]
    return [f"{c.status}  {c.key}  " + cut(", ".join(f"{k}={shown(values[k])}" for k in values))]


def items_at_last_change(store: Any, url_id: int) -> ItemsAtLastChange | None:
    """The page's last item change kept in ``store``, with notes on what it lacks;
    None when there is none and its items were never compared (items off for it)."""
    data = store.side_get(LAST_CHANGE_TABLE, [url_id])[0]
    if data is None:
        if store.side_get(ITEMS_TABLE, [url_id])[0] is None:
            return None
        change = PageChange(None, math.nan)
        return ItemsAtLastChange(
            change,
            [
                "none kept: its items have not changed since they were first compared "
                "(or since the crawl began keeping item changes)"
            ],
        )
    try:
        change = PageChange.from_bytes(data)
    except ValueError:
        return ItemsAtLastChange(
            PageChange(None, math.nan), ["its record is not one this version reads"]
        )
    out = ItemsAtLastChange(change)
    changed = [c for c in change.items if c.status == CHANGED]
    if not change.values:
        out.notes.append("field names only: RECRAWL_ITEM_VALUES = True keeps old -> new values")
    elif any(not (c.old or c.new) for c in changed):
        out.notes.append(
            "some items' values were not kept (over RECRAWL_ITEM_VALUES_MAX_BYTES per page, "
            "or not kept at the visit before): their field names only"
        )
    return out


def when_line(change: PageChange) -> str:
    """``cycle 4, 2026-11-28 10:11 UTC``."""
    parts = [f"cycle {change.cycle}" if change.cycle is not None else "cycle unknown"]
    if math.isfinite(change.time):
        parts.append(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(change.time)))
    return ", ".join(parts)


def print_items(items: ItemsAtLastChange, out: Any = None) -> None:
    """The section as a person reads it (after the body's last change)."""
    from .render import _console

    con = _console(out)
    if not items.change.items:
        for note in items.notes:
            con.print(f"note: items at the last change: {note}", markup=False)
        return
    con.print(f"Items at the last change, {when_line(items.change)}:", markup=False, style="bold")
    for line in items.lines():
        con.print(f"  {line}", markup=False)
    for note in items.notes:
        con.print(f"note: {note}", markup=False)
