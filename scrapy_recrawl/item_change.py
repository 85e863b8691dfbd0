"""Item-level change: a page's items against the items it yielded at its previous visit.

Why: a Scrapy project already says what it cares about on a page -- the items its
callbacks yield. Comparing those (rather than the page's text) tells the spider *which*
item changed and *which* fields, and lets the history learn from what the spider
extracts (``RECRAWL_CHANGE_SIGNAL = "items"``: held_observations.py).

Each item is identified by a key: the values of the ``RECRAWL_ITEM_KEY`` fields (a
spider's ``recrawl_item_key`` attribute wins), or by default its class and its
position among the page's items of that class. Two items with the same key on one page
are told apart by their order. Field values are hashed canonically (:func:`value_hash`:
the JSON of the value with sorted keys; bytes, sets, dates, NaN and nested items read
the same way every time), so the stored record of a page (:class:`PageItems`) is a few
hashes per item; the values themselves only when ``RECRAWL_ITEM_VALUES`` is on, within
``RECRAWL_ITEM_VALUES_MAX_BYTES`` per page, and never of a field whose name says it is
a credential (:data:`SECRET_WORDS`).

A page's last item change (:class:`PageChange`: when, and per new, changed or removed
item its key, the field names and, where kept, old -> new values) is kept beside the
record (:data:`LAST_CHANGE_TABLE`), since the record itself is replaced at every visit:
``recrawl-report --url`` shows it. Its values obey the same per-page bound and
credential rule as the record's.

Pure: no Scrapy, no store; item_watch.py reads and writes the records through the
store contract's side storage (:data:`ITEMS_TABLE`, :data:`LAST_CHANGE_TABLE`).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

from itemadapter import ItemAdapter

#: the side-storage table of the page records (key: the page's URL id)
ITEMS_TABLE = "item_changes"
#: the side-storage table of each page's last item change (key: the page's URL id)
LAST_CHANGE_TABLE = "item_last_change"
#: the record's format (a record of another version is no baseline: a first observation)
RECORD_VERSION = 1
#: the last change record's format (one of another version is not shown)
CHANGE_VERSION = 1

NEW = "new"
CHANGED = "changed"
UNCHANGED = "unchanged"
REMOVED = "removed"

#: a field whose lower-cased name contains one of these is never kept as a value
SECRET_WORDS = ("password", "passwd", "secret", "token", "apikey", "api_key", "cookie")
#: ... nor one with a word that is authentication: ``auth``, ``oauth``, ``x_auth``,
#: ``authorization``, ``authToken``, ``authentication`` (but ``author``, ``authority``
#: are an article's fields, not credentials: a substring test would hide their values)
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data, the same for equal values every time."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        # json writes NaN/inf as bare words; one spelling for every NaN
        return "NaN" if math.isnan(value) else value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if ItemAdapter.is_item(value):
        return {str(k): _plain(v) for k, v in ItemAdapter(value).items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=_canonical)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    return {"$" + type(value).__name__: str(value)}


#: the canonical encoder, made once: ``json.dumps`` with these options builds a new
#: encoder at every call (the text is the same)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode = _ENCODER.encode

#: the canonical JSON of a plain scalar of exactly these types, as ``_ENCODER`` writes it
#: (a field value is most often one; a subclass, e.g. an IntEnum, takes the encoder)
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    int: int.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
    float: lambda v: float.__repr__(v) if math.isfinite(v) else _encode(v),
}


#: a stored record's encoder (compact; made once, like ``_ENCODER``)
_encode_record = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _canonical(value: Any) -> str:
    scalar = _SCALARS.get(type(value))
    return _encode(value) if scalar is None else scalar(value)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a field value (module docstring)."""
    return _canonical(_plain(value))


def value_hash(value: Any) -> int:
    """A 63-bit hash of a field value's canonical JSON (stable across processes)."""
    return value_hash_plain(_plain(value))


