"""What a user sees of a mistake, with a real ``scrapy crawl`` in a temporary project:
one log line naming the setting (or the store) and the value, no traceback, and a
non-zero exit status; a misspelled setting warned about once; RECRAWL_ENABLED off."""

from __future__ import annotations

import threading
import time

import pytest

from .cli_project import make_project, scrapy
from .helpers import LocalSite, Page
from .redis_server import RedisServer, free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path)


@pytest.fixture
def site():
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(3))
        site.pages["/"] = Page(f"<html><body><h1>index</h1>{links}</body></html>".encode())
        for i in range(3):
            site.pages[f"/p{i}"] = Page(f"<html><body><p>page {i}</p></body></html>".encode())
        yield site


def crawl(project, *settings, url="http://127.0.0.1:9/", runner=()):
    args = ["crawl", "pages", "-a", f"start_url={url}", "-s", f"RECRAWL_STORE={project}/h.db"]
    for s in (*settings, *runner):
        args += ["-s", s]
    return scrapy(project, *args)


def assert_one_line(run, *fragments):
    assert run.returncode != 0, run.stderr
    assert len(run.lines) == 1, run.stderr
    assert "ERROR" in run.lines[0] and "Traceback" not in run.stderr
    for fragment in fragments:
        assert fragment in run.lines[0], run.lines[0]


TWISTED_RUNNER = ("FORCE_CRAWLER_PROCESS=True",)  # Scrapy's CrawlerProcess, not the asyncio one


@pytest.mark.parametrize("runner", [(), TWISTED_RUNNER], ids=["asyncio", "twisted"])
def test_an_unknown_preset_is_one_line_listing_the_presets(project, runner):
    run = crawl(project, "RECRAWL_SCORER=aad++", runner=runner)
    assert_one_line(run, "RECRAWL_SCORER='aad++'", "did you mean 'aad+'?", "presets: cg, nad")
    assert "AADp" not in run.stderr  # the presets, not the terminals


