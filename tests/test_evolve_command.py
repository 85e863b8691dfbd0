"""`scrapy recrawl-evolve`: the command class, its options and its error messages."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pytest
from scrapy.exceptions import UsageError
from scrapy.utils.project import get_project_settings

from scrapy_recrawl.commands.evolve import Command
from tests.test_evolve import _fill_store, _history

TINY = ["--population", "12", "--generations", "2", "--seeds", "1", "--keep-best", "6", "-q"]


def run(argv: list[str]) -> None:
    """What scrapy.cmdline does with a command: settings, options, process_options, run."""
    cmd = Command()
    cmd.settings = get_project_settings()
    parser = argparse.ArgumentParser(prog="scrapy recrawl-evolve")
    cmd.add_options(parser)
    opts, args = parser.parse_known_args(argv)
    cmd.process_options(args, opts)
    cmd.run(args, opts)


@pytest.fixture
def outside(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    return tmp_path


@pytest.fixture
def npz(outside):
    path = outside / "h.npz"
    np.savez(path, changes=_history())
    return str(path)


def test_runs_on_a_file_and_saves_a_scorer(npz, outside, capsys):
    out = outside / "w.json"
    run(["--history", npz, *TINY, "--output", str(out)])
    text = capsys.readouterr().out
    assert "| winner |" in text and "| oracle |" in text and "| aad+ |" in text
    last = text.strip().splitlines()[-1]
    assert last.startswith("expression: ")
    data = json.loads(out.read_text())
    assert data["expression"] == last[len("expression: ") :]
    assert data["parameters"]["population"] == 12


def test_seed_presets_option(npz, outside, capsys):
    run(["--history", npz, *TINY, "--output", str(outside / "a.json")])
    run(["--history", npz, *TINY, "--seed-presets", "--output", str(outside / "b.json")])
    a = json.loads((outside / "a.json").read_text())
    b = json.loads((outside / "b.json").read_text())
    assert a["parameters"]["seed_presets"] is False and b["parameters"]["seed_presets"] is True


def test_window_is_saved_and_checked_against_recrawl_window(npz, outside, capsys):
    from scrapy_recrawl.scoring import Scorer
    from scrapy_recrawl.settings import RecrawlSettingError

    def load(path, window):
        return Scorer.from_settings({"RECRAWL_SCORER": str(path), "RECRAWL_WINDOW": window})

    out = outside / "w.json"
    run(["--history", npz, *TINY, "--terminals", "t,X,C1,C5,Q", "--output", str(out)])
    data = json.loads(out.read_text())
    assert data["window"] == 5 and data["related"]["RECRAWL_EXPERTS"] == 20
    # a file that uses C5 / D4 needs RECRAWL_WINDOW >= 5 / 4
    data["expression"] = "t*C5 + D4"
    out.write_text(json.dumps(data))
    load(out, 5)
    with pytest.raises(RecrawlSettingError, match=r"RECRAWL_WINDOW=3.*RECRAWL_WINDOW = 5") as e:
        load(out, 3)
    assert str(out) in str(e.value) and "C5" in str(e.value) and "window of 5" in str(e.value)
    data["expression"] = "t*C2"
    out.write_text(json.dumps(data))
    load(out, 3)  # C2 is kept by a window of 3
    with pytest.raises(RecrawlSettingError, match="RECRAWL_WINDOW"):
        Scorer.from_settings({"RECRAWL_SCORER": "D4 + t", "RECRAWL_WINDOW": 3})


def test_related_settings_differing_from_the_evolved_ones_are_told(npz, outside, caplog):
    from scrapy_recrawl.scoring import Scorer

    out = outside / "q.json"
    run(["--history", npz, *TINY, "--terminals", "t,X,Q", "--output", str(out)])
    data = json.loads(out.read_text())
    data["expression"] = "Q + t"
    out.write_text(json.dumps(data))
    Scorer.from_settings({"RECRAWL_SCORER": str(out)})
    assert "evolved with" not in caplog.text  # the defaults, as evolved
    Scorer.from_settings({"RECRAWL_SCORER": str(out), "RECRAWL_EXPERTS": 5})
    assert "RECRAWL_EXPERTS=20, this crawl has 5" in caplog.text


def test_progress_is_one_line_per_generation_and_seed(npz, capsys):
    run(["--history", npz, "--population", "8", "--generations", "3", "--seeds", "2"])
    err = capsys.readouterr().err
    assert err.count("generation") == 6
    assert "seed 2/2 [" in err and "generation 3/3" in err


def test_missing_file(outside):
    with pytest.raises(UsageError, match="no such file"):
        run(["--history", str(outside / "nope.npz"), *TINY])


def test_no_history_outside_a_project(outside):
    with pytest.raises(UsageError, match="--history FILE"):
        run(TINY)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--population", "0"], "expected an integer >= 1"),
        (["--population", "many"], "expected an integer"),
        (["--budget", "2.5"], "share of the pages"),
        (["--fitness", "speed"], "invalid choice"),
        (["--selection", "top"], "invalid choice"),
        (["--prior", "2,1"], "0 <= a < b"),
    ],
)
def test_bad_option_values_are_argparse_errors(npz, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        run(["--history", npz, *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--folds", "2"], "--folds=2"),
        (["--tournament", "400"], "--tournament=400"),
        (["--crossover-depth", "11"], "--crossover-depth=11"),
        (["--terminals", "t,bogus"], "unknown: bogus"),
        (["--warmup", "50"], "--warmup=50"),
        (["--output", "w.txt"], "expected a .json"),
    ],
)
def test_bad_option_combinations_are_usage_errors(npz, argv, message):
    with pytest.raises(UsageError, match=message):
        run(["--history", npz, *TINY, *argv])


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A Scrapy project whose store has complete histories for every URL (share 1.0)."""
    truth = _history(60, 10, seed=4)
    truth[:, 0] = 0
    store = tmp_path / "history.sqlite3"
    _fill_store(store, 10, 60, truth)
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = evolveproj.settings\n")
    pkg = tmp_path / "evolveproj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "settings.py").write_text(
        f"RECRAWL_STORE = {str(store)!r}\nRECRAWL_MONITOR_SHARE = 1.0\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "evolveproj.settings")
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("evolveproj")]:
        del sys.modules[name]


