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
* gives each crawler a fresh, empty history store in a temporary directory
  (``RECRAWL_STORE`` left unset, every other ``RECRAWL_*`` setting at its default),
  so no test sees URLs that an earlier test "already knows";
* with ``RECRAWL_SUITE_MIDDLEWARE=1`` in the environment, also enables the recording
  middleware (as ``RecrawlAddon`` does), so every response is recorded in the store
  (its boilerplate pairs off: they are extra requests, which Scrapy's tests count);
* counts the RecrawlScheduler instances opened, so a run that silently used Scrapy's
  own scheduler shows up (``RECRAWL_SUITE_REPORT``: a file each pytest process
  appends its count to).
"""

from __future__ import annotations

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


def _store_path() -> str:
    return os.path.join(_tmp_root, f"crawler-{os.getpid()}-{next(_counter)}.sqlite3")


def _open_fresh_store(settings: Any, spider: str | None = None) -> Any:
    if settings.get("RECRAWL_STORE") is not None:  # a test that chose its own store
        return _original_open_store(settings, spider)
    return _original_open_store(_StoreOverride(settings, _store_path()), spider)


# store_for_crawler() looks open_store up in its module at call time: one store per crawler.
history.open_store = _open_fresh_store


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
        f"from {os.path.dirname(scrapy.__file__)}), fresh history store per crawler "
        f"under {_tmp_root}",
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