@pytest.mark.parametrize(
    ("setting", "fragments"),
    [
        ("RECRAWL_BUDGET=1.0", ("RECRAWL_BUDGET='1.0'", "write 1 for one page or '100%'")),
        ("RECRAWL_CONTINUOUS=maybe", ("RECRAWL_CONTINUOUS='maybe'", "True or False")),
        ("RECRAWL_CYCLE_PERIOD=0", ("RECRAWL_CYCLE_PERIOD='0'", "seconds > 0")),
        ("RECRAWL_CYCLE_PERIOD=hourly", ("RECRAWL_CYCLE_PERIOD='hourly'", "a number")),
        ("RECRAWL_NEW_SHARE=1.5", ("RECRAWL_NEW_SHARE='1.5'", "a share 0..1")),
        ("RECRAWL_BOILERPLATE_PAIRS=0", ("RECRAWL_BOILERPLATE_PAIRS='0'", "pairs >= 1")),
        ("RECRAWL_LEARN_BOILERPLATE=sure", ("RECRAWL_LEARN_BOILERPLATE='sure'", "True or False")),
        ("RECRAWL_STORE=ftp://nowhere/h", ("RECRAWL_STORE='ftp://nowhere/h'", "unknown store")),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(project, site, setting, fragments):
    run = crawl(project, setting, url=site.url + "/")
    assert_one_line(run, *fragments)
    assert site.log == []  # stopped before the first request


def test_an_unreachable_redis_is_one_line_and_no_task_exception(project, site):
    url = f"redis://127.0.0.1:{free_port()}/0"
    run = scrapy(
        project, "crawl", "pages", "-a", f"start_url={site.url}/", "-s", f"RECRAWL_STORE={url}"
    )
    assert_one_line(run, "cannot reach the history store", url)
    assert "Task exception was never retrieved" not in run.stderr
    assert site.log == []


@pytest.mark.parametrize("runner", [(), TWISTED_RUNNER], ids=["asyncio", "twisted"])
def test_a_store_in_a_missing_folder_is_one_line_under_either_runner(project, site, runner):
    """A store that cannot be opened, not a setting that fails its check: under Scrapy's
    Twisted runner too, no "Unhandled error in Deferred" traceback follows the line
    (startup.py keeps the told failure, whose Deferred is then never collected)."""
    store = f"{project}/no/such/folder/h.db"
    run = crawl(project, f"RECRAWL_STORE={store}", url=site.url + "/", runner=runner)
    assert_one_line(run, f"RECRAWL_STORE='{store}'", "does not exist")
    assert site.log == []


def test_a_misspelled_setting_is_warned_about_once(project, site):
    run = crawl(project, "RECRAWL_BUGDET=10", url=site.url + "/")
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.lines if "RECRAWL_BUGDET" in line]
    assert len(warned) == 1 and "WARNING" in warned[0]
    assert "did you mean RECRAWL_BUDGET?" in warned[0]
    # the crawl itself went on: every page fetched (one of them twice when the
    # boilerplate learner asks for its pair: whichever the section's first response is)
    assert all(site.requests_for(f"/p{i}") for i in range(3))


def test_recrawl_enabled_false_turns_everything_off(project, site):
    # even a setting that would stop the crawl is not read: the package is off
    run = crawl(project, "RECRAWL_ENABLED=False", "RECRAWL_SCORER=aad++", url=site.url + "/")
    assert run.returncode == 0, run.stderr
    assert run.lines == []
    assert len(site.requests_for("/p2")) == 1  # Scrapy's own scheduler crawled the site
    assert not (project / "h.db").exists()  # no store, no middleware
    flags = [line for line in run.stdout.splitlines() if "recrawl:" in line]
    assert flags == []


@pytest.mark.parametrize("runner", [(), TWISTED_RUNNER], ids=["asyncio", "twisted"])
def test_a_spider_closed_for_redis_going_away_exits_non_zero(tmp_path, runner):
    project = make_project(tmp_path)
    with RedisServer() as redis_server, LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(400))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for i in range(400):
            site.pages[f"/p{i}"] = Page(f"<html><body><p>page {i}</p></body></html>".encode())
        result = {}

        def run():
            result["run"] = scrapy(
                project, "crawl", "pages", "-a", f"start_url={site.url}/",
                "-s", "SCHEDULER=scrapy_recrawl.RedisRecrawlScheduler",
                "-s", f"REDIS_URL={redis_server.url}",
                "-s", "RECRAWL_REDIS_OUTAGE_SECONDS=1",
                "-s", "CONCURRENT_REQUESTS=1", "-s", "DOWNLOAD_DELAY=0.05",
                "-s", "LOG_LEVEL=INFO",
                *[x for s in runner for x in ("-s", s)],
            )  # fmt: skip

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 60
        while len(site.log) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert thread.is_alive(), result["run"].stderr[-3000:]
        redis_server.stop()
        thread.join(120)
    run = result["run"]
    assert "Closing spider (recrawl_redis_unavailable)" in run.stderr, run.stderr[-3000:]
    assert run.returncode == 1
    assert len(site.log) < 300  # it did stop


@pytest.mark.parametrize(
    "store_settings",
    [("SCHEDULER=scrapy_recrawl.RedisRecrawlScheduler",), ("RECRAWL_STORE=redis",)],
    ids=["redis-scheduler", "redis-store"],
)
def test_a_redis_url_of_another_scheme_is_one_line_naming_redis_url(project, site, store_settings):
    url = "http://crawler:s3cret@127.0.0.1:6379/0"
    args = ["crawl", "pages", "-a", f"start_url={site.url}/", "-s", f"REDIS_URL={url}"]
    for s in store_settings:
        args += ["-s", s]
    run = scrapy(project, *args)
    assert_one_line(
        run, "REDIS_URL='http://crawler:***@127.0.0.1:6379/0'", "redis://, rediss:// or unix://"
    )
    assert "s3cret" not in run.stderr
    assert "Task exception was never retrieved" not in run.stderr
    assert site.log == []
