"""Item-level change, the pure part (scrapy_recrawl/item_change.py): canonical hashes,
keys, the stored record, the comparison; and the held observations' bounds
(held_observations.py)."""

from __future__ import annotations

import dataclasses
import datetime
import math

import attr
import pytest
import scrapy

from scrapy_recrawl.held_observations import HeldObservations
from scrapy_recrawl.history import HistoryStoreError, Visit
from scrapy_recrawl.item_change import (
    CHANGED,
    NEW,
    REMOVED,
    UNCHANGED,
    ItemKeyer,
    PageItems,
    ValueBudget,
    canonical_json,
    compare,
    is_secret,
    item_state,
    removed,
    value_hash,
)


class Product(scrapy.Item):
    name = scrapy.Field()
    price = scrapy.Field()


@dataclasses.dataclass
class ProductDC:
    name: str
    price: float


@attr.s(auto_attribs=True)
class ProductAttrs:
    name: str
    price: float


def states(items, key=(), keep=True, limit=10_000):
    keyer, budget = ItemKeyer(key), ValueBudget(keep, limit)
    return [item_state(i, keyer, budget) for i in items]


def test_canonical_hash_ignores_key_order_and_reads_every_type():
    assert value_hash({"a": 1, "b": [1, 2]}) == value_hash({"b": [1, 2], "a": 1})
    assert value_hash({"a": 1}) != value_hash({"a": 2})
    assert value_hash(b"\x00\xff") == value_hash(bytearray(b"\x00\xff"))
    assert value_hash(b"x") != value_hash("x")  # bytes are not their text
    assert value_hash(float("nan")) == value_hash(math.nan)  # one NaN, stable
    assert value_hash({3, 1, 2}) == value_hash({2, 3, 1})
    assert value_hash(1) != value_hash(1.5)
    day = datetime.date(2026, 1, 2)
    assert canonical_json(day) == '"2026-01-02"'
    assert value_hash(Product(name="a", price=1)) == value_hash({"price": 1, "name": "a"})
    assert isinstance(value_hash(object()), int)  # anything: its str, its type's name


def test_every_kind_of_item_reads_the_same():
    kinds = [
        {"name": "a", "price": 1.0},
        Product(name="a", price=1.0),
        ProductDC("a", 1.0),
        ProductAttrs("a", 1.0),
    ]
    fields = [states([i])[0].fields for i in kinds]
    assert all(f == fields[0] for f in fields)
    assert set(fields[0]) == {"name", "price"}


def test_default_key_is_the_class_and_its_position_key_fields_pick_items():
    default = states([{"n": 1}, Product(name="x"), {"n": 2}])
    assert [s.key for s in default] == ["dict#0", "Product#0", "dict#1"]
    keyed = states([{"sku": "b", "p": 1}, {"sku": "a", "p": 2}, {"sku": "a", "p": 3}], ("sku",))
    assert keyed[0].key != keyed[1].key
    assert keyed[1].key.endswith("#0") and keyed[2].key.endswith("#1")  # same key: by order


def test_compare_new_changed_unchanged_removed_with_values():
    before = PageItems(states([{"sku": "a", "price": 1}, {"sku": "b", "price": 2}], ("sku",)))
    now = states([{"sku": "b", "price": 3}, {"sku": "c", "price": 4}], ("sku",))
    prev = {s.key: s for s in before.items}
    b, c = (compare(s, prev.get(s.key)) for s in now)
    assert b.status == CHANGED and b.fields == ("price",)
    assert b.old == {"price": 2} and b.new == {"price": 3}
    assert c.status == NEW
    gone = removed(before, [s.key for s in now])
    assert [(g.status, g.old) for g in gone] == [(REMOVED, {"sku": "a", "price": 1})]
    same = compare(states([{"sku": "b", "price": 2}], ("sku",))[0], prev[now[0].key])
    assert same.status == UNCHANGED and same.fields == ()


def test_a_field_added_or_removed_is_a_change():
    (a,) = states([{"x": 1}])
    (b,) = states([{"x": 1, "y": None}])
    assert compare(b, a).fields == ("y",)
    assert compare(a, b).fields == ("y",)


