"""The stored item hashes never move: a record written by an earlier version must still
compare equal to the same items today (else every item of every page would read as
changed once after an upgrade). The expected values were taken from the code before the
canonical encoder got its fast paths (one encoder made once, exact scalar types written
directly: item_change._canonical)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum

import pytest
import scrapy

from scrapy_recrawl.item_change import (
    ItemKeyer,
    PageItems,
    ValueBudget,
    canonical_json,
    item_state,
    value_hash,
)


class Color(enum.IntEnum):
    RED = 1


class Tag(str):
    pass


# (value, its hash, its canonical JSON), as the earlier code gave them
SAMPLES = [
    (None, 4160016975378344247, "null"),
    (True, 8841897456878910239, "true"),
    (False, 5070117960081918908, "false"),
    (0, 4761921975702974394, "0"),
    (1, 8898586205396736955, "1"),
    (-7, 3625665032080988044, "-7"),
    (2**70, 4019297021893247216, "1180591620717411303424"),
    (1.0, 6873847864008390049, "1.0"),
    (0.1, 7107759640259791464, "0.1"),
    (-0.0, 5882711784278222589, "-0.0"),
    (1e300, 3273209074256990938, "1e+300"),
    (float("inf"), 3050293023991058526, "Infinity"),
    (float("-inf"), 535832944430326047, "-Infinity"),
    (float("nan"), 8822572633502598812, '"NaN"'),
    ("", 9071773411182589476, '""'),
    ("abc", 1930560420555392517, '"abc"'),
    ("caf\u00e9", 4575163834579340846, '"caf\u00e9"'),
    ('quote " back \\ nl \n tab \t', 3514215589882611225, r'"quote \" back \\ nl \n tab \t"'),
    ("\x00\x1f", 1802808304243196514, r'"\u0000\u001f"'),
    ("\u2028 emoji \U0001f600", 7939774300511127884, '"\u2028 emoji \U0001f600"'),
    ("$19.99", 3521312666746340121, '"$19.99"'),
    (b"\x00\xffbytes", 3849980630863080217, '{"$bytes":"AP9ieXRlcw=="}'),
    (bytearray(b"ab"), 8238534964341550161, '{"$bytes":"YWI="}'),
    ([1, "a", None], 2197685884505335020, '[1,"a",null]'),
    ((1, 2), 7107281313495128129, "[1,2]"),
    (
        {"b": 1, "a": [1, {"z": 2, "y": None}]},
        2230815093663353592,
        '{"a":[1,{"y":null,"z":2}],"b":1}',
    ),
    ({1: "int key"}, 753444389155122445, '{"1":"int key"}'),
    ({3, 1, 2}, 7879342539910910035, "[1,2,3]"),
    (frozenset({"b", "a"}), 2642578534949875390, '["a","b"]'),
    (datetime.date(2024, 1, 2), 1011280814527718904, '"2024-01-02"'),
    (datetime.datetime(2024, 1, 2, 3, 4, 5), 70461910849943904, '"2024-01-02T03:04:05"'),
    (datetime.time(1, 2), 2354049978889208684, '"01:02:00"'),
    (decimal.Decimal("1.10"), 8126843013968335348, '{"$decimal":"1.10"}'),
    (Color.RED, 8898586205396736955, "1"),  # an int subclass: the encoder's path
    (Tag("tagged"), 2091405444387433714, '"tagged"'),  # a str subclass: likewise
    (complex(1, 2), 2133822585487819449, '{"$complex":"(1+2j)"}'),
    ([[], {}], 7030479411112109399, "[[],{}]"),
    ({"nested": {"deep": [1.5, "x"]}}, 4445376028916773412, '{"nested":{"deep":[1.5,"x"]}}'),
]


# ids from the canonical text, not repr(): a set's repr follows the run's string hash
# seed, and pytest-xdist's workers must collect the same ids
@pytest.mark.parametrize(("value", "expected", "text"), SAMPLES, ids=[s[2] for s in SAMPLES])
def test_a_value_hashes_as_it_did(value, expected, text):
    assert canonical_json(value) == text
    assert value_hash(value) == expected


@dataclasses.dataclass
class Product:
    url: str
    name: str
    price: float | None
    stock: int


class Offer(scrapy.Item):
    sku = scrapy.Field()
    price = scrapy.Field()
    api_token = scrapy.Field()


def test_a_page_record_is_written_byte_for_byte_as_before():
    keyer, budget = ItemKeyer(["sku"]), ValueBudget(True, 10_000)
    states = [
        item_state(
            Product("http://shop.test/p/1", 'Caf\u00e9 "mug"', 19.99, 3),
            ItemKeyer([]),
            ValueBudget(False, 0),
        ),
        item_state(Offer(sku="A-1", price=2.5, api_token="x"), keyer, budget),
        item_state({"sku": "A-1", "price": None, "tags": {"b", "a"}}, keyer, budget),
    ]
    assert states[0].values is None and states[1].values == {"sku": "A-1", "price": 2.5}
    assert PageItems(states).to_bytes() == (
        b'{"v":1,"items":[["Product#0",{"url":3254622263904634118,"name":3173941691235501963,'
        b'"price":8789499234636044327,"stock":5697770972097857280}],'
        b'["Offer:[\\"A-1\\"]#0",{"sku":1827363331804875101,"price":3170297034991477338,'
        b'"api_token":3942826281915846374},{"sku":"A-1","price":2.5}],'
        b'["dict:[\\"A-1\\"]#0",{"sku":1827363331804875101,"price":4160016975378344247,'
        b'"tags":2642578534949875390},{"sku":"A-1","price":null,"tags":["a","b"]}]]}'
    )
    # and a record of the earlier code reads back as the same states
    assert PageItems.from_bytes(PageItems(states).to_bytes()).items == states
