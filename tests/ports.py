"""TCP ports for the test servers, without a race between the processes of a machine.

``redis-server`` cannot be told to bind port 0, so a test picks its port before the
server starts, and two test processes on one machine (two suites side by side, two
workers) could pick the same one: the old way (bind port 0, close, hand the number
over) let anyone take it in between. Here a port is *leased*:

* every port has a lease file in ``$TMPDIR/recrawl-test-ports/`` (shared by every
  process of the machine); a process holds a port while it holds an exclusive
  ``flock`` on that file, so the kernel frees the lease when the process ends, even
  on SIGKILL: no stale lease, nothing to clean up;
* a lease is taken under one machine-wide lock file (``.lock`` there), so the check
  "free and bindable" and the taking are one step for every test process;
* ports are picked below the kernel's ephemeral range (``ip_local_port_range``):
  what binds port 0 (our HTTP test servers, client sockets) never lands on one;
* a Redis Cluster node needs its port P and the bus P + 10000: both are leased.

A process outside the tests can still take a leased port before its server binds
it: :class:`tests.redis_server.RedisServer` then starts on a new lease (a retry on
bind failure).
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

#: where the lease files live: one directory for every test process of the machine
LEASE_DIR = Path(tempfile.gettempdir()) / "recrawl-test-ports"
#: the lowest port handed out (below it: well-known and registered services)
LOW = 10000


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default; macOS's range starts at 49152
    return max(low, LOW + 2 * 10000)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class PortLease:
    """Ports held by this process until :meth:`release` (or until it ends)."""

    def __init__(self, ports: list[int], fds: list[int]) -> None:
        self.ports = ports
        self._fds = fds

    @property
    def port(self) -> int:
        return self.ports[0]

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)  # closing the file drops its flock

    def __del__(self) -> None:
        self.release()


def _try_hold(port: int) -> int | None:
    fd = os.open(LEASE_DIR / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None  # another live process holds it
        raise
    return fd


def lease(count: int = 1, *, bus_offset: int | None = None) -> PortLease:
    """``count`` distinct ports, each free and bindable now and held by this process;
    with ``bus_offset``, each port P also has P + ``bus_offset`` held (and bindable),
    as a Redis Cluster node needs."""
    LEASE_DIR.mkdir(parents=True, exist_ok=True)
    top = _ephemeral_low() - (bus_offset or 0)
    rng = random.Random()
    ports: list[int] = []
    fds: list[int] = []
    lock = os.open(LEASE_DIR / ".lock", os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one taker at a time on the machine
        for _ in range(2000):
            port = rng.randrange(LOW, top)
            wanted = [port] if bus_offset is None else [port, port + bus_offset]
            if set(wanted) & set(ports):
                continue
            held: list[int] = []
            for p in wanted:
                fd = _try_hold(p)
                if fd is None:
                    break
                held.append(fd)
            if len(held) == len(wanted) and all(_bindable(p) for p in wanted):
                ports.append(port)
                fds += held
                if len(ports) == count:
                    return PortLease(ports, fds)
                continue
            for fd in held:
                os.close(fd)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    finally:
        os.close(lock)  # drops the machine-wide lock; the leases stay held
    for fd in fds:
        os.close(fd)
    raise RuntimeError(f"no {count} free port(s) to lease in {LOW}-{top} ({LEASE_DIR})")


#: ports leased for the life of this process (free_port(): "nothing listens here")
_KEPT: list[PortLease] = []


def free_port() -> int:
    """A port nothing of ours listens on, leased until this process ends (so no test
    server of any process takes it): for "Redis is not there" tests."""
    held = lease()
    _KEPT.append(held)
    return held.port


__all__ = ["LEASE_DIR", "PortLease", "free_port", "lease"]
