"""pytest plugin: run Scrapy's own test suite with RecrawlScheduler as the scheduler.

Loaded into a pytest run of Scrapy's ``tests/`` (``-p recrawl_scrapy_plugin`` with
this directory on ``PYTHONPATH``; see ``run.py``). It

* sets ``SCHEDULER`` in Scrapy's default settings to
  ``scrapy_recrawl.scheduler.RecrawlScheduler``, so every crawler the tests build
  (``get_crawler``, ``Crawler(...)``, ``CrawlerRunner``) uses it unless the test
  sets its own ``SCHEDULER``;
* swaps the ``Scheduler`` name in test modules that build Scrapy's scheduler class
  directly (``build_from_crawler(Scheduler, crawler)`` in tests/test_scheduler.py
  and tests/test_dupefilters.py) for RecrawlScheduler;
* gives the crawlers one history store per JOBDIR (per spider name, as the default
  ``.scrapy/recrawl/<spider>/`` of a project), in a temporary directory
  (``RECRAWL_STORE`` left unset, every other ``RECRAWL_*`` setting at its default).
  A JOBDIR is one per test in Scrapy's suite (``tmp_path``): a test that closes a
  scheduler and opens the next on the same JOBDIR in one process (the on-disk
  scheduler tests) reopens the same store, which ``RecrawlScheduler.close()`` must
  have released, as Scrapy's scheduler reopens its disk queues. A crawler without a
  JOBDIR gets a fresh store of its own, as Scrapy's scheduler starts empty without
  one: no test sees URLs that an earlier crawl "already knows";
* with ``RECRAWL_SUITE_MIDDLEWARE=1`` in the environment, also enables the recording
  middleware (as ``RecrawlAddon`` does), so every response is recorded in the store
  (its boilerplate pairs off: they are extra requests, which Scrapy's tests count);
* counts the RecrawlScheduler instances opened, so a run that silently used Scrapy's
  own scheduler shows up (``RECRAWL_SUITE_REPORT``: a file each pytest process
  appends its count to).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import tempfile
from typing import Any

import pytest
import scrapy.core.scheduler
import scrapy.settings.default_settings as default_settings

import scrapy_recrawl.history as history
from scrapy_recrawl.addon import MIDDLEWARE_ORDER
from scrapy_recrawl.scheduler import RecrawlScheduler

SCHEDULER_PATH = "scrapy_recrawl.scheduler.RecrawlScheduler"

# Before any test module builds a Settings object (they read default_settings then).
default_settings.SCHEDULER = SCHEDULER_PATH
if os.environ.get("RECRAWL_SUITE_MIDDLEWARE") == "1":
    default_settings.DOWNLOADER_MIDDLEWARES_BASE = {
        **default_settings.DOWNLOADER_MIDDLEWARES_BASE,
        "scrapy_recrawl.middleware.RecrawlMiddleware": MIDDLEWARE_ORDER,
    }
    # Scrapy's engine tests assert exactly the requests and responses a spider made; a
    # boilerplate pair's second fetch is an extra request by design (docs/detection.md),
    # past the scheduler that this suite puts to Scrapy's tests: off here
    default_settings.RECRAWL_LEARN_BOILERPLATE = False  # type: ignore[attr-defined]

_opened = 0
_original_scheduler_open = RecrawlScheduler.open


def _counting_open(self: RecrawlScheduler, spider: Any) -> Any:
    global _opened
    _opened += 1
    return _original_scheduler_open(self, spider)


RecrawlScheduler.open = _counting_open  # type: ignore[method-assign]

_tmp_root = tempfile.mkdtemp(prefix="recrawl-scrapy-suite-")
_counter = itertools.count()
_original_open_store = history.open_store


class _StoreOverride:
    """The crawler's settings, with RECRAWL_STORE pointed at a temporary file."""

    def __init__(self, settings: Any, path: str) -> None:
        self._settings = settings
        self._path = path

    def get(self, name: str, default: Any = None) -> Any:
        if name == "RECRAWL_STORE":
            return self._path
        return self._settings.get(name, default)


def _store_path(settings: Any, spider: str | None) -> str:
    jobdir = settings.get("JOBDIR")
    if jobdir:  # the job's state: every scheduler opened on this JOBDIR shares it
        key = hashlib.sha1(os.path.abspath(jobdir).encode()).hexdigest()[:16]
        folder = os.path.join(_tmp_root, f"jobdir-{key}")
    else:  # no persisted state: a fresh store per crawler
        folder = os.path.join(_tmp_root, f"crawler-{os.getpid()}-{next(_counter)}")
    os.makedirs(folder, exist_ok=True)
    # a store belongs to one spider (history/ownership.py)
    return os.path.join(folder, f"{spider or 'default'}.sqlite3")


def _open_job_store(settings: Any, spider: str | None = None) -> Any:
    if settings.get("RECRAWL_STORE") is not None:  # a test that chose its own store
        return _original_open_store(settings, spider)
    return _original_open_store(_StoreOverride(settings, _store_path(settings, spider)), spider)


# the runtime (runtime.py) looks open_store up in its module at call time: the job's store.
history.open_store = _open_job_store


@pytest.fixture(autouse=True)
def _recrawl_scheduler_class(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Tests that build ``Scheduler`` themselves build RecrawlScheduler instead."""
    module = getattr(request, "module", None)
    if module is not None and getattr(module, "Scheduler", None) is scrapy.core.scheduler.Scheduler:
        monkeypatch.setattr(module, "Scheduler", RecrawlScheduler)
    yield


def pytest_report_header(config: pytest.Config) -> list[str]:
    import scrapy

    return [
        f"scrapy-recrawl: SCHEDULER = {SCHEDULER_PATH} (Scrapy {scrapy.__version__} "
        f"from {os.path.dirname(scrapy.__file__)}), one history store per JOBDIR "
        f"(else per crawler) under {_tmp_root}",
    ]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # With pytest-xdist the tests run in workers: their counts go to RECRAWL_SUITE_REPORT.
    if _opened or getattr(terminalreporter.config.option, "dist", "no") == "no":
        terminalreporter.write_line(f"scrapy-recrawl: RecrawlScheduler opened {_opened} times")


def pytest_unconfigure(config: pytest.Config) -> None:
    report = os.environ.get("RECRAWL_SUITE_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as fh:
            fh.write(f"{_opened}\n")
    shutil.rmtree(_tmp_root, ignore_errors=True)
