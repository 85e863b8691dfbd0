"""Where the history is: one INFO line at start names the store (its password left
out), its spider, the URLs it knows, its cycle and schema version; a SQLite store path
in a directory that does not exist is refused in one line, the default one is created.
Real ``scrapy crawl`` runs in a temporary project."""

from __future__ import annotations

import pytest

from scrapy_recrawl.history import SCHEMA_VERSION
from scrapy_recrawl.settings import RecrawlSettingError
from scrapy_recrawl.stores import check_directory, open_store

from .cli_project import make_project, scrapy
from .helpers import LocalSite, Page
from .redis_server import RedisServer
from .test_startup_failures import assert_one_line


@pytest.fixture
def site():
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(3))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for i in range(3):
            site.pages[f"/p{i}"] = Page(f"<html><body><p>page {i}</p></body></html>".encode())
        yield site


def store_lines(run):
    return [line for line in run.stderr.splitlines() if "recrawl: history store " in line]


@pytest.mark.slow
def test_the_crawl_names_its_store_at_start_and_creates_the_default_one(tmp_path, site):
    project = make_project(tmp_path)
    default = project / ".scrapy" / "recrawl" / "pages" / "history.sqlite3"
    args = ("crawl", "pages", "-a", f"start_url={site.url}/", "-s", "LOG_LEVEL=INFO")
    first = scrapy(project, *args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert default.exists()  # the default location's directories are made
    (line,) = store_lines(first)
    assert "INFO" in line
    assert line.endswith(
        f"history store sqlite:///{default} for spider 'pages': 0 URLs known, cycle 0, "
        f"schema version {SCHEMA_VERSION}"
    ), line
    second = scrapy(project, *args)
    assert second.returncode == 0, second.stderr[-3000:]
    (line,) = store_lines(second)
    assert line.endswith(f"'pages': 4 URLs known, cycle 1, schema version {SCHEMA_VERSION}"), line


@pytest.mark.slow
def test_a_redis_store_is_named_without_its_password(tmp_path, site):
    project = make_project(tmp_path)
    with RedisServer() as server:
        server.client().config_set("requirepass", "s3cret")
        url = server.url.replace("redis://", "redis://:s3cret@")
        run = scrapy(
            project, "crawl", "pages", "-a", f"start_url={site.url}/",
            "-s", "SCHEDULER=scrapy_recrawl.RedisRecrawlScheduler",
            "-s", f"REDIS_URL={url}", "-s", "LOG_LEVEL=INFO",
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    (line,) = store_lines(run)
    # the client's location: no password at all
    assert f"history store {server.url} (key prefix 'pages:history') for spider 'pages'" in line
    assert "0 URLs known, cycle 0" in line
    assert "s3cret" not in run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("form", ["{}", "sqlite:///{}"])
def test_a_store_in_a_missing_directory_is_refused_in_one_line(tmp_path, site, form):
    project = make_project(tmp_path)
    store = tmp_path / "typo" / "history.sqlite3"
    spec = form.format(store)
    run = scrapy(
        project, "crawl", "pages", "-a", f"start_url={site.url}/", "-s", f"RECRAWL_STORE={spec}"
    )
    assert_one_line(run, f"RECRAWL_STORE={spec!r}", f"{tmp_path / 'typo'} does not exist")
    assert not (tmp_path / "typo").exists()
    assert site.log == []


def test_only_a_crawl_checks_the_directory(tmp_path):
    spec = str(tmp_path / "typo" / "h.db")
    store = open_store({"RECRAWL_STORE": spec}, "pages")
    with pytest.raises(RecrawlSettingError, match=r"RECRAWL_STORE='.*h\.db': the directory"):
        check_directory(store, "pages", {"RECRAWL_STORE": spec})
    # the offline commands say "no such store" themselves (sqlite_readonly.py, reset)
    assert open_store({"RECRAWL_STORE": spec}, "pages", read_only=True).path == spec
    fine = open_store({"RECRAWL_STORE": str(tmp_path / "h.db")}, "pages")
    check_directory(fine, "pages", {"RECRAWL_STORE": str(tmp_path / "h.db")})
