"""The distributed frontier's pieces on a single Redis and on a real three-master
Redis Cluster: the queues and the dupefilter (frontier/queues.py), the key names
(one hash tag per spider on a cluster), the classes refused there, the one-line
mismatch between RECRAWL_REDIS_CLUSTER and the Redis found, and recrawl-reset.

The multi-process crawls on the cluster are tests/test_redis_crawl.py's and
tests/test_once_per_cycle.py's (tests/redis_deploy.py)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from redis.crc import key_slot
from scrapy import Request, Spider
from scrapy.settings import Settings

from scrapy_recrawl.frontier import queues, serializer
from scrapy_recrawl.frontier.redis import reset_spider, spider_keys
from scrapy_recrawl.history.redis_connection import RedisModeError
from scrapy_recrawl.history.request_codec import decode_request
from scrapy_recrawl.redis_settings import redis_from_settings
from scrapy_recrawl.settings import RecrawlSettingError

from .cli_project import make_project, scrapy
from .test_startup_failures import assert_one_line


class _Spider(Spider):
    name = "site"


def _settings(redis, **extra) -> Settings:  # noqa: F811
    return Settings(
        {"SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler", **redis.settings("site"), **extra}
    )


def _queue(cls, redis, key="{site}:requests"):  # noqa: F811
    return cls(server=redis.client(), spider=_Spider(), key=key, serializer=serializer)


# -- the queues and the dupefilter ---------------------------------------------------


def test_the_priority_queue_pops_highest_priority_first_as_data(redis_deployment):  # noqa: F811
    q = _queue(queues.PriorityQueue, redis_deployment)
    for i, priority in enumerate([0, 5, -3, 5, 2]):
        q.push(Request(f"http://h/{i}", priority=priority, meta={"i": i}))
    assert len(q) == 5
    # the stored values are request data (the codec), never a pickle
    for value, _score in q.server.zrange(q.key, 0, -1, withscores=True):
        assert decode_request(value)["url"].startswith("http://h/")
    popped = [q.pop() for _ in range(5)]
    assert [r.priority for r in popped] == [5, 5, 2, 0, -3]
    assert q.pop() is None and len(q) == 0
    q.push(Request("http://h/x"))
    q.clear()
    assert len(q) == 0


@pytest.mark.parametrize(
    "cls, order", [(queues.FifoQueue, [0, 1, 2]), (queues.LifoQueue, [2, 1, 0])]
)
def test_the_list_queues_keep_their_order(redis_deployment, cls, order):  # noqa: F811
    q = _queue(cls, redis_deployment)
    for i in range(3):
        q.push(Request(f"http://h/{i}"))
    assert len(q) == 3
    assert [q.pop().url for _ in range(3)] == [f"http://h/{i}" for i in order]
    assert q.pop() is None


def test_no_two_poppers_get_the_same_request(redis_deployment):  # noqa: F811
    pushed = 600
    q = _queue(queues.PriorityQueue, redis_deployment)
    for i in range(pushed):
        q.push(Request(f"http://h/{i}", priority=i % 7))
    got: list[list[str]] = [[] for _ in range(4)]

    def pop_all(out: list[str]) -> None:
        mine = _queue(queues.PriorityQueue, redis_deployment)  # its own connection
        while (request := mine.pop()) is not None:
            out.append(request.url)

    threads = [threading.Thread(target=pop_all, args=(out,)) for out in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    urls = [u for out in got for u in out]
    assert len(urls) == pushed and len(set(urls)) == pushed


def test_the_dupefilter_sees_a_request_once(redis_deployment):  # noqa: F811
    df = queues.RedisDupeFilter(redis_deployment.client(), key="{site}:dupefilter:1")
    a, b = Request("http://h/a"), Request("http://h/b")
    assert not df.request_seen(a) and df.request_seen(a)
    assert not df.request_seen(b)
    assert df.request_fingerprint(a) != df.request_fingerprint(b)
    df.close("finished")
    assert not df.request_seen(a)
    df.clear()


# -- keys and classes ---------------------------------------------------------------------


def test_a_spiders_keys_share_one_slot_on_a_cluster_and_are_unchanged_on_one_redis():
    single = spider_keys(Settings(), "site", cluster=False)
    assert (single.scheduler, single.queue, single.dupefilter_of(3)) == (
        "site:recrawl",
        "site:requests",
        "site:dupefilter:3",
    )
    tagged = spider_keys(Settings(), "site", cluster=True)
    assert (tagged.scheduler, tagged.queue, tagged.dupefilter_of(3)) == (
        "{site}:recrawl",
        "{site}:requests",
        "{site}:dupefilter:3",
    )
    names = [f"{tagged.scheduler}:{n}" for n in ("state", "taken", "lock", "fetched:3")]
    assert len({key_slot(k.encode()) for k in [*names, tagged.queue, tagged.dupefilter_of(3)]}) == 1
    with pytest.raises(RecrawlSettingError, match="must share one hash tag"):
        spider_keys(Settings({"SCHEDULER_QUEUE_KEY": "requests"}), "site", cluster=True)


def test_the_queue_and_dupefilter_classes_by_mode():
    from scrapy_redis.dupefilter import RFPDupeFilter
    from scrapy_redis.queue import FifoQueue, PriorityQueue

    # a single Redis: scrapy-redis's, as before
    assert queues.queue_and_dupefilter(Settings(), False) == (PriorityQueue, RFPDupeFilter)
    # a cluster: this package's, or a scrapy-redis class that works there
    assert queues.queue_and_dupefilter(Settings(), True) == (
        queues.PriorityQueue,
        queues.RedisDupeFilter,
    )
    fifo = Settings({"SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue"})
    assert queues.queue_and_dupefilter(fifo, True)[0] is FifoQueue
    with pytest.raises(
        RecrawlSettingError, match=r"^SCHEDULER_QUEUE_CLASS=.*MULTI.*RECRAWL_REDIS_CLUSTER"
    ):
        queues.queue_and_dupefilter(
            Settings({"SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue"}), True
        )
    scrapy_df = Settings({"DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter"})
    with pytest.raises(RecrawlSettingError, match=r"^DUPEFILTER_CLASS=.*RECRAWL_REDIS_CLUSTER"):
        queues.queue_and_dupefilter(scrapy_df, True)
    assert queues.queue_and_dupefilter(scrapy_df, False)[1] is RFPDupeFilter


# -- the setting against the Redis found --------------------------------------------------


def test_a_cluster_named_but_a_single_redis_found_is_one_line(_deploy_single):  # noqa: F811
    settings = Settings({"REDIS_URL": _deploy_single.url, "RECRAWL_REDIS_CLUSTER": True})
    with pytest.raises(
        RedisModeError,
        match="is a single Redis, not a Redis Cluster node, but RECRAWL_REDIS_CLUSTER is True",
    ):
        redis_from_settings(settings)


def test_a_cluster_node_named_without_the_setting_is_one_line(redis_cluster):  # noqa: F811
    client, _ = redis_from_settings(Settings({"REDIS_URL": redis_cluster.url}))
    with pytest.raises(
        RedisModeError, match="is a Redis Cluster node, but RECRAWL_REDIS_CLUSTER is False"
    ):
        client.ping()
    client.close()
    client, location = redis_from_settings(
        Settings({"REDIS_URL": redis_cluster.url, "RECRAWL_REDIS_CLUSTER": True})
    )
    assert client.ping() and "(Redis Cluster)" in location
    client.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_crawl_with_the_wrong_setting_stops_at_start_up_in_one_line(
    kind,
    tmp_path,
    _deploy_single,  # noqa: F811
):
    from .redis_cluster import shared_cluster

    if kind == "single":  # a single Redis, the setting on
        url, setting, said = (
            _deploy_single.url,
            "True",
            "is a single Redis, not a Redis Cluster node",
        )
    else:  # a cluster node, the setting off
        url, setting, said = shared_cluster().url, "False", "is a Redis Cluster node"
    project = make_project(tmp_path)
    run = scrapy(
        project,
        "crawl",
        "pages",
        "-a",
        "start_url=http://127.0.0.1:9/",
        "-s",
        "SCHEDULER=scrapy_recrawl.RedisRecrawlScheduler",
        "-s",
        f"REDIS_URL={url}",
        "-s",
        f"RECRAWL_REDIS_CLUSTER={setting}",
    )
    assert_one_line(run, said, "RECRAWL_REDIS_CLUSTER")
    assert run.returncode == 1


def test_reset_deletes_the_spiders_tagged_keys_on_a_cluster(redis_deployment):  # noqa: F811
    settings = _settings(redis_deployment)
    names = spider_keys(settings, "site", redis_deployment.kind == "cluster")
    other = spider_keys(settings, "other", redis_deployment.kind == "cluster")
    client = redis_deployment.client()
    for keys in (names, other):
        client.hset(f"{keys.scheduler}:state", "cycle", 1)
        client.hset(f"{keys.scheduler}:starts:1", "fp", "w")
        client.hset(f"{keys.scheduler}:fetched:1", "fp", "x")
        client.sadd(keys.dupefilter_of(1), "fp")
        client.lpush(keys.queue, "r")
    _, deleted = reset_spider(settings, "site")
    assert deleted == 5
    assert client.exists(f"{other.scheduler}:state", other.queue, other.dupefilter_of(1)) == 3
    assert not client.exists(f"{names.scheduler}:state", names.queue, names.dupefilter_of(1))
    client.close()


def test_the_location_of_a_cluster_is_known_without_connecting():
    from scrapy_recrawl.redis_settings import redis_location

    # nothing listens there: a cluster client built from these settings would fail
    settings = Settings({"REDIS_URL": "redis://:pw@127.0.0.1:1/0", "RECRAWL_REDIS_CLUSTER": True})
    assert redis_location(settings) == "redis://:***@127.0.0.1:1/0 (Redis Cluster)"
    assert (
        redis_location(Settings({"REDIS_URL": "redis://127.0.0.1:1/0"})) == "redis://127.0.0.1:1/0"
    )


@pytest.mark.slow
def test_the_master_of_the_spiders_slot_restarted_mid_crawl_is_waited_out(tmp_path):
    """Everything on a cluster of AOF nodes: the master of the spider's frontier slot
    (and of some of the store's shards) restarts mid-crawl; the crawl waits, finishes
    and closes its cycle, and every shard's rows agree with its visit log."""
    from example_project.site import RunningSite

    from .redis_cluster import RedisCluster
    from .redis_deploy import Deployment
    from .test_redis_crawl import crawl_until_served, finish

    with RedisCluster(appendonly=True) as cluster, RunningSite(pages=600, seed=5) as site:
        redis = Deployment("cluster", cluster)
        redis.flush()
        proc = crawl_until_served(site, redis.url, tmp_path, **redis.settings("site"))
        master = cluster.node_of(redis.frontier_key("site", "state"))
        master.restart(down_seconds=2.0)  # SIGTERM, 2 s away, same port, data and slots
        cluster.wait_ok()
        stats = finish([proc], tmp_path, ["crawl"])[0]
        log = (tmp_path / "crawl.log").read_text()
        client = redis.client()
        state = client.hgetall(redis.frontier_key("site", "state"))
        client.close()
        with redis.store("site:history") as store:  # on the cluster too, its shards spread
            arr = store.arrays()
            visits = store.visit_log()
            rows, _ = store.rows()
            cycle, known = store.cycle, len(store)
    # it noticed, said which Redis, and carried on to the end of the cycle
    assert f"the Redis at {cluster.url} (Redis Cluster) is unreachable" in log
    assert "is back after" in log
    assert stats["finish_reason"] == "finished"
    assert stats["recrawl/redis_outages"] >= 1
    assert state[b"cycle"] == b"1" and state[b"done"] == b"1"  # closed by the crawl, on the cluster
    assert cycle == 1 and known > 300  # most of the site, before and after the restart
    per_url = Counter(visits["url_id"].tolist())
    observed = Counter(visits["url_id"][visits["changed"] >= 0].tolist())
    # no per-URL counter ahead of (or behind) the visit log of its shard
    for i, uid in enumerate(arr.ids.tolist()):
        assert int(rows["visits"][uid - 1]) == per_url[uid]
        assert int(arr.columns["n"][i]) == observed.get(uid, 0)


def test_a_queue_built_without_a_serializer_stores_data_never_a_pickle(redis_deployment):  # noqa: F811
    # scrapy-redis's Base would fall back to its pickle; these fall back to the codec
    for cls in (queues.PriorityQueue, queues.FifoQueue, queues.LifoQueue):
        q = cls(redis_deployment.client(), _Spider(), "{site}:requests")
        q.push(Request("http://h/a", meta={"k": 1}))
        raw = (
            q.server.zrange(q.key, 0, 0)
            if cls is queues.PriorityQueue
            else q.server.lrange(q.key, 0, 0)
        )
        assert decode_request(raw[0])["meta"] == {"k": 1}
        assert q.pop().meta["k"] == 1
        q.server.close()


def test_a_redis_that_refuses_info_is_still_used(_deploy_single):  # noqa: F811
    # an ACL user allowed everything but INFO (as some managed Redis give): no check, no failure
    admin = _deploy_single.client()
    admin.acl_setuser(
        "crawler", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
    )
    try:
        url = f"redis://crawler:pw@127.0.0.1:{_deploy_single.port}/0"
        client, _ = redis_from_settings(Settings({"REDIS_URL": url}))
        assert client.ping() and client.set("k", "v")
        client.close()
    finally:
        admin.acl_deluser("crawler")
        admin.close()


def test_every_write_of_the_shared_cycle_is_fenced_by_the_epoch(redis_deployment):  # noqa: F811
    """The fence (frontier/redis.py): under the epoch taken at open every write goes
    through; once recrawl-reset deleted the cycle's keys (its epoch key with them)
    every one is refused and re-creates nothing, on one Redis and on a cluster."""
    from scrapy_recrawl.frontier.redis import FencedClient, RedisFrontier
    from scrapy_recrawl.history import StoreLost

    keys = spider_keys(_settings(redis_deployment), "site", redis_deployment.kind == "cluster")
    client = redis_deployment.client()
    frontier = RedisFrontier(client, keys.scheduler, "w1", lock_seconds=5)
    fenced = FencedClient(frontier)
    frontier.take_epoch("epoch-1")
    spider, df_key = _Spider(), keys.dupefilter_of(1)
    newqs = queues.PriorityQueue(server=fenced, spider=spider, key=keys.queue)
    recrawls = queues.FifoQueue(server=fenced, spider=spider, key=f"{keys.scheduler}:recrawls")
    dupes = queues.RedisDupeFilter(fenced, key=df_key)

    def write_everything(n: int) -> None:
        frontier.open_cycle({"cycle": 1, "total": 10, "new": 5, "done": 0})
        frontier.push_recrawls(recrawls, 1, df_key, [({"url": f"http://h/r{n}"}, f"r{n}")])
        newqs.push(Request(f"http://h/new{n}"))
        dupes.request_seen(Request(f"http://h/seen{n}"))
        assert frontier.reserve("new", 10, 5)
        frontier.give_back("new")
        frontier.claim_start(1, f"s{n}")
        frontier.mark_fetched(1, f"f{n}", spider=False)
        frontier.write_status(1, busy=True)

    write_everything(1)
    assert len(newqs) == 1 and len(recrawls) == 1 and dupes.request_seen(Request("http://h/seen1"))
    assert frontier.workers(30) and frontier.state()["cycle"] == "1"

    reset_spider(_settings(redis_deployment), "site")
    calls = [
        lambda: frontier.open_cycle({"cycle": 2, "total": 10, "new": 5, "done": 0}),
        lambda: frontier.push_recrawls(recrawls, 1, df_key, [({"url": "http://h/r2"}, "r2")]),
        lambda: newqs.push(Request("http://h/new2")),
        lambda: recrawls.push(Request("http://h/r3")),
        lambda: dupes.request_seen(Request("http://h/seen2")),
        lambda: frontier.reserve("new", 10, 5),
        lambda: frontier.give_back("new"),
        lambda: frontier.claim_start(1, "s2"),
        lambda: frontier.mark_fetched(1, "f2", spider=False),
        lambda: frontier.write_status(1, busy=True),
        lambda: frontier.close_cycle(1, df_key),
    ]
    for call in calls:
        with pytest.raises(StoreLost):
            call()
    assert frontier.refused == len(calls)
    assert [k for k in client.keys("*") if b"site" in k] == []
    # the next crawl takes the (new) store's epoch: its writes go through again
    frontier.take_epoch("epoch-2")
    write_everything(2)
    assert len(newqs) == 1 and frontier.state()["cycle"] == "1"
    client.close()
