"""The test servers' ports (tests/ports.py) and their restart by the fixtures: real
processes, real sockets, real redis-servers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

from .helpers import REPO
from .ports import lease
from .redis_server import RedisServer

HOLD = (
    "import json, sys\n"
    "from tests.ports import lease\n"
    "held = [lease(4), lease(2, bus_offset=10000)]\n"
    "ports = [p for h in held for p in h.ports] + [p + 10000 for p in held[1].ports]\n"
    "print(json.dumps(ports), flush=True)\n"
    "sys.stdin.read()\n"
)


def _holder() -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def test_processes_of_one_machine_never_lease_the_same_port():
    holders = [_holder() for _ in range(4)]
    mine = lease(6)
    try:
        ports = [p for _, held in holders for p in held] + mine.ports
        assert len(ports) == len(set(ports)) == 4 * 8 + 6
    finally:
        mine.release()
        for proc, _ in holders:
            proc.kill()
            proc.wait()


def test_a_lease_ends_with_its_process_even_on_sigkill():
    from .ports import _try_hold

    proc, held = _holder()
    assert _try_hold(held[0]) is None  # held by the live process
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    fd = _try_hold(held[0])  # the kernel dropped its flock: free again, nothing stale
    assert fd is not None
    os.close(fd)


def test_a_port_taken_outside_the_tests_moves_the_server_to_another_lease():
    server = RedisServer()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", server.port))  # not one of ours: it holds no lease
    squatter.listen()
    try:
        with server:
            assert server.port != squatter.getsockname()[1]
            client = server.client()
            assert client.ping()
            client.close()
    finally:
        squatter.close()


def test_a_server_that_died_is_started_again_on_its_port(redis_server):
    port = redis_server.port
    redis_server.stop(signal.SIGKILL)
    assert not redis_server.alive()
    redis_server.ensure_running()  # what redis_db does before each test
    client = redis_server.client()
    assert redis_server.port == port and client.ping()
    client.close()
