"""bench/crawl_overhead.py with bench/crawl_probe.py: real crawls of the example site,
each measured from inside (its crawling CPU, the collector's part, the add-on's hooks)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _rows(out: str, header: str) -> dict[str, list[str]]:
    """The rows of the markdown table whose header starts with ``header``: name -> cells."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header}"))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_the_crawl_bench_measures_each_crawl_from_inside() -> None:
    out = subprocess.run(
        [sys.executable, "bench/crawl_overhead.py", "--pages", "40", "--repeat", "1", "--hooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    crawls = _rows(out, "crawl of the example site")
    assert set(crawls) == {"baseline", "add-on, cycle 1", "add-on, cycle 2"}
    for name, cells in crawls.items():
        responses = int(cells[0].replace(",", ""))
        assert responses >= 40, name
        total, crawling, in_gc = (float(c) for c in cells[4:7])
        # the crawl alone (spider_opened to spider_closed) is part of the process's CPU,
        # and the collector's time part of the crawl's
        assert 0 < crawling < total, name
        assert 0 <= in_gc < crawling, name
        # one repetition: its paired ratio is the ratio of the medians
        assert cells[2] == cells[3], name
    hooks = _rows(out, "CPU µs per response inside")
    # the baseline runs Scrapy's scheduler and none of the add-on's hooks; the add-on's
    # crawls run its middleware and scheduler, and a first cycle writes to its store
    assert hooks["Scrapy scheduler: enqueue"][0] != ""
    assert hooks["middleware: response"][0] == ""
    assert hooks["Scrapy scheduler: enqueue"][1:] == ["", ""]
    for column in (1, 2):
        assert float(hooks["middleware: response"][column]) > 0
        assert float(hooks["scheduler: enqueue"][column]) > 0
    assert float(hooks["store: flush"][1]) > 0
    assert re.search(r"lowest add-on ratio .*: \d\.\d\d \(target >= 0\.95\): (PASS|FAIL)", out)
