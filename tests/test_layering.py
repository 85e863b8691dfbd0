"""The layering holds at run time, not only in the import graph (setup.cfg's contracts):
the cycle core and a scorer of core terminals load no Scrapy, no Twisted and no paper's
package. Each check runs in a fresh interpreter, so nothing another test imported counts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scrapy_recrawl.scoring import PRESETS

from .helpers import REPO

#: what the cycle core, the scorers, the stores and the change test must never load
FORBIDDEN = ("scrapy", "twisted", "scrapy_redis")
#: the papers' packages (the plug-ins), and the GP above them
PAPERS = tuple(
    f"scrapy_recrawl.{p}" for p in ("content", "estimate", "evidence", "planning", "learn")
)

#: the presets made of core terminals the issue names (a crawl's default is "aad+")
CORE_PRESETS = ("aad+", "gad", "nutch", "chogm")

_REPORT = f"""
import json, sys
forbidden = {FORBIDDEN!r}
papers = {PAPERS!r}
loaded = sorted(
    m for m in sys.modules
    if m.split(".")[0] in forbidden or any(m == p or m.startswith(p + ".") for p in papers)
)
print(json.dumps(loaded))
"""


def _loaded_after(code: str) -> list[str]:
    """The forbidden modules ``sys.modules`` holds after ``code`` ran in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", code + _REPORT],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_named_presets_are_core_terminals_only():
    # guard for the test below: were one of them to use a plug-in's terminal, it would
    # fail to build there (the core registry does not know it), not pass by accident
    from scrapy_recrawl.scoring import Scorer, core_registry

    for name in CORE_PRESETS:
        assert name in PRESETS
        needed = Scorer.from_spec(name).terminals_needed
        assert not core_registry().providers(needed), name


def test_importing_the_core_and_scoring_with_core_presets_loads_no_scrapy_nor_paper():
    code = f"""
import importlib, pkgutil
import numpy as np
import scrapy_recrawl.core
from scrapy_recrawl.core.selection import with_budget
from scrapy_recrawl.core.simulate import new_state
from scrapy_recrawl.scoring import Scorer

state = new_state(5)
state["n"][:] = [0, 1, 2, 3, 4]
state["X"][:] = [0, 1, 1, 2, 4]
state["last_visit_cycle"][:] = [0, 1, 2, 3, 4]
state = with_budget(state, 2)  # chogm solves for a cycle's budget
for name in {CORE_PRESETS!r}:
    scorer = Scorer.from_spec(name)
    assert scorer.top_k_state(state, 6, 2, now=1e9).shape == (2,)
# and every module of the packages that must stay free of Scrapy (history's through
# the core's imports of it)
for package in ("core", "scoring", "change", "history"):
    pkg = importlib.import_module("scrapy_recrawl." + package)
    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"scrapy_recrawl.{{package}}.{{info.name}}")
"""
    assert _loaded_after(code) == []


def test_an_expression_of_core_terminals_loads_no_scrapy_nor_paper():
    code = """
import numpy as np
from scrapy_recrawl.scoring import ExpressionScorer

scorer = ExpressionScorer("n/t")
state = {"n": np.array([1.0, 2.0]), "last_visit_cycle": np.array([0, 1])}
assert scorer.score_state(state, 3).tolist() == [1 / 3, 1.0]
"""
    assert _loaded_after(code) == []


def test_the_crawls_registry_loads_the_plugins_it_lists():
    # the other side: the layer above scoring/ loads the listed plug-ins by path, and
    # their terminals parse there (so the test above would see a paper if it leaked)
    code = """
from scrapy_recrawl.plugin_terminals import scorer_from_settings

assert "Q" in scorer_from_settings({"RECRAWL_SCORER": "experts"}).terminals_needed
"""
    assert "scrapy_recrawl.content.plugin" in _loaded_after(code)


@pytest.mark.parametrize("name", ["basket", "experts"])
def test_a_plugin_terminal_is_unknown_to_the_core_registry(name):
    from scrapy_recrawl.plugin_terminals import default_registry
    from scrapy_recrawl.scoring import Scorer
    from scrapy_recrawl.settings import RecrawlSettingError

    with pytest.raises(RecrawlSettingError, match="unknown name"):
        Scorer.from_spec(name)
    assert Scorer.from_spec(name, registry=default_registry()).terminals_needed
