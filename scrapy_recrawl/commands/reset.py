"""``scrapy recrawl-reset SPIDER``: start one spider's history afresh.

Run inside the project. It reads the settings the spider crawls with (the
project's, the spider's ``custom_settings``, ``-s`` options), says which history
store that is, how many URLs and cycles it holds, asks for confirmation (unless
``--yes``) and then empties that store: the SQLite file, or the keys of the Redis
store under its prefix (and, with ``RedisRecrawlScheduler``, the spider's shared
cycle state, queues and dupefilters). The next ``scrapy crawl SPIDER`` starts at
cycle 1 with warm-up cycles, as on the first day. Exit status 0 when reset,
1 when not (declined, the store cannot be opened, or a crawl holds it: a SQLite
store's lock, or a Redis store's crawl lease or, with ``RedisRecrawlScheduler``,
its shared cycle, held by a process seen within ``RECRAWL_REDIS_WORKER_TIMEOUT``).

``--compact`` keeps the history: it drops the visits of a SQLite store's log beyond
``RECRAWL_SQLITE_LOG_MAXLEN`` (``-s RECRAWL_SQLITE_LOG_MAXLEN=N`` for a smaller cap now)
and rebuilds the file to its size (SQLite's VACUUM), which trimming alone never does.
It needs the store's lock, like a crawl: not while one runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from scrapy.exceptions import UsageError

from . import RecrawlCommand, spider_settings


class Command(RecrawlCommand):
    requires_project = True
    takes_args = True

    def syntax(self) -> str:
        return "[options] <spider>"

    def short_desc(self) -> str:
        return "Delete one spider's recrawl history, to start it afresh"

    def long_desc(self) -> str:
        return __doc__ or ""

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
        parser.add_argument(
            "--boilerplate",
            action="store_true",
            help="forget only the learned boilerplate (it is learned again as the crawl goes); "
            "the history stays",
        )
        parser.add_argument(
            "--compact",
            action="store_true",
            help="keep the history: drop the SQLite visit log's visits beyond "
            "RECRAWL_SQLITE_LOG_MAXLEN and shrink the file (VACUUM)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("recrawl-reset takes one spider name")
        name = args[0]
        assert self.settings is not None
        settings = spider_settings(self.settings, name)  # custom_settings included
        from scrapy_recrawl.history import HistoryStoreError
        from scrapy_recrawl.history.base import PreReleaseStore, file_store
        from scrapy_recrawl.history.class_path import scheduler_uses_redis
        from scrapy_recrawl.settings import RecrawlSettingError
        from scrapy_recrawl.stores import open_store

        try:
            store = open_store(settings, name)  # the spider's own (its %(spider)s defaults)
            file = file_store(store)  # a file store: never create one to empty it
            if file is not None and not os.path.exists(file.path):
                self._fail(f"spider {name!r} has no history at {file.path}: nothing to reset")
                return
            store.open()
        except PreReleaseStore as exc:
            if opts.boilerplate or opts.compact:
                self._fail(f"cannot open the history store of spider {name!r}: {exc}")
            elif file is not None:  # unreadable by this release: emptied without reading it
                self._reset_pre_release(file.path, exc, name, opts)
            else:  # a shared server's: its keys deleted, both layouts, nothing read
                self._clear_pre_release(store, exc, name, opts)
            return
        except (RecrawlSettingError, HistoryStoreError) as exc:
            self._fail(f"cannot open the history store of spider {name!r}: {exc}")
            return
        try:
            owner = store.owner()
            if owner not in (None, name):
                self._fail(
                    f"{store.location} is the history of spider {owner!r}, not {name!r}: "
                    f"nothing deleted (reset it with `scrapy recrawl-reset {owner}`)"
                )
                return
            if opts.boilerplate:
                self._forget_boilerplate(store, name)
                return
            if opts.compact:
                self._compact(store, name)
                return
            shared = scheduler_uses_redis(settings)
            if self._crawl_running(settings, name, store, shared):
                return
            what = f"{len(store)} URLs, cycle {store.cycle}"
            also = " and its shared cycle on Redis (RedisRecrawlScheduler)" if shared else ""
            said = f"The history of spider {name!r} is {store.location} ({what}){also}."
            if not self._confirmed(said, opts):
                return
            store.clear()
        except HistoryStoreError as exc:
            self._fail(str(exc))
            return
        finally:
            store.close()
        if shared:
            from scrapy_recrawl.frontier.redis import reset_spider

            location, deleted = reset_spider(settings, name)
            print(f"Deleted {deleted} keys of spider {name!r}'s shared cycle at {location}.")
        print(f"Reset: the next `scrapy crawl {name}` starts at cycle 1.")

    def _crawl_running(self, settings: Any, name: str, store: Any, shared: bool) -> bool:
        """Whether a crawl of ``name`` holds its store now (said in one line: nothing is
        deleted): a process holding the Redis store's crawl lease (a crawl of either
        scheduler, history/redis.py: holders) or, with RedisRecrawlScheduler, its shared
        cycle (frontier/redis.py: live_workers), seen within RECRAWL_REDIS_WORKER_TIMEOUT
        by the Redis's clock. A SQLite store's crawl holds its lock, which store.open()
        refused already."""
        from scrapy_recrawl.history.base import fenced

        fence = fenced(store)  # a shared store's crawl lease
        if fence is None and not shared:
            return False
        from scrapy_recrawl.history.redis_liveness import process_of, worker_timeout

        seen: set[str] = set()
        held: list[str] = []
        try:
            timeout = worker_timeout(settings)
            if fence is not None:
                found = fence.holders(timeout)
                if found:
                    seen.update(found)
                    held.append(f"its history store at {store.location}")
            if shared:
                from scrapy_recrawl.frontier.redis import live_workers

                location, workers, _ = live_workers(settings, name)
                if workers:
                    seen.update(workers)
                    held.append(f"its shared cycle at {location}")
        except Exception as exc:  # noqa: BLE001 -- a setting, redis-py's errors: said, not reset
            self._fail(f"cannot tell whether spider {name!r} is being crawled: {exc}")
            return True
        if not seen:
            return False
        processes = sorted({process_of(holder) for holder in seen})  # one per process
        self._fail(
            f"spider {name!r} is being crawled: {len(processes)} process(es) holding "
            f"{' and '.join(held)} seen within RECRAWL_REDIS_WORKER_TIMEOUT={timeout:g} s "
            f"({', '.join(processes)}): nothing deleted; stop the crawl (a killed one counts "
            "until that timeout has passed) and reset again"
        )
        return True

    def _confirm_pre_release(self, refused: Any, name: str, opts: argparse.Namespace) -> bool:
        return self._confirmed(
            f"The history of spider {name!r} is {refused.location}, written by a pre-release "
            f"build (schema version {refused.version}): this release cannot read it.",
            opts,
        )

    def _confirmed(self, said: str, opts: argparse.Namespace) -> bool:
        """``said`` (what would be deleted), then --yes or a yes on the terminal."""
        print(said)
        if not opts.yes and not sys.stdin.isatty():
            self._fail("no terminal to confirm on: nothing deleted (pass --yes)")
            return False
        if not opts.yes and not _confirm("Delete it? [y/N] "):
            self._fail("nothing deleted")
            return False
        return True

    def _clear_pre_release(
        self, store: Any, refused: Any, name: str, opts: argparse.Namespace
    ) -> None:
        """A Redis store written by a build before the first release: its keys (either
        key layout) deleted by the store's clear(), which reads none of them; the key
        prefix is the spider's own (RECRAWL_REDIS_KEY's %(spider)s)."""
        from scrapy_recrawl.history import HistoryStoreError

        if not self._confirm_pre_release(refused, name, opts):
            return
        try:
            store.clear()
        except HistoryStoreError as exc:
            self._fail(str(exc))
            return
        finally:
            store.close()
        print(f"Reset: the next `scrapy crawl {name}` starts at cycle 1.")

    def _reset_pre_release(
        self, path: str, refused: Any, name: str, opts: argparse.Namespace
    ) -> None:
        """A SQLite store written by a build before the first release: this release reads
        only whose it is (the ``meta`` row ``spider``, without writing) and deletes the
        file under its lock (not while a crawl of the old build holds it); the next
        crawl starts a new one."""
        from scrapy_recrawl.history import HistoryStoreError
        from scrapy_recrawl.history.lock import StoreLock
        from scrapy_recrawl.history.sqlite_schema import owner_of

        location = refused.location
        owner = owner_of(path)
        if owner not in (None, name):
            self._fail(
                f"{location} is the history of spider {owner!r}, not {name!r}: nothing "
                f"deleted (reset it with `scrapy recrawl-reset {owner}`)"
            )
            return
        if not self._confirm_pre_release(refused, name, opts):
            return
        lock = StoreLock(path, location)
        try:
            lock.acquire()  # a crawl of the old build holding it: refused, naming it
        except HistoryStoreError as exc:  # StoreLocked, naming its holder; said, not reset
            self._fail(str(exc))
            return
        try:
            for name_ in (path, path + "-wal", path + "-shm"):
                if os.path.exists(name_):
                    os.remove(name_)
        finally:
            lock.release()
        print(f"Reset: the next `scrapy crawl {name}` starts at cycle 1.")

    def _forget_boilerplate(self, store: Any, name: str) -> None:
        from scrapy_recrawl.change.boilerplate import TABLE

        keys = [key for key, _ in store.side_items(TABLE)]
        store.side_delete(TABLE, keys)
        print(
            f"Forgot the boilerplate learned for {len(keys)} sections of spider {name!r}'s "
            f"sites ({store.location}); the history stays. The next crawl learns it again."
        )

    def _compact(self, store: Any, name: str) -> None:
        from scrapy_recrawl.history import SqliteHistoryStore

        if not isinstance(store, SqliteHistoryStore):  # Redis trims its log as it writes
            self._fail(
                f"{store.location} is not a SQLite store: nothing to compact (a Redis "
                "store's log is capped as it is written: RECRAWL_REDIS_LOG_MAXLEN)"
            )
            return
        dropped, before, after = store.compact()
        cap = store.log_maxlen or "no cap"
        print(
            f"Compacted the history of spider {name!r} ({store.location}): {dropped} "
            f"visits dropped from its log (RECRAWL_SQLITE_LOG_MAXLEN={cap}), "
            f"{before / 1e6:.1f} MB -> {after / 1e6:.1f} MB; every URL's record kept."
        )

    def _fail(self, message: str) -> None:
        sys.stderr.write(f"recrawl-reset: {message}\n")
        self.exitcode = 1


def _confirm(prompt: str) -> bool:
    try:
        answer = input(prompt)
    except EOFError:  # no terminal, no --yes: no
        return False
    return answer.strip().lower() in ("y", "yes")
