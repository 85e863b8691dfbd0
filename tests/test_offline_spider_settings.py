"""The offline commands read what the spider crawls with (issue 27).

A spider whose ``custom_settings`` name its store (``RECRAWL_STORE``), its monitoring
sample (``RECRAWL_MONITOR_SHARE``, ``RECRAWL_SEED``) and ``RECRAWL_IGNORE_XPATHS``:
``recrawl-report``, ``--export``, ``recrawl-evolve``, ``recrawl-plan`` and
``recrawl-baskets`` read its store and its sample with no option repeated, on SQLite
and on a real redis-server. The store is made by real crawls (``scrapy crawl``, one
per cycle) of a local site; the project's own settings name no store, so a command
that read the project's settings alone would find none (and say so).

The sample read back is the one the crawl recorded in each cycle's plan
(history/cycle_log.py: ``monitor_samples``), whatever the command line says; a store
that records none (written before) is read with the settings' share and seed, and
the command says so in one ``info:`` line.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scrapy.settings import Settings

from scrapy_recrawl.core.selection import monitor_mask
from scrapy_recrawl.estimate.probes import ProbeState, ProbeStore
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.cycle_log import monitor_samples
from scrapy_recrawl.stores import open_store

from .cli_project import make_project, scrapy
from .helpers import LocalSite, Page
from .redis_server import RedisServer

# `make test` runs pytest-xdist with --dist loadgroup: the module is one group, so
# its crawled projects (module-scoped) are made once, on one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_offline_spider_settings")]

PAGES = 30
CYCLES = 5
SHARE, SEED = 0.5, 7
FAST = (1, 2, 3, 4, 6, 7, 8, 9, 11, 12)  # change every cycle; the others never
STAMP = 5  # a "Generated at" stamp that moves at every visit: boilerplate
IGNORED = '//div[@id="nothing-here"]'  # the spider's own RECRAWL_IGNORE_XPATHS
TINY = ["--population", "10", "--generations", "2", "--seeds", "1", "--keep-best", "5", "-q"]


def page(i: int, version: int, visit: int) -> bytes:
    stamp = f'<p class="generated">Generated at 12:{visit:02d}</p>' if i == STAMP else ""
    links = "".join(f'<a href="/p/{j}.html">page {j}</a> ' for j in range(PAGES)) if i == 0 else ""
    return (
        f"<html><body><h1>Page {i}</h1><p>Text of page {i}, version {version}: "
        f"{'lorem ipsum ' * (3 + version)}</p>{stamp}<div>{links}</div></body></html>"
    ).encode()


def with_custom_settings(project, custom: dict) -> None:
    """The project's ``pages`` spider, with these ``custom_settings``."""
    path = project / "proj" / "spiders" / "pages.py"
    text = path.read_text().replace(
        'name = "pages"', f'name = "pages"\n    custom_settings = {custom!r}'
    )
    path.write_text(text)


def crawl(project) -> None:
    with LocalSite() as site:
        for cycle in range(CYCLES):
            site.pages["/"] = Page(page(0, 0, cycle))
            for i in range(1, PAGES):
                site.pages[f"/p/{i}.html"] = Page(page(i, cycle if i in FAST else 0, cycle))
            run = scrapy(project, "crawl", "pages", "-a", f"start_url={site.url}/")
            assert run.returncode == 0, run.stderr[-3000:]


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def crawled(request, tmp_path_factory):
    """(project, the spider's store spec): crawled CYCLES times with the spider's settings."""
    root = tmp_path_factory.mktemp(f"spider-settings-{request.param}")
    project = make_project(root)  # the project's settings: no store, no sample

    def setup(spec: str):
        with_custom_settings(
            project,
            {
                "RECRAWL_STORE": spec,
                "RECRAWL_MONITOR_SHARE": SHARE,
                "RECRAWL_SEED": SEED,
                "RECRAWL_IGNORE_XPATHS": [IGNORED],
                "RECRAWL_BUDGET": 3,
                "RECRAWL_WARMUP_CYCLES": 1,
            },
        )
        crawl(project)
        return project, spec

    if request.param == "sqlite":
        yield setup(str(root / "spider-history.sqlite3"))
        return
    with RedisServer() as server:
        yield setup(server.url)


def _open(spec: str):
    store = open_store(Settings({"RECRAWL_STORE": spec}), "pages", read_only=True)
    store.open()
    return store


def _sample_urls(spec: str, share: float = SHARE, seed: int = SEED) -> set[str]:
    """The URLs of the sample ``share``/``seed`` with a good fetch, read from the store."""
    store = _open(spec)
    try:
        ids = store.arrays().ids
        picked = ids[monitor_mask(ids, share, seed)]
        return {u for u in store.urls(picked) if "/p/0.html" not in u}  # /p/0.html: a 404
    finally:
        store.close()


def ok(run):
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run


def test_the_crawl_records_its_sample_in_each_cycles_plan(crawled):
    _, spec = crawled
    store = _open(spec)
    try:
        assert monitor_samples(store) == {c: (SHARE, SEED) for c in range(1, CYCLES + 1)}
    finally:
        store.close()


def test_report_reads_the_spiders_store_and_ignore_xpaths(crawled):
    project, spec = crawled
    data = json.loads(ok(scrapy(project, "recrawl-report", "--format", "json")).stdout)
    assert len(data["cycles"]) == CYCLES and data["urls"] == PAGES + 1
    assert spec.rsplit("/", 1)[-1] in data["store"] and data["spider"] == "pages"
    # the command line's -s outranks the spider's custom_settings, as for a crawl
    other = project / "other.sqlite3"
    run = scrapy(project, "recrawl-report", "-s", f"RECRAWL_STORE={other}")
    assert run.returncode == 1 and len(run.lines) == 1 and "other.sqlite3" in run.lines[0]
    # the line that would silence a change that looks like boilerplate keeps the
    # spider's own XPaths
    assert data["boilerplate"]
    for found in data["boilerplate"]:
        assert found["ignore_line"].startswith(f"RECRAWL_IGNORE_XPATHS = [{IGNORED!r}, ")