def test_inside_a_project_reads_the_monitoring_sample(project, capsys):
    run([*TINY, "--folds", "3"])
    captured = capsys.readouterr()
    assert "60 pages x 10 cycles" in captured.err
    assert "monitoring sample" in captured.err
    assert captured.out.strip().splitlines()[-1].startswith("expression: ")


def test_inside_a_project_without_a_monitoring_sample_explains_it(project):
    with pytest.raises(UsageError, match="RECRAWL_MONITOR_SHARE is 0"):
        run([*TINY, "-s", "RECRAWL_MONITOR_SHARE=0"])


@pytest.fixture
def spiders_project(tmp_path, monkeypatch):
    """A project with two spiders and the default store, one per spider: alpha's has
    complete histories, beta has none yet."""
    truth = _history(60, 10, seed=4)
    truth[:, 0] = 0
    _fill_store(tmp_path / ".scrapy" / "recrawl" / "alpha" / "history.sqlite3", 10, 60, truth)
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = twoproj.settings\n")
    pkg = tmp_path / "twoproj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "settings.py").write_text(
        'SPIDER_MODULES = ["twoproj.spiders"]\nRECRAWL_MONITOR_SHARE = 1.0\n'
    )
    (pkg / "spiders.py").write_text(
        "import scrapy\n\n\nclass A(scrapy.Spider):\n    name = 'alpha'\n\n\n"
        "class B(scrapy.Spider):\n    name = 'beta'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "twoproj.settings")
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("twoproj")]:
        del sys.modules[name]


def test_each_spider_has_its_history_and_the_command_asks_which(spiders_project, capsys):
    with pytest.raises(UsageError, match="--spider NAME"):
        run(TINY)  # two spiders, two histories: which one?
    run([*TINY, "--folds", "3", "--spider", "alpha"])
    assert "60 pages x 10 cycles" in capsys.readouterr().err
    beta = spiders_project / ".scrapy" / "recrawl" / "beta"
    with pytest.raises(UsageError, match=r"no history store at .*recrawl/beta/history.sqlite3"):
        run([*TINY, "--spider", "beta"])  # beta's own history: none yet
    assert not beta.exists()  # an offline command creates no store
