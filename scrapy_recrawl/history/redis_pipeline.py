"""Sending a batch of the Redis store's record scripts (one per shard touched) in one
round trip, and reading the answers: on one Redis a pipeline written on one connection
and read later (so Redis folds one batch while the process prepares the next); on a
Redis Cluster, whose pipelines refuse scripts, one pipeline per node on that node's
connection. A Redis that forgot the script (restarted, SCRIPT FLUSH) gets it again.

A *plan* is a list of ``(shard, visit indexes, KEYS, ARGV)``, one per shard; the epoch
(the guard's last argument) is appended here.
"""

from __future__ import annotations

from typing import Any

from .redis_session import RedisSession


def send(session: RedisSession, plan: list[Any]) -> Any:
    """Send each shard's script of the batch; the answers are read by :func:`answers`.
    On one Redis: one connection taken from the pool, the commands written and the
    answers left on it until then. On a cluster: answered now (``("done", results)``)."""
    client, script = session.client, session.scripts["record"]
    if hasattr(client, "get_node_from_key"):
        return ("done", session.call("write to", lambda c: run(session, c, plan)))
    epoch = session.epoch or ""
    commands = [
        ("EVALSHA", script.sha, len(keys), *keys, *args, epoch) for _, _, keys, args in plan
    ]

    def send(c: Any) -> Any:
        conn = c.connection_pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands(commands))
        except BaseException:
            conn.disconnect()
            c.connection_pool.release(conn)
            raise
        return conn

    return ("sent", session.call("write to", send))


def answers(session: RedisSession, sent: Any, plan: list[Any]) -> list[Any]:
    """The answers to a batch :func:`send` sent (an error reply is its exception)."""
    import redis

    kind, what = sent
    if kind == "done":
        return list(what)
    conn, pool = what, session.client.connection_pool
    out: list[Any] = []
    try:
        for _ in plan:
            try:
                out.append(conn.read_response())
            except redis.ResponseError as exc:
                out.append(exc)
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
    # a Redis that forgot the script (restarted, SCRIPT FLUSH): those shards again,
    # the script loaded on the way
    again = [k for k, r in enumerate(out) if isinstance(r, redis.exceptions.NoScriptError)]
    if again:
        redo = [plan[k] for k in again]
        for k, r in zip(again, run(session, session.client, redo), strict=True):
            out[k] = r
    return out


def run(session: RedisSession, c: Any, plan: list[Any]) -> list[Any]:
    """Each shard's script, pipelined: on one Redis, one pipeline; on a cluster (whose
    pipelines refuse scripts), one pipeline per node, on that node's connection."""
    script = session.scripts["record"]
    groups: dict[Any, list[int]] = {}
    if hasattr(c, "get_node_from_key"):
        for k, (_, _, keys, _) in enumerate(plan):
            groups.setdefault(c.get_node_from_key(keys[0]).redis_connection, []).append(k)
    else:
        groups[c] = list(range(len(plan)))
    out: list[Any] = [None] * len(plan)
    for conn, ks in groups.items():
        pipe = conn.pipeline(transaction=False)
        for k in ks:
            _, _, keys, args = plan[k]
            script(keys=keys, args=[*args, session.epoch or ""], client=pipe)
        for k, result in zip(ks, pipe.execute(raise_on_error=False), strict=True):
            out[k] = result
    return out
