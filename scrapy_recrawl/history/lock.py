"""One writer per SQLite store: an OS lock on the sidecar file ``<store>.lock``.

Two crawls writing one SQLite store (two ``scrapy crawl`` started by cron) each
keep their own cycle counter and write-back cache, and corrupt the history
without a word. So every process that writes a store (a crawl, ``scrapy
recrawl-reset``) first takes an exclusive ``flock`` on ``<store>.lock`` and
writes its pid and command line there; a second one is refused at once with a
message naming the store and that process.

Why ``flock`` on a sidecar, not a lock on the store file: SQLite itself holds
POSIX ``fcntl`` locks on the store file, and closing *any* descriptor of that
file in the process would drop them. A ``flock`` belongs to the open file
description, so the OS drops it when its process ends, however it ends: a
SIGKILLed crawl never leaves a stale lock, and no pid is ever guessed alive or
dead. The file itself stays after a clean close (emptied): removing it would
let a process that opened the old file and one that creates a new one both
"hold" the lock. Why not ``filelock``/``portalocker``: the standard library
does this in a few lines, and neither says who holds a lock.

The lock file is opened with ``O_NOFOLLOW`` and must be a plain file of one name:
a store in a shared folder where ``<store>.lock`` is a symbolic link (or a hard
link) to another file would otherwise have that file truncated and overwritten
with our pid. Such a lock path is refused, naming it, before anything is written.

Offline commands never take the lock: they open the store read-only
(history/sqlite_readonly.py) and may read it while a crawl writes it.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
import sys

from .base import HistoryStoreError

try:
    import fcntl
except ImportError:  # pragma: no cover -- Windows: no flock, no lock (docs/history.md)
    fcntl = None  # type: ignore[assignment]


#: not following a symbolic link at the lock path (0 where the OS has no such flag)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class StoreLocked(HistoryStoreError):
    """Another process writes this store; the message names it and that process."""


def lock_path(store_path: str) -> str:
    """The sidecar lock file of the store at ``store_path``."""
    return store_path + ".lock"


def this_process() -> str:
    """This process as the lock file records it: ``pid<TAB>command line``.

    The interpreter's own arguments (``sys.orig_argv``): Scrapy takes the command
    name out of ``sys.argv`` (``scrapy crawl books`` leaves ``scrapy books``)."""
    argv = list(getattr(sys, "orig_argv", None) or sys.argv) or ["python"]
    shown = []
    for i, arg in enumerate(argv):
        if i and argv[i - 1] == "-c":
            arg = "..."  # python -c CODE: the code is no name
        elif i < 2:
            arg = os.path.basename(arg)  # python3 /venv/bin/scrapy -> python3 scrapy
        shown.append(arg)
    command = " ".join(shlex.join(shown).split())  # one line, whatever argv holds
    if len(command) > 300:
        command = command[:297] + "..."
    return f"{os.getpid()}\t{command}\n"


class StoreLock:
    """The exclusive lock of one store (:meth:`acquire`, :meth:`release`)."""

    def __init__(self, store_path: str, location: str) -> None:
        self.path = lock_path(store_path)
        self.location = location
        self._fd: int | None = None
        # SQLite's ":memory:" database is the connection's own: nothing to share, no file
        self._private = store_path == ":memory:"

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock now, or raise :class:`StoreLocked` naming its holder."""
        if self._fd is not None or fcntl is None or self._private:
            return
        try:
            # owner only, as the store; never through a symbolic link (it would truncate
            # whatever file the link names)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP or os.path.islink(self.path):
                raise self._refused("is a symbolic link") from None
            raise HistoryStoreError(
                f"cannot lock the history store {self.location} (RECRAWL_STORE): cannot "
                f"create its lock file {self.path}: {exc.strerror}"
            ) from None
        try:
            info = os.fstat(fd)
        except OSError:  # pragma: no cover -- an open descriptor always has a status
            info = None
        if info is not None and (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1):
            os.close(fd)  # nothing written: the other names of that file keep their bytes
            what = "is not a plain file" if not stat.S_ISREG(info.st_mode) else "is a hard link"
            raise self._refused(what)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreLocked(
                f"the history store {self.location} is in use by another process "
                f"({holder}): one process at a time writes a SQLite store. Wait for it to "
                "end, give this crawl its own store (RECRAWL_STORE), or share one history "
                "between processes with the Redis store (docs/distributed.md)"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, this_process().encode("utf-8", "replace"), 0)
        except OSError:
            pass  # the lock holds without the note; a refused process then says less
        self._fd = fd

    def _refused(self, what: str) -> HistoryStoreError:
        return HistoryStoreError(
            f"cannot lock the history store {self.location} (RECRAWL_STORE): its lock file "
            f"{self.path} {what}; refused, so that no other file is overwritten. Remove it "
            "(it is recreated as a plain file) or choose another RECRAWL_STORE"
        )

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # nobody holds it: no stale name for the next message
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the flock


def _holder(fd: int) -> str:
    """Who holds the lock, from its file: ``pid 123: scrapy crawl books``."""
    try:
        text = os.pread(fd, 1024, 0).decode("utf-8", "replace")
    except OSError:
        text = ""
    pid, _, command = text.strip().partition("\t")
    if not pid.isdigit():
        return "its pid not yet written"  # it took the lock a moment ago
    return f"pid {pid}: {command}" if command else f"pid {pid}"
