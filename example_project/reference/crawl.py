"""Real ``scrapy crawl`` cycles of the reference site, as a user runs them.

Why: tests and benchmarks must measure the crawl a user gets -- an ordinary spider and
the add-on line, nothing else -- not a replay. :func:`make_project` writes a Scrapy
project whose settings are only ``SPIDER_MODULES`` (the example project's ``shop`` and
``news`` spiders) and ``ADDONS`` (plus what the caller adds); :func:`crawl` runs one
``scrapy crawl`` in a subprocess (Twisted's reactor cannot restart in-process) and
returns its stats; :func:`run_cycles` runs several, moving the site one day on after
each, so cycle ``c`` sees day ``c - 1`` (``score.visits_from_store``'s default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from .world import ReferenceSite

REPO = Path(__file__).resolve().parents[2]

SETTINGS = """\
# A user's project: the example spiders and the add-on line.
SPIDER_MODULES = ["example_project.recrawl_demo.spiders"]
ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}
"""


def make_project(root: Path | str, settings: str = "") -> Path:
    """Write ``scrapy.cfg`` and ``refproj/settings.py`` (:data:`SETTINGS` + ``settings``)
    under ``root``; returns ``root``."""
    root = Path(root)
    (root / "refproj").mkdir(parents=True, exist_ok=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = refproj.settings\n")
    (root / "refproj" / "__init__.py").write_text("")
    (root / "refproj" / "settings.py").write_text(SETTINGS + settings)
    return root


def crawl(
    project: Path | str,
    spider: str,
    start_url: str,
    store: str,
    extra: Mapping[str, str] | None = None,
    timeout: float = 300,
    stats_file: Path | str | None = None,
) -> dict:
    """One ``scrapy crawl <spider>`` in ``project`` with ``RECRAWL_STORE=store`` (and
    ``extra`` as ``-s NAME=VALUE``); returns the crawl's stats. A failed crawl raises
    RuntimeError with the end of its log. The stats go through ``stats_file``
    (default: beside a store file, ``<store>.stats.json``; give one when ``store`` is
    not a path, e.g. ``"redis"`` with the ``RedisRecrawlScheduler``)."""
    project = Path(project)
    stats_file = Path(stats_file or Path(store).with_suffix(".stats.json"))
    cmd = [sys.executable, "-m", "scrapy", "crawl", spider, "-a", f"start_url={start_url}",
           "-s", f"RECRAWL_STORE={store}", "-s", "LOG_LEVEL=WARNING",
           "-s", f"STATS_DUMP_FILE={stats_file}",
           "-s", 'EXTENSIONS={"example_project.stats_dump.StatsDump": 0}']  # fmt: skip
    for name, value in (extra or {}).items():
        cmd += ["-s", f"{name}={value}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    out = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(
            f"scrapy crawl {spider} failed ({out.returncode}):\n{out.stderr[-3000:]}"
        )
    with open(stats_file, encoding="utf-8") as fh:
        return json.load(fh)


def run_cycles(
    site: ReferenceSite,
    base_url: str,
    spider: str,
    cycles: int,
    project: Path | str,
    store: str,
    extra: Mapping[str, str] | None = None,
    stats_file: Path | str | None = None,
) -> list[dict]:
    """``cycles`` crawls of ``<base_url>/<spider>/``, advancing ``site`` one day after
    each; returns each cycle's stats (``stats_file``: as :func:`crawl`)."""
    stats = []
    for _ in range(cycles):
        url = f"{base_url}/{spider}/"
        stats.append(crawl(project, spider, url, store, extra, stats_file=stats_file))
        site.advance()
    return stats