def value_hash_plain(plain: Any) -> int:
    """:func:`value_hash` of a value already made plain data."""
    digest = hashlib.blake2b(_canonical(plain).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@functools.lru_cache(maxsize=4096)  # a crawl's field names are few: asked per item
def is_secret(name: str) -> bool:
    lowered = name.lower()
    if any(word in lowered for word in SECRET_WORDS):
        return True
    for word in _WORD.findall(name):
        w = word.lower()
        if w.endswith("auth") or w.startswith(("authoriz", "authent")):
            return True
    return False


@dataclass
class ItemState:
    """One item as a record keeps it: its key, a hash per field, and the values kept."""

    key: str
    fields: dict[str, int]
    values: dict[str, Any] | None = None

    def to_json(self) -> list[Any]:
        return (
            [self.key, self.fields] if self.values is None else [self.key, self.fields, self.values]
        )

    @classmethod
    def from_json(cls, data: Any) -> ItemState:
        if not isinstance(data, list) or len(data) not in (2, 3):
            raise ValueError("not an item entry")
        key, fields = data[0], data[1]
        values = data[2] if len(data) == 3 else None
        if not isinstance(key, str) or not isinstance(fields, dict):
            raise ValueError("not an item entry")
        if not all(isinstance(v, int) for v in fields.values()):
            raise ValueError("not an item entry")
        if values is not None and not isinstance(values, dict):
            raise ValueError("not an item entry")
        return cls(key, {str(k): int(v) for k, v in fields.items()}, values)


def _decode_record(data: bytes, version: int, what: str) -> dict[str, Any]:
    """The JSON object a record's bytes hold, of ``version``; ValueError naming ``what``."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not an {what}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("v") != version:
        raise ValueError(f"not an {what} of this version")
    return doc


@dataclass
class PageItems:
    """The items one visit of a page yielded, as stored (JSON: plain data, no pickles)."""

    items: list[ItemState] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        doc = {"v": RECORD_VERSION, "items": [s.to_json() for s in self.items]}
        return _encode_record(doc).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> PageItems:
        """Raises ValueError for bytes that are not a record of this version."""
        doc = _decode_record(data, RECORD_VERSION, "item record")
        return cls([ItemState.from_json(x) for x in doc.get("items") or []])


@dataclass
class ItemChange:
    """One item's change status against the page's previous visit.

    ``fields``: the names of the fields that changed (added or removed fields among
    them); ``old`` / ``new``: the values of those fields, where both visits kept them
    (``RECRAWL_ITEM_VALUES``); ``item``: the item the callback yielded (None: removed)."""

    key: str
    status: str
    fields: tuple[str, ...] = ()
    old: dict[str, Any] = field(default_factory=dict)
    new: dict[str, Any] = field(default_factory=dict)
    item: Any = None


class ItemKeyer:
    """Gives each item of one page its key (module docstring); one per response."""

    def __init__(self, key_fields: Sequence[str]) -> None:
        self.key_fields = tuple(key_fields)
        self._seen: dict[str, int] = {}

    def key(self, adapter: ItemAdapter) -> str:
        cls = type(adapter.item).__name__
        if self.key_fields:
            base = cls + ":" + canonical_json([adapter.get(f) for f in self.key_fields])
        else:
            base = cls
        n = self._seen.get(base, 0)
        self._seen[base] = n + 1
        # the n-th item of that key on the page: its position (the default key), or which
        # of the items sharing key values
        return f"{base}#{n}"


class ValueBudget:
    """``RECRAWL_ITEM_VALUES``: values kept per page, at most ``limit`` bytes of JSON."""

    def __init__(self, keep: bool, limit: int) -> None:
        self.keep = keep
        self.left = int(limit)

    def take(self, values: Mapping[str, Any]) -> dict[str, Any] | None:
        if not self.keep:
            return None
        size = len(_canonical(values).encode("utf-8"))
        if size > self.left:
            self.left = 0  # the page's budget is spent: later items keep hashes only
            return None
        self.left -= size
        return dict(values)


def item_state(item: Any, keyer: ItemKeyer, values: ValueBudget) -> ItemState:
    """The stored form of ``item`` (a dict, scrapy.Item, dataclass or attrs object)."""
    adapter = ItemAdapter(item)
    plain: dict[str, Any] = {}
    fields: dict[str, int] = {}
    for k, v in adapter.items():
        name = str(k)
        plain[name] = p = _plain(v)
        fields[name] = value_hash_plain(p)
    kept = (
        values.take({k: v for k, v in plain.items() if not is_secret(k)}) if values.keep else None
    )
    return ItemState(keyer.key(adapter), fields, kept)


def compare(state: ItemState, before: ItemState | None, item: Any = None) -> ItemChange:
    """``state`` (this visit) against the same key's ``before`` (None: a new item)."""
    if before is None:
        fields = tuple(sorted(state.fields))
        return ItemChange(state.key, NEW, fields, new=dict(state.values or {}), item=item)
    names = sorted(
        n
        for n in set(state.fields) | set(before.fields)
        if state.fields.get(n) != before.fields.get(n)
    )
    if not names:
        return ItemChange(state.key, UNCHANGED, item=item)
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    if state.values is not None and before.values is not None:
        for n in names:
            if n in before.values or n in state.values:
                old[n] = before.values.get(n)
                new[n] = state.values.get(n)
    return ItemChange(state.key, CHANGED, tuple(names), old, new, item)


def removed(before: PageItems | None, seen: Iterable[str]) -> list[ItemChange]:
    """The items of the previous visit whose keys this visit did not yield."""
    if before is None:
        return []
    keys = set(seen)
    return [
        ItemChange(s.key, REMOVED, tuple(sorted(s.fields)), old=dict(s.values or {}))
        for s in before.items
        if s.key not in keys
    ]


@dataclass
class PageChange:
    """A page's last item change, as stored (:data:`LAST_CHANGE_TABLE`; JSON, no pickles).

    ``items``: the new, changed and removed items (:class:`ItemChange` without ``item``);
    their ``old`` / ``new`` hold values only where they were kept within the page's
    bound (empty: the field names only). ``values``: ``RECRAWL_ITEM_VALUES`` was on."""

    cycle: int | None
    time: float
    items: list[ItemChange] = field(default_factory=list)
    values: bool = False

    @classmethod
    def of(
        cls, changes: Iterable[ItemChange], cycle: int | None, time: float, budget: ValueBudget
    ) -> PageChange:
        """The change of a page from its items' changes (unchanged ones left out); the
        values within ``budget`` (a fresh one: the record's bound), in the items' order,
        never a credential's (an item's values that do not fit: its field names only)."""
        items = []
        for c in changes:
            if c.status == UNCHANGED:
                continue
            old = {k: v for k, v in c.old.items() if not is_secret(k)}
            new = {k: v for k, v in c.new.items() if not is_secret(k)}
            kept = budget.take({"old": old, "new": new}) if (old or new) else None
            if kept is None:
                old, new = {}, {}
            items.append(ItemChange(c.key, c.status, tuple(c.fields), old, new))
        return cls(cycle, float(time), items, budget.keep)

    def to_bytes(self) -> bytes:
        def entry(c: ItemChange) -> dict[str, Any]:
            out: dict[str, Any] = {"k": c.key, "s": c.status, "f": list(c.fields)}
            if c.old or c.new:
                out["o"], out["n"] = c.old, c.new
            return out

        doc = {
            "v": CHANGE_VERSION,
            "cycle": self.cycle,
            "time": self.time if math.isfinite(self.time) else None,
            "values": self.values,
            "items": [entry(c) for c in self.items],
        }
        return _encode_record(doc).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> PageChange:
        """Raises ValueError for bytes that are not a change record of this version."""
        doc = _decode_record(data, CHANGE_VERSION, "item change record")
        cycle, when = doc.get("cycle"), doc.get("time")
        entries = doc.get("items")
        if (
            not (cycle is None or isinstance(cycle, int))
            or not (when is None or isinstance(when, (int, float)))
            or not isinstance(entries, list)
        ):
            raise ValueError("not an item change record")
        items = []
        for e in entries:
            if not isinstance(e, dict) or not isinstance(e.get("k"), str):
                raise ValueError("not an item change entry")
            status, names = e.get("s"), e.get("f")
            old, new = e.get("o") or {}, e.get("n") or {}
            if status not in (NEW, CHANGED, REMOVED) or not isinstance(names, list):
                raise ValueError("not an item change entry")
            if not isinstance(old, dict) or not isinstance(new, dict):
                raise ValueError("not an item change entry")
            items.append(ItemChange(e["k"], status, tuple(str(n) for n in names), old, new))
        return cls(cycle, math.nan if when is None else float(when), items, bool(doc.get("values")))