def test_export_finds_the_recorded_sample_with_no_option(crawled, tmp_path):
    project, spec = crawled
    out = tmp_path / "sample.npz"
    run = ok(scrapy(project, "recrawl-report", "--export", str(out)))
    with np.load(out) as data:
        exported = {str(u) for u in data["pages"]}
    assert exported == _sample_urls(spec) and 8 <= len(exported) < PAGES
    assert f"RECRAWL_MONITOR_SHARE={SHARE:g}, RECRAWL_SEED={SEED}, recorded by the crawl" in (
        run.stderr
    )
    assert "info:" not in run.stderr
    # another seed on the command line: the recorded sample is still the one read, said once
    again = ok(scrapy(project, "recrawl-report", "--export", str(out), "-s", "RECRAWL_SEED=3"))
    with np.load(out) as data:
        assert {str(u) for u in data["pages"]} == exported
    (info,) = [line for line in again.lines if line.startswith("info:")]
    assert "RECRAWL_SEED=3" in info and "recorded the sample its crawls fetched" in info
    assert _sample_urls(spec, seed=3) != exported  # the seed does pick other pages


def test_evolve_learns_from_the_spiders_sample_with_no_option(crawled):
    project, spec = crawled
    run = ok(scrapy(project, "recrawl-evolve", *TINY, "--folds", "3", "--warmup", "1"))
    pages = len(_sample_urls(spec))
    assert f"(monitoring sample): {pages} pages x {CYCLES} cycles" in run.stderr
    assert f"RECRAWL_MONITOR_SHARE={SHARE:g}, RECRAWL_SEED={SEED}, recorded" in run.stderr
    assert "expression:" in run.stdout


def test_plan_solves_from_the_spiders_store(crawled):
    project, _ = crawled
    run = ok(scrapy(project, "recrawl-plan", "--periods", "2", "--buckets", "4"))
    # its store ("/" and 29 pages live; /p/0.html is a 404) and its RECRAWL_BUDGET
    assert f": cycle {CYCLES}, {PAGES} live pages fetched before" in run.stdout
    assert "budget 3 pages per period" in run.stdout


def test_a_store_without_a_recorded_sample_is_read_with_the_settings(tmp_path):
    """Written before the sample was recorded: the spider's share and seed recompute
    it, and the command says so in one info line."""
    project = make_project(tmp_path)
    store_path = tmp_path / "old.sqlite3"
    with_custom_settings(project, {"RECRAWL_STORE": str(store_path), "RECRAWL_MONITOR_SHARE": 1.0})
    rng = np.random.default_rng(5)
    with SqliteHistoryStore(str(store_path)) as store:
        for c in range(8):
            if c:
                store.advance_cycle()
            for u in range(40):
                changed = None if c == 0 else bool(rng.random() < (0.6 if u % 2 else 0.1))
                store.record(Visit(f"fp{u}".encode(), f"http://h/{u}", 1.0 + c, 200, changed))
    out = tmp_path / "old.npz"
    run = ok(scrapy(project, "recrawl-report", "--export", str(out)))
    assert "exported 40 pages x 8 cycles" in run.stdout
    (info,) = [line for line in run.lines if line.startswith("info:")]
    assert "does not record its monitoring sample" in info
    assert "RECRAWL_MONITOR_SHARE=1, RECRAWL_SEED=0 of the settings" in info
    run = ok(scrapy(project, "recrawl-evolve", *TINY, "--folds", "3"))
    assert "does not record its monitoring sample" in run.stderr
    assert "(monitoring sample): 40 pages x 8 cycles" in run.stderr


def _probed(store, pages: int = 40) -> None:
    """Finished probes and a few visits per page, for recrawl-baskets (store API)."""
    rng = np.random.default_rng(3)
    for u in range(pages):
        gap = (6, 24, 96)[u % 3] * 3600.0
        for k in range(7):
            store.record(
                Visit(f"p{u}".encode(), f"http://h/{u}", k * gap, 200, k > 0 and k % 2 == 0)
            )
    store.flush()
    probes = ProbeStore(store)
    for url_id in store.arrays().ids.tolist():
        feats = rng.integers(0, 4, 64).astype(float)
        probes.save(ProbeState(int(url_id), 0.0, 8, None, None, feats, done=True))


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_baskets_train_from_the_spiders_store(tmp_path, backend):
    project = make_project(tmp_path)
    with RedisServer() if backend == "redis" else _Nothing() as server:
        spec = server.url if backend == "redis" else str(tmp_path / "probed.sqlite3")
        store = open_store(Settings({"RECRAWL_STORE": spec}), "pages")
        store.open()
        try:
            _probed(store)
        finally:
            store.close()
        with_custom_settings(project, {"RECRAWL_STORE": spec})
        args = ["--min-span", "0", "--trees", "5", "--test-share", "0"]
        run = ok(scrapy(project, "recrawl-baskets", *args))
        assert "40 pages; true baskets" in run.stdout
        assert "model saved in the store" in run.stdout and spec.rsplit("/", 1)[-1] in run.stdout
        store = open_store(Settings({"RECRAWL_STORE": spec}), "pages", read_only=True)
        store.open()
        try:
            assert ProbeStore(store).load_model() is not None
        finally:
            store.close()


class _Nothing:
    url = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
