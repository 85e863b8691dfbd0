"""A preset compiled from its stored code (scoring/preset_code.py) is what sympy's parse
and lambdify give, character for character and bit for bit; a process that scores
with a preset (every crawl with the default RECRAWL_SCORER) never imports sympy."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import PRESETS, Scorer, preset_code
from scrapy_recrawl.scoring.expression import _parsed
from scrapy_recrawl.scoring.kernel import _source
from scrapy_recrawl.scoring.parse import SETTING

from .helpers import REPO

FORMULAS = sorted(name for name, p in PRESETS.items() if p.expression is not None)


def _entry(parsed) -> str:
    head = f"def _lambdifygenerated({', '.join(parsed.args)}):\n    return "
    body = _source(parsed.fn).removeprefix(head).removesuffix("\n")
    return f"{parsed.args!r}, {body!r}"


@pytest.mark.parametrize("name", FORMULAS)
def test_a_presets_stored_code_is_what_lambdify_writes(name):
    expression = PRESETS[name].expression.strip()
    parsed = _parsed(expression, SETTING, default_registry(), parse=True)
    assert parsed.sympy_expr is not None  # parsed by sympy, not taken from the store
    assert expression in preset_code.CODE, (
        f"preset {name!r} has no stored code; add to CODE: {expression!r}: ({_entry(parsed)})"
    )
    args, body = preset_code.CODE[expression]
    assert (args, preset_code.source(args, body)) == (parsed.args, _source(parsed.fn)), (
        f"preset {name!r}: lambdify now writes {expression!r}: ({_entry(parsed)})"
    )


def _terminals(args, size=5000):
    rng = np.random.default_rng(7)
    cols = {}
    for a in args:
        col = rng.exponential(2.0, size)
        col[::7] = 0.0
        col[::11] = -rng.random(size)[::11]
        col[::13] = np.nan
        col[::17] = np.inf
        cols[a] = col
    return cols


@pytest.mark.parametrize("name", FORMULAS)
def test_a_preset_from_its_stored_code_scores_as_the_parsed_expression_bit_for_bit(name):
    expression = PRESETS[name].expression.strip()
    stored = Scorer.from_spec(name, registry=default_registry())  # basket, experts: plug-ins'
    assert stored._compiled.sympy_expr is None  # the stored code: no sympy
    parsed = _parsed(expression, SETTING, default_registry(), parse=True)
    assert stored._symbol == parsed.symbol
    assert (stored.kernel is None) == (parsed.kernel is None)
    if parsed.kernel is not None:
        assert stored.kernel.source == parsed.kernel.source
    # every name the code reads is the object lambdify's namespace gives it
    code = stored._fn.__code__
    assert code.co_names == parsed.fn.__code__.co_names
    for used in code.co_names:
        assert stored._fn.__globals__[used] is parsed.fn.__globals__[used], used
    terms = _terminals(parsed.args)
    arrays = [terms[a] for a in parsed.args]
    with np.errstate(all="ignore"):
        reference = np.broadcast_to(np.asarray(parsed.fn(*arrays), dtype=np.float64), (5000,))
    for scores in (stored.score(terms), stored.score_reference(terms)):
        assert scores.tobytes() == np.ascontiguousarray(reference).tobytes()
    # the sympy expressions are still there, parsed when asked for
    assert str(stored.protected_expr) == str(parsed.protected)
    assert stored.sympy_expr == parsed.sympy_expr


def test_an_expression_that_is_no_presets_is_parsed():
    assert preset_code.compiled("t*X + 1", default_registry()) is None
    scorer = Scorer.from_spec("t*X + 1")
    assert scorer._compiled.sympy_expr is not None


def test_a_preset_naming_a_terminal_the_crawl_lacks_is_refused_by_the_parser():
    # the store's shortcut does not bypass the parser's check of the terminals
    assert preset_code.compiled("due", {"t", "n", "X"}) is None


_NO_SYMPY = """
import sys
from scrapy.settings import Settings
import scrapy_recrawl.addon, scrapy_recrawl.middleware, scrapy_recrawl.redis_scheduler
import scrapy_recrawl.scheduler
# what Scrapy loads for every `scrapy` command (the scrapy.commands entry points)
import scrapy_recrawl.commands.baskets, scrapy_recrawl.commands.evolve
import scrapy_recrawl.commands.plan, scrapy_recrawl.commands.report
import scrapy_recrawl.commands.reset
from scrapy_recrawl.plugin_terminals import default_registry, scorer_from_settings
from scrapy_recrawl.scoring import PRESETS, Scorer, policies

scorer_from_settings(Settings())  # what the scheduler and the middleware build
for name in PRESETS:
    Scorer.from_spec(name, registry=default_registry())
assert "sympy" not in sys.modules, "sympy imported"
assert policies._inverse_table.cache_info().currsize == 0, "chogm table built"
Scorer.from_spec("t*X + 1")  # an expression of the user's: parsed by sympy
assert "sympy" in sys.modules
print("ok")
"""


def test_a_process_scoring_with_presets_or_loading_the_commands_imports_no_sympy():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", _NO_SYMPY], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
