"""What every run pays at start-up (issue 32): reading the built-in plug-ins' terminals
and loading their classes imports none of their internals, and a ``scrapy`` command in
a project with the add-on imports no sympy. Each check runs in a fresh interpreter:
this one has long imported everything."""

from __future__ import annotations

import os
import subprocess
import sys

from .helpers import REPO
from .project import make_project

#: the plug-ins' internals, imported only where a built plug-in (or its settings'
#: check) uses them
LAZY = (
    "scrapy_recrawl.estimate.baskets",
    "scrapy_recrawl.estimate.probes",
    "scrapy_recrawl.estimate.forest",
    "scrapy_recrawl.content.store",
    "scrapy_recrawl.content.related",
    "scrapy_recrawl.planning.buckets",
    "scrapy_recrawl.planning.model",
    "scrapy_recrawl.planning.solver",
    "scrapy_recrawl.planning.webfountain",
    "scrapy_recrawl.evidence.announce",
)

#: the GP's machinery (its search, its process pool, its report): imported by
#: ``recrawl-evolve`` when it runs, not by its module, which Scrapy imports for every
#: ``scrapy`` command, ``scrapy crawl`` included
LAZY_IN_COMMANDS = (
    "scrapy_recrawl.learn.evolve",
    "scrapy_recrawl.learn.search",
    "scrapy_recrawl.learn.population",
    "scrapy_recrawl.learn.fitness",
    "scrapy_recrawl.learn.report",
    "scrapy_recrawl.learn.recommend",
    "scrapy_recrawl.learn.histories",
    "scrapy_recrawl.learn.preflight",
    "scrapy_recrawl.learn.gp",
    "concurrent.futures.process",
)

_REGISTRY_AND_CLASSES = f"""
import sys
from scrapy.settings import Settings
from scrapy_recrawl.plugin_terminals import scorer_from_settings
from scrapy_recrawl.plugins import plugin_classes

scorer_from_settings(Settings())  # the crawl's default scorer, over the plug-ins' terminals
classes = plugin_classes(Settings())
assert len(classes) == 4, classes
for cls in classes:  # what the registry and the start-up check read of a class
    cls.terminals, cls.capabilities, cls.selects
loaded = sorted(m for m in {LAZY!r} if m in sys.modules)
assert not loaded, loaded
assert not [m for m in sys.modules if m.split(".")[0] == "sympy"], "sympy imported"
# the internals still come when a plug-in's settings are checked
for cls in classes:
    cls.check_settings(Settings({{"RECRAWL_PLANNER": None}}))
assert "scrapy_recrawl.estimate.baskets" in sys.modules
assert "scrapy_recrawl.content.store" in sys.modules
print("ok")
"""


def _env(*paths: object) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}


def test_the_registry_and_the_plugin_classes_import_no_plugin_internals_nor_sympy():
    out = subprocess.run(
        [sys.executable, "-c", _REGISTRY_AND_CLASSES],
        capture_output=True,
        text=True,
        env=_env(REPO),
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_the_planning_package_still_offers_its_names():
    # planning/__init__.py hands its names out on first use (PEP 562)
    code = (
        "import sys, scrapy_recrawl.planning as p\n"
        "assert 'scrapy_recrawl.planning.solver' not in sys.modules\n"
        "from scrapy_recrawl.planning import PlanError, WebFountainPlanner, solve_plan\n"
        "from scrapy_recrawl.planning.model import PlanError as P2\n"
        "assert PlanError is P2 and callable(solve_plan) and WebFountainPlanner\n"
        "assert set(p.__all__) <= set(dir(p))\n"
        "try:\n    p.nothing\nexcept AttributeError:\n    print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(REPO), timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_scrapy_list_in_a_project_with_the_add_on_imports_no_sympy(tmp_path):
    project = make_project(tmp_path)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "scrapy", "list"],
        cwd=project,
        capture_output=True,
        text=True,
        env=_env(REPO, project),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "alpha" in out.stdout.split(), out.stdout  # the project's spiders were listed
    lines = [line for line in out.stderr.splitlines() if line.startswith("import time:")]
    modules = [line.rsplit("|", 1)[-1].strip() for line in lines]
    # the add-on's commands and settings were imported (and timed) in this process
    assert "scrapy_recrawl.settings" in modules, out.stderr[-3000:]
    assert not [m for m in modules if m.split(".")[0] == "sympy"]
    # (Scrapy loads the commands with importlib, which -X importtime does not list; what
    # they import is listed, as scrapy_recrawl.settings above)
    assert not [m for m in LAZY_IN_COMMANDS if m in modules]


def test_recrawl_evolve_still_finds_its_machinery_when_it_runs(tmp_path):
    # the command's imports happen in run(): a dry run over a tiny history reaches them
    history = tmp_path / "h.csv"
    history.write_text(
        "url,cycle,changed\n"
        + "".join(
            f"p{i},{c},{int((i + c) % (i % 3 + 2) == 0)}\n" for i in range(8) for c in range(24)
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "recrawl-evolve", "--history", str(history), "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(REPO),
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "scrapy_recrawl.learn.evolve" not in out.stderr
