"""The cluster harness (tests/redis_cluster.py) really starts a Redis Cluster."""

from __future__ import annotations

#: every Redis Cluster has this many hash slots
SLOTS = 16384


def test_three_masters_cover_every_slot(redis_cluster_db):  # noqa: F811
    client = redis_cluster_db.client()
    try:
        masters = client.get_primaries()
        assert len(masters) == 3
        assert not client.get_replicas()
        covered: set[int] = set()
        for start, end, *_nodes in client.cluster_slots(target_nodes=masters[0]) or []:
            covered.update(range(start, end + 1))
        assert covered == set(range(SLOTS))
        info = client.cluster_info(target_nodes=masters[0])
        assert info["cluster_state"] == "ok"
        assert int(info["cluster_slots_assigned"]) == SLOTS
    finally:
        client.close()


def test_a_key_lands_on_the_node_owning_its_slot(redis_cluster_db):  # noqa: F811
    import redis

    client = redis_cluster_db.client()
    try:
        owners = set()
        for key in ("a", "b", "c", "{spider}:x", "{spider}:y", "url:17", "url:4242"):
            client.set(key, "1")
            slot = client.keyslot(key)
            owner = client.get_node_from_key(key)
            owners.add(owner.port)
            # asked directly, the owner holds it and the other masters refuse it (MOVED)
            for node in redis_cluster_db.nodes:
                plain = redis.Redis(host="127.0.0.1", port=node.port)
                try:
                    assert int(plain.cluster("keyslot", key)) == slot
                    if node.port == owner.port:
                        assert plain.get(key) == b"1"
                    else:
                        try:
                            plain.get(key)
                        except redis.exceptions.MovedError as moved:
                            assert moved.slot_id == slot
                            assert moved.node_addr == ("127.0.0.1", owner.port)
                        else:
                            raise AssertionError(f"{key!r} answered by a non-owner")
                finally:
                    plain.close()
        assert client.keyslot("{spider}:x") == client.keyslot("{spider}:y")
        assert len(owners) > 1  # the keys spread over more than one master
    finally:
        client.close()