def test_record_round_trip_and_its_bounds():
    items = states([{"name": "a", "password": "hunter2", "api_token": "t"}, {"name": "b" * 50}])
    record = PageItems(items)
    back = PageItems.from_bytes(record.to_bytes())
    assert back == record
    assert items[0].values == {"name": "a"}  # a credential is hashed, never kept
    assert "hunter2" not in record.to_bytes().decode()
    small = states([{"name": "a"}, {"name": "b" * 50}], limit=20)
    assert small[0].values == {"name": "a"} and small[1].values is None  # past the limit
    assert states([{"name": "a"}], keep=False)[0].values is None  # hashes only by default
    for bad in (b"\x80", b"[]", b'{"v": 99, "items": []}', b'{"v": 1, "items": [[1, 2]]}'):
        with pytest.raises(ValueError):
            PageItems.from_bytes(bad)


def visit(n: int) -> Visit:
    return Visit(
        fingerprint=bytes([n]) * 8, url=f"http://x/{n}", time=0.0, status=200, changed=True
    )


class Recorder:
    """What held observations are recorded with: a list, or a store that is away."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, bool | None]] = []
        self.away = False

    def __call__(self, obs, changed) -> None:
        if self.away:
            raise HistoryStoreError("away")
        self.recorded.append((obs.visit.url, changed))


def test_held_observations_verdict_age_bound_and_retry():
    now = [0.0]
    rec = Recorder()
    held = HeldObservations(rec, bound=2, max_age=5.0, clock=lambda: now[0])
    a = held.hold("ra", visit(1))
    b = held.hold("rb", visit(2))
    a.complete(False)
    assert rec.recorded == [("http://x/1", False)] and len(held) == 1
    held.hold("rc", visit(3))
    held.hold("rd", visit(4))  # full: the oldest (b) keeps its text verdict
    assert rec.recorded[-1] == ("http://x/2", None)
    b.complete(False)  # too late: recorded already, once
    assert len(rec.recorded) == 2
    now[0] = 5.0
    held.expire()  # past the age: text verdict
    assert [u for u, _ in rec.recorded[2:]] == ["http://x/3", "http://x/4"]
    e = held.hold("re", visit(5))
    rec.away = True
    e.complete(True)  # the store is away: kept with its verdict
    assert len(held) == 1
    rec.away = False
    held.expire()
    assert rec.recorded[-1] == ("http://x/5", True)
    f = held.hold("rf", visit(6))
    rec.away = True
    assert held.release_all() == 1 and not f.done  # never taken: lost, counted


def test_a_full_hold_with_the_store_away_loses_the_oldest_instead_of_spinning():
    """The hold full while the store refuses visits (its writes failing past its buffer):
    the oldest is counted lost and the new one held, once; no endless retry loop."""
    rec = Recorder()
    calls = [0]

    def record(obs, changed) -> None:
        calls[0] += 1
        if calls[0] > 50:
            raise AssertionError("hold() retried the oldest without end")
        rec(obs, changed)

    held = HeldObservations(record, bound=2, max_age=60.0, clock=lambda: 0.0)
    a = held.hold("ra", visit(1))
    held.hold("rb", visit(2))
    rec.away = True
    c = held.hold("rc", visit(3))  # full, and the oldest cannot be recorded
    assert calls[0] == 1 and len(held) == 2 and a.done
    rec.away = False
    c.complete(True)
    assert rec.recorded == [("http://x/3", True)]
    assert held.release_all() == 1  # a: lost, said as the store closes
    assert rec.recorded[-1] == ("http://x/2", None)


@pytest.mark.parametrize(
    "name",
    ["password", "api_key", "apiKey", "csrf_token", "sessionCookie", "auth", "oauth",
     "x_auth", "Authorization", "authToken", "auth_token", "authentication", "XAuthHeader"],
)  # fmt: skip
def test_a_credential_field_is_never_kept_as_a_value(name):
    assert is_secret(name)


@pytest.mark.parametrize("name", ["author", "authors", "authority", "title", "price", "stock"])
def test_an_articles_author_is_not_taken_for_a_credential(name):
    # a substring test on "auth" hid an article's author: never an old -> new value
    assert not is_secret(name)
