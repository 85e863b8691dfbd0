"""The terminal registry: one definition per terminal, read by the parser, the
computation, the GP and the docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.learn import gp
from scrapy_recrawl.plugin_terminals import default_registry, registry_from_settings
from scrapy_recrawl.scoring import (
    CORE_TERMINALS,
    Scorer,
    Terminal,
    TerminalRegistry,
    compute_terminals,
    optional_column,
)
from scrapy_recrawl.scoring.pooled import POOLED_NAMES, POOLED_TERMINALS
from scrapy_recrawl.settings import RecrawlSettingError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "scorers.md"


def test_docs_hold_exactly_the_registry_table():
    """docs/scorers.md's table is `python -m scrapy_recrawl.plugin_terminals`: no drift."""
    table = default_registry().markdown_table()
    assert table in DOCS.read_text(encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "scrapy_recrawl.plugin_terminals"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == table


def test_the_default_registry_is_the_core_then_the_builtin_plugins():
    reg = default_registry()
    names = list(reg)
    assert names[: len(CORE_TERMINALS)] == [t.name for t in CORE_TERMINALS]
    # scoring/policies.py's, always there too
    policies = ["lam", "tc", "burst", "w", "nutch_interval", "chogm_f", "lc_f"]
    assert names[len(CORE_TERMINALS) : len(CORE_TERMINALS) + 7] == policies
    assert names[len(CORE_TERMINALS) + 7 :] == [
        *(t.name for t in POOLED_TERMINALS),  # the pooled priors (scoring/pooled.py)
        "due",
        *(f"D{i}" for i in range(1, 6)),
        *(f"C{i}" for i in range(1, 6)),
        "Q",
        "cfreq",
        "NADc",
        "lmod",
        "strust",
    ]
    assert reg.prior_names() == {
        "CGp",
        "NADp",
        "SADp",
        "AADp",
        "GADp",
        "lam",
        "chogm_f",
        "lc_f",
        *POOLED_NAMES,
        "NADc",
    }
    assert reg.clock_names() == {"hours", "due"}
    assert registry_from_settings(None) is reg and registry_from_settings({}) is reg


def test_unknown_names_the_closest_terminal():
    reg = default_registry()
    assert reg.suggest("NADx") == "NAD" and reg.suggest("nad") == "NAD"
    assert reg.suggest("zzzz") is None
    msg = reg.unknown("AADP")
    assert msg.startswith("unknown terminal 'AADP' (did you mean 'AADp'?); known: n, X, t")
    with pytest.raises(ValueError, match="did you mean 'GAD'"):
        reg.get("GADD")
    with pytest.raises(ValueError, match="did you mean 'CG'"):
        compute_terminals({"n": np.zeros(1)}, 1, needed={"CGG"})


def test_a_typo_in_the_scorer_is_one_line_naming_the_setting_and_the_closest_terminal():
    with pytest.raises(RecrawlSettingError) as err:
        Scorer.from_settings({"RECRAWL_SCORER": "1 - exp(-AADP*t)"})
    msg = str(err.value)
    assert msg.startswith(
        "RECRAWL_SCORER='1 - exp(-AADP*t)': unknown name 'AADP' is not allowed "
        "(did you mean 'AADp'?); terminals: n, X, t,"
    )
    assert "\n" not in msg and "functions: log, exp" in msg
    with pytest.raises(RecrawlSettingError, match="did you mean 'Abs'"):
        Scorer.from_spec("abs(t)")


@pytest.mark.parametrize("name", ["log", "Min", "Float", "lambda", "not a name", "1x"])
def test_reserved_or_unusable_names_are_refused(name):
    with pytest.raises(ValueError, match="not a usable symbol"):
        TerminalRegistry([Terminal(name, "", optional_column(name))])


def test_a_terminal_defined_twice_is_refused_once_defined_is_fine():
    t = Terminal("depth", "d", optional_column("depth"), provider="x.Y")
    reg = TerminalRegistry([*CORE_TERMINALS, t])
    reg.register(t)  # the same definition again: nothing to say
    with pytest.raises(ValueError, match=r"'depth' is defined twice \(x.Y and the core\)"):
        reg.register(Terminal("depth", "other", optional_column("depth")))


def test_a_scorer_computes_its_terminals_with_its_registry():
    depth = Terminal("depth", "d", lambda st, *_: np.asarray(st["slashes"], dtype=np.float64))
    reg = TerminalRegistry([*CORE_TERMINALS, depth])
    scorer = Scorer.from_spec("depth * t", registry=reg)
    state = {"n": np.zeros(2), "last_visit_cycle": np.zeros(2), "slashes": np.array([1.0, 2.0])}
    np.testing.assert_array_equal(scorer.score_state(state, 3), [3.0, 6.0])
    with pytest.raises(RecrawlSettingError, match="unknown name 'depth'"):
        Scorer.from_spec("depth * t")  # the default registry has no such terminal


def test_the_gp_terminal_sets_read_the_registry():
    assert gp.replayed() == tuple(n for n in default_registry() if n not in ("hours", "due"))
    with pytest.raises(ValueError, match="did you mean 'NAD'"):
        gp.terminal_set("t,NADx")
    with pytest.raises(ValueError, match="'due' needs the wall clock"):
        gp.terminal_set("t,due")


def test_a_scorer_string_is_parsed_once_per_process(monkeypatch):
    # the add-on's start-up check, the scheduler and the middleware each build the scorer
    from scrapy.settings import Settings
    from scrapy.utils.test import get_crawler

    import scrapy_recrawl.scoring.expression as expression
    from scrapy_recrawl.addon import RecrawlAddon
    from scrapy_recrawl.plugin_terminals import scorer_from_settings
    from scrapy_recrawl.plugins import scorer_for_crawler

    calls = []
    real = expression.parse_expression
    monkeypatch.setattr(
        expression, "parse_expression", lambda *a, **kw: calls.append(a[0]) or real(*a, **kw)
    )
    text = "t * X + 0.5 * AADp"  # not parsed by any other test of this process
    settings = Settings({"RECRAWL_SCORER": text})
    RecrawlAddon().update_settings(settings)
    scorer_for_crawler(get_crawler(settings_dict={"RECRAWL_SCORER": text}))
    scorer_from_settings(settings)
    assert calls == [text]
