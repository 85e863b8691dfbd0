"""Nothing read back from a store or the shared Redis is ever unpickled (issue 16 item 1).

The request codec (history/request_codec.py) round-trips Request.to_dict() as data
and refuses what is not; the Redis scheduler's queues use it by default and refuse a
pickling SCHEDULER_SERIALIZER unless RECRAWL_ALLOW_PICKLE; the basket forest is saved
as arrays; and a real crawl over a Redis whose every key holds a pickle that would
create a file runs no code.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from types import SimpleNamespace

import msgpack
import numpy as np
import pytest
from scrapy import FormRequest, Request
from scrapy.http import JsonRequest
from scrapy.settings import Settings
from scrapy.utils.request import request_from_dict

from example_project.site import RunningSite
from scrapy_recrawl.estimate.baskets import BasketModel, ModelFormatError
from scrapy_recrawl.frontier import serializer
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.history.request_codec import (
    RequestCodecError,
    decode_request,
    encode_request,
)
from scrapy_recrawl.settings import RecrawlSettingError

from .extras import require_extra
from .redis_server import RedisServer
from .test_redis_crawl import start_crawl


class _Marker:
    """Unpickled, it would run ``touch <path>``."""

    def __init__(self, path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def evil(path) -> bytes:
    return pickle.dumps(_Marker(path), protocol=4)


# -- the codec ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_",
    [
        Request("http://h/a?b=1#c", callback=None, priority=3, dont_filter=True, flags=["x"]),
        FormRequest("http://h/f", formdata={"q": "é"}, cookies={"s": "v"}, cb_kwargs={"n": 1}),
        JsonRequest("http://h/j", data={"a": [1, 2.5, None]}, meta={"b": b"\xff\x00", "d": {}}),
        Request("http://h/b", method="PUT", body=b"\x00\xff", headers={"X-A": ["1", "2"]}),
    ],
)
def test_a_request_round_trips_as_data(request_):
    d = request_.to_dict()
    back = decode_request(encode_request(d))
    again = request_from_dict(back)
    assert type(again) is type(request_)
    for attr in ("url", "method", "body", "headers", "cookies", "meta", "cb_kwargs", "priority"):
        assert getattr(again, attr) == getattr(request_, attr), attr


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (pickle.dumps({"url": "http://h/"}), "not a stored request"),
        (msgpack.packb(["http://h/"]), "map"),
        (msgpack.packb({"url": 1}), "'url'"),
        (msgpack.packb({"url": "u", "spam": 1}), "'spam'"),
        (msgpack.packb({"url": "u", "_class": "os.system"}), "'_class'"),
        (msgpack.packb({"url": "u", "_class": "antigravity.X"}), "'_class'"),  # never imported
        (msgpack.packb({"url": "u", "callback": "__init__"}), "'callback'"),
        (msgpack.packb({"url": "u", "headers": {b"A": b"x"}}), "'headers'"),
        (msgpack.packb({"url": "u", "meta": {1: 2}}), "'meta'"),
        (msgpack.packb({"url": "u", "body": "text"}), "'body'"),
        (msgpack.packb({"url": "u", "meta": {"x": msgpack.ExtType(1, b"")}}), "extension"),
        (b"", "not a stored request"),
    ],
)
def test_what_is_not_request_data_is_refused_naming_the_key(value, named):
    with pytest.raises(RequestCodecError, match=named):
        decode_request(value)
    assert "antigravity" not in __import__("sys").modules


def test_a_request_with_an_object_in_meta_cannot_be_stored():
    with pytest.raises(RequestCodecError, match="'meta'.*object"):
        encode_request(Request("http://h/", meta={"x": object()}).to_dict())


# -- the Redis scheduler's serializer ---------------------------------------------------


def test_the_queues_serializer_is_data_unless_pickling_is_allowed(caplog):
    assert serializer.choose(Settings()) is serializer  # SCHEDULER_SERIALIZER unset
    for name in ("scrapy_redis.picklecompat", "pickle"):
        with pytest.raises(RecrawlSettingError, match=f"SCHEDULER_SERIALIZER='{name}'.*CWE-502"):
            serializer.choose(Settings({"SCHEDULER_SERIALIZER": name}))
    allowed = serializer.choose(
        Settings(
            {"SCHEDULER_SERIALIZER": "scrapy_redis.picklecompat", "RECRAWL_ALLOW_PICKLE": True}
        )
    )
    assert allowed.loads(allowed.dumps({"url": "http://h/"})) == {"url": "http://h/"}
    # another serializer is used, but what it loads is still checked as a request
    lenient = SimpleNamespace(
        __name__="lenient",
        dumps=serializer.dumps,
        loads=lambda data: json.loads(data) if data[:1] == b"{" else serializer.loads(data),
    )
    js = serializer.choose(Settings({"SCHEDULER_SERIALIZER": lenient}))
    with pytest.raises(RequestCodecError, match="'_class'"):
        js.loads(json.dumps({"url": "u", "_class": "subprocess.Popen"}).encode())
    with pytest.raises(RecrawlSettingError, match="RECRAWL_ALLOW_PICKLE"):
        serializer.choose(Settings({"RECRAWL_ALLOW_PICKLE": "maybe"}))


# -- the basket forest as arrays ---------------------------------------------------------


def test_the_basket_forest_predicts_as_scikit_learn_does_and_saves_without_pickle(tmp_path):
    require_extra("ml")
    rng = np.random.default_rng(1)
    x, y = rng.random((300, 64)), rng.integers(0, 5, 300)
    model = BasketModel.fit(x, y, trees=25, relevance=rng.random(300), seed=2)
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    ref = RandomForestClassifier(n_estimators=25, random_state=2, n_jobs=1).fit(x, y)
    rel = RandomForestRegressor(n_estimators=4, random_state=2, n_jobs=1).fit(x, rng.random(300))
    test = rng.random((500, 64))
    np.testing.assert_array_equal(model.forest.predict(test), ref.predict(test))
    assert model.relevance is not None
    data = model.to_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert all(n.endswith(".npy") for n in z.namelist())
    again = BasketModel.from_bytes(data)
    np.testing.assert_array_equal(again.predict(test), model.predict(test))
    assert rel is not None  # (fitted on other targets: only the classifier is compared)


@pytest.mark.ml  # the basket forest is fitted with scikit-learn
def test_a_pickled_or_corrupt_model_file_is_refused_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    head = json.dumps({"format": 1, "offsets": [4], "baskets": [4]}).encode()
    old = tmp_path / "old.bin"
    old.write_bytes(len(head).to_bytes(4, "big") + head + evil(marker))
    with pytest.raises(ModelFormatError, match="pickle.*retrain it with `scrapy recrawl-baskets`"):
        BasketModel.load(str(old), "RECRAWL_BASKET_MODEL")
    rng = np.random.default_rng(0)
    good = BasketModel.fit(rng.random((30, 64)), np.arange(30) % 3, trees=2).to_bytes()
    for bad in (good[: len(good) // 2], b"PK" + b"\x00" * 40, evil(marker)):
        with pytest.raises(ModelFormatError, match="the model"):
            BasketModel.from_bytes(bad, "the model")
    assert not marker.exists()


@pytest.mark.ml  # the basket forest is fitted with scikit-learn
def test_a_hostile_forest_is_refused_not_walked_forever():
    rng = np.random.default_rng(0)
    model = BasketModel.fit(rng.random((30, 64)), np.arange(30) % 3, trees=2)
    arrays = dict(np.load(io.BytesIO(model.to_bytes()), allow_pickle=False))
    arrays["forest_left"] = np.zeros_like(arrays["forest_left"])  # every node its own child
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with pytest.raises(ModelFormatError, match="out of its tree"):
        BasketModel.from_bytes(buf.getvalue())


# -- a real crawl over a Redis full of pickles -------------------------------------------


#: Keys whose values are the store's own structure (ids, counters, rows, the schema
#: version, the shared cycle state): a pickle there stops the crawl, naming the key.
STRUCTURE = ("{site:history}:meta", "site:recrawl:state", "{site:history}:cycle")
#: ... or, in the rows, URL index, blobs and dictionaries' indexes the Lua scripts and the
#: store read by position (schema version 5: docs/distributed.md), fails those reads
#: (left alone here; as are each shard's meta and id counter).
NOT_POISONED = (":meta", ":next", ":rows", ":ix:", ":blobs", ":dictidx", ":hosts", ":hostidx")


def _poison(client, payload, keys) -> list[str]:
    """Write ``payload`` into each of ``keys`` as its type allows (every hash field,
    an extra element of a list, zset, set or stream, a string); returns them."""
    for key in keys:
        kind = client.type(key).decode()
        if kind == "hash":
            for field in [*client.hkeys(key), b"extra"]:
                client.hset(key, field, payload)
        elif kind == "list":
            client.lpush(key, payload)
        elif kind == "zset":
            client.zadd(key, {payload: 0})
        elif kind == "set":
            client.sadd(key, payload)
        elif kind == "stream":
            client.xadd(key, {"v": payload})
        elif kind == "string":
            client.set(key, payload)
    return list(keys)


def _data_keys(client) -> list[str]:
    keys = {k.decode() for k in client.scan_iter(match="site:*")}
    keys |= {k.decode() for k in client.scan_iter(match="{site:history*")}
    keys = {k for k in keys if k not in STRUCTURE and not k.endswith(NOT_POISONED)}
    return sorted(k for k in keys if ":ix:" not in k)


@pytest.mark.slow
def test_a_crawl_over_a_redis_full_of_pickles_runs_no_code(tmp_path):
    marker = tmp_path / "ran"
    payload = evil(marker)
    with RunningSite(pages=60, seed=4) as site, RedisServer() as server:
        options = {"RECRAWL_WARMUP_CYCLES": 0, "RECRAWL_BUDGET": 20}
        first = start_crawl(site.base_url, server.url, tmp_path, "first", **options)
        assert first.wait(180) == 0, (tmp_path / "first.log").read_text()[-3000:]
        client = server.client()
        with RedisHistoryStore(server.url, key="site:history") as store:
            assert store.frontier_size() > 0  # new URLs kept for later: a frontier to poison
        client.save()
        snapshot = {k: client.dump(k) for k in client.scan_iter(match="*")}

        # every value that is data: said, counted, skipped; the crawl goes on
        # (the queues and the workers' statuses are read mid-cycle: put there too)
        client.zadd("site:requests", {payload: 0})
        client.hset("site:recrawl:workers", "evil", payload)
        written = _poison(client, payload, _data_keys(client))
        # the requests' shapes (the store's dictionary), the frontier, the queue
        assert {"{site:history}:dict", "{site:history}:frontier:req", "site:requests"} <= set(
            written
        )
        for name in ("body", "etag", "sig"):
            assert any(k.endswith(f"}}:{name}") for k in written), name
        again = start_crawl(site.base_url, server.url, tmp_path, "again", **options)
        again.wait(180)
        log = (tmp_path / "again.log").read_text()
        assert not marker.exists(), "a pickle read back from Redis ran"
        assert again.returncode == 0, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
        stats = json.loads((tmp_path / "again.stats.json").read_text())
        assert "of {site:history}:dict" in log and "is not a stored request" in log
        assert "an entry of {site:history}:frontier:req" in log
        assert "a value of the queue site:requests" in log
        assert stats["recrawl/unreadable_stored_requests"] >= 1
        assert stats["recrawl/unreadable_queue_values"] >= 1
        assert stats["response_received_count"] > 0

        # the store's structure: the crawl stops at start-up, one line naming the key
        for key in STRUCTURE:
            client.flushall()
            for k, v in snapshot.items():
                client.restore(k, 0, v)
            _poison(client, payload, [key])
            name = key.replace(":", "_")
            proc = start_crawl(site.base_url, server.url, tmp_path, name, **options)
            proc.wait(180)
            log = (tmp_path / f"{name}.log").read_text()
            assert not marker.exists(), key
            # a key read as the spider opens (the cycle state, the cycle counter) closes it
            # before anything is fetched: exit status 1 all the same
            assert proc.returncode == 1, (key, log[-3000:])
            assert "Traceback" not in log, (key, log[-3000:])
            assert f"the key {key} " in log, (key, log[-3000:])
        client.close()


def test_a_serializer_that_cannot_carry_a_request_is_refused_naming_the_setting():
    # scrapy-redis documents "json"; a Scrapy request's headers are bytes
    with pytest.raises(RecrawlSettingError) as err:
        serializer.choose(Settings({"SCHEDULER_SERIALIZER": "json"}))
    message = str(err.value)
    assert message.startswith("SCHEDULER_SERIALIZER='json' cannot encode a Scrapy request")
    assert "\n" not in message
    # one that encodes but reads something else back
    lossy = SimpleNamespace(
        __name__="lossy",
        dumps=serializer.dumps,
        loads=lambda data: {**serializer.loads(data), "body": b""},
    )
    with pytest.raises(RecrawlSettingError, match=r"'lossy' does not read .* \(changed: body\)"):
        serializer.choose(Settings({"SCHEDULER_SERIALIZER": lossy}))
