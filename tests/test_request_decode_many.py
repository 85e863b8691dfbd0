"""The request codec's quick path (history/request_codec.py: decode_stored_many and
_plainly_a_request, what a cycle's requests() decodes its ~500,000 picks with) gives
exactly what decode_stored gives one value at a time, warnings and refusals included,
and never accepts a value the full check refuses (a random walk over mutated
requests)."""

from __future__ import annotations

import logging
import random

import msgpack
import pytest

from scrapy_recrawl.history import request_codec
from scrapy_recrawl.history.request_codec import (
    RequestCodecError,
    _check_request_fully,
    _plainly_a_request,
    decode_stored,
    decode_stored_many,
)


def _request(**kw):
    return {
        "url": "http://h/p",
        "callback": "parse",
        "errback": None,
        "headers": {b"Accept": [b"text/html"]},
        "body": b"",
        "cookies": {},
        "meta": {"depth": 2},
        "encoding": "utf-8",
        "flags": [],
        "cb_kwargs": {},
        "dont_filter": False,
        "method": "GET",
        "priority": 0,
        **kw,
    }


#: values each key may be given by the walk: good and bad, shallow and deep
_VALUES = [
    None,
    True,
    0,
    1,
    -3,
    2.5,
    "",
    "parse_item",
    "__init__",
    "class",
    "not a name",
    b"",
    b"\xff",
    [],
    ["x"],
    [b"x"],
    [1, "a"],
    [[1]],
    {},
    {"a": 1},
    {"a": [1, {"b": None}]},
    {1: 2},
    {b"k": b"v"},
    {b"k": [b"v"]},
    {"x": {"y": {"z": 1}}},
    msgpack.ExtType(1, b""),
]

_KEYS = sorted(request_codec.REQUEST_KEYS | {"spam"})


def _mutations(seed: int, count: int) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        d = _request()
        for _ in range(rng.randrange(1, 4)):
            op = rng.random()
            key = rng.choice(_KEYS)
            if op < 0.15:
                d.pop(key, None)
            else:
                d[key] = rng.choice(_VALUES)
        out.append(d)
    return out


def _full(d) -> bool:
    try:
        _check_request_fully(d)
    except RequestCodecError:
        return False
    return True


@pytest.mark.parametrize("seed", range(3))
def test_the_quick_look_never_accepts_what_the_full_check_refuses(seed):
    request_codec.check_request(_request())  # its callback's name now known
    assert _plainly_a_request(_request())
    quick = valid = 0
    for d in _mutations(seed, 3000):
        valid += _full(d)
        if _plainly_a_request(d):
            quick += 1
            assert _full(d), d
    assert quick > valid / 3  # the walk does reach the quick path, often


def _blob(d) -> bytes:
    try:
        return msgpack.packb(d, use_bin_type=True)
    except (TypeError, ValueError):
        return b"\xc1"  # never used in MessagePack: not a request


@pytest.mark.parametrize("seed", range(2))
def test_decode_stored_many_equals_decode_stored_one_by_one(seed, caplog):
    dicts = _mutations(seed, 800) + [_request(), _request(url="http://h/q")] * 50
    blobs: list = [_blob(d) for d in dicts]
    blobs += [None, b"", b"\x93\x01\x02\x03", b"not msgpack", _blob(["http://h/"]), None]
    random.Random(seed).shuffle(blobs)
    with caplog.at_level(logging.WARNING, "scrapy_recrawl.history"):
        one = [None if b is None else decode_stored(b, f"row {i}") for i, b in enumerate(blobs)]
        said_one = [r.getMessage() for r in caplog.records]
        caplog.clear()
        many = decode_stored_many(blobs, lambda i: f"row {i}")
        said_many = [r.getMessage() for r in caplog.records]
    assert many == one
    assert said_many == said_one and len(said_one) > 10
    assert sum(d is not None for d in many) > 200


#: each request's own containers (a caller may change one request's headers or meta)
_CONTAINERS = ("headers", "cookies", "meta", "flags", "cb_kwargs")


def test_decoded_requests_share_their_common_strings_and_nothing_mutable():
    blobs = [
        _blob(_request(url=f"http://h/{i}", cookies={"c": "v"}, flags=["f"], cb_kwargs={"a": [1]}))
        for i in range(3)
    ]
    many = decode_stored_many(blobs, str)
    assert many == [decode_stored(b, "row") for b in blobs]
    first, *others = many
    for d in others:
        for key in ("method", "encoding", "callback"):
            assert d[key] == first[key] and d[key] is first[key], key
        for key in _CONTAINERS:
            assert d[key] == first[key] and d[key] is not first[key], key
    # a caller changes one request: the others are as decoded
    first["headers"][b"X"] = [b"y"]
    first["meta"]["depth"] = 9
    first["flags"].append("g")
    first["cb_kwargs"]["a"].append(2)
    first["cookies"]["c"] = "w"
    assert others == [decode_stored(b, "row") for b in blobs[1:]]


def test_the_shared_strings_stay_bounded(monkeypatch):
    monkeypatch.setattr(request_codec, "_SHARED", {None: None})
    monkeypatch.setattr(request_codec, "_SHARED_MAX", 8)
    blobs = [_blob(_request(method=f"M{i}", encoding=f"e{i}")) for i in range(20)]
    many = decode_stored_many(blobs, str)
    assert [(d["method"], d["encoding"]) for d in many] == [(f"M{i}", f"e{i}") for i in range(20)]
    assert len(request_codec._SHARED) == 8
    # those it holds are still shared; the others are each request's own, as decoded
    again = decode_stored_many(blobs[:1], str)[0]
    assert again["method"] is many[0]["method"]
    assert decode_stored_many(blobs[19:], str)[0]["method"] is not many[19]["method"]


def test_a_crawlspider_link_text_takes_the_quick_look():
    """CrawlSpider puts lxml's str (a subclass) in meta["link_text"]: plain data, as the
    full check has it, seen at once (it took the full walk for every link before)."""
    from lxml import html

    text = html.fromstring("<a href='/p'>Page 9</a>").xpath("//a/text()")[0]
    assert type(text) is not str and isinstance(text, str)
    d = _request(meta={"link_text": text, "depth": 1})
    request_codec.check_request(_request())  # its callback's name now known
    assert _full(d) and _plainly_a_request(d)
