"""recrawl-evolve's objectives and guards: the ChangeRate/freshness mix, validation by
time, the preset guard, any registry terminal in the batched replay, bench/selftrain.py."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.core.groups import history_groups
from scrapy_recrawl.core.simulate import simulate
from scrapy_recrawl.learn import gp
from scrapy_recrawl.learn.config import EvolveConfig, fitness_weights, replayable_presets
from scrapy_recrawl.learn.evolve import evolve
from scrapy_recrawl.learn.fitness import (
    IndexTieScorer,
    TreeScorer,
    replay_fitness,
    top_k_by_index,
)
from scrapy_recrawl.learn.guard import GuardResult
from scrapy_recrawl.learn.population import PopulationReplay
from scrapy_recrawl.learn.report import save_json
from scrapy_recrawl.learn.search import Rows, _replay, fold_roles, split_folds
from scrapy_recrawl.scoring import (
    CORE_TERMINALS,
    PRESETS,
    Preset,
    Scorer,
    Terminal,
    TerminalRegistry,
    compute_terminals,
)

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(population=16, generations=3, seeds=2, keep_best=8, folds=5)


def _history(pages: int = 240, cycles: int = 30, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rate = np.where(rng.random(pages) < 0.4, 0.0, rng.beta(0.6, 3.0, pages))
    return (rng.random((pages, cycles)) < rate[:, None]).astype(np.uint8)


# ----------------------------------------------------------------- the fitness mix


def test_a_mix_is_the_weighted_sum_of_the_metrics():
    assert fitness_weights("freshness") == {"freshness": 1.0}
    assert fitness_weights("changerate:1,freshness:3") == {"changerate": 0.25, "freshness": 0.75}
    changes = _history()
    trees = gp.ramped_half_and_half(random.Random(1), 12, gp.TERMINAL_SETS["all"])
    fit = PopulationReplay(changes).evaluate(trees)
    mix = fit.of("changerate:0.3,freshness:0.7")
    assert np.allclose(mix, 0.3 * fit.change_rate + 0.7 * fit.freshness)
    r = simulate(changes, "aad+")
    assert replay_fitness("ndcg:1,freshness:1", r) == pytest.approx(
        (r.mean_ndcg + r.mean_freshness) / 2
    )


@pytest.mark.parametrize(
    "spec", ["speed", "changerate:", "changerate:-0.5", "freshness:x", "ndcg:0", "ndcg:1,ndcg:2"]
)
def test_a_bad_fitness_names_the_option(spec):
    with pytest.raises(ValueError, match=re.escape(f"--fitness={spec!r}")):
        EvolveConfig(fitness=spec).check()


def test_evolving_for_freshness_trains_on_freshness():
    changes = _history(seed=4)
    res = evolve(changes, EvolveConfig(**SMALL, fitness="freshness"), progress=False)
    best = res.candidates[0]
    folds = split_folds(changes.shape[0], 5, 0)
    train_f, _, _ = fold_roles(5)
    train = changes[np.sort(np.concatenate([folds[i] for i in train_f]))]
    assert best.train == PopulationReplay(train).evaluate([best.tree]).freshness[0]
    # freshness is in every row of the report and of the JSON
    assert all(np.isfinite(row[4]) for row in res.rows())
    assert "freshness" in res.table()


# ----------------------------------------------------------------- validation by time


def test_time_validation_trains_on_the_early_cycles_and_validates_on_the_late_ones():
    changes = _history(cycles=30, seed=2)
    config = EvolveConfig(**SMALL, validation="time", validation_cycles=0.3)
    split = config.time_split(30)
    assert split == 21
    res = evolve(changes, config, progress=False)
    folds = split_folds(changes.shape[0], 5, 0)
    train_f, valid_f, _ = fold_roles(5)
    train = changes[np.sort(np.concatenate([folds[i] for i in train_f]))]
    valid = changes[np.sort(np.concatenate([folds[i] for i in valid_f]))]
    for cand in res.candidates[:3]:
        # training: the earlier cycles only (the later ones never reach the GP)
        early = PopulationReplay(train[:, :split]).evaluate([cand.tree]).change_rate[0]
        assert cand.train == early
        # validation: the validation pages replayed whole, measured on the held-out cycles
        whole = PopulationReplay(valid).evaluate([cand.tree]).per_cycle["changerate"][0]
        assert cand.validation_cycles.size == 30 - split
        assert cand.validation == pytest.approx(whole[split - 2 :].mean())


def test_time_validation_needs_training_cycles():
    with pytest.raises(ValueError, match="--validation-cycles=0.9"):
        EvolveConfig(validation="time", validation_cycles=0.9).check(cycles=10, pages=100)
    with pytest.raises(ValueError, match="--validation='days'"):
        EvolveConfig(validation="days").check()


# ----------------------------------------------------------------- the preset guard


def test_the_guard_returns_the_best_preset_when_nothing_learned_beats_it(tmp_path):
    changes = _history(seed=5)
    # n and X only: no recency at all, every preset with t beats whatever is learned
    config = EvolveConfig(**SMALL, terminals="n,X")
    res = evolve(changes, config, progress=False)
    name = res.returned_preset
    assert name is not None and res.guard is not None
    assert res.guard.presets[name] >= res.guard.learned
    assert res.guard.presets[name] == max(res.guard.presets.values())
    assert res.expression == PRESETS[name].expression
    assert f"returning {name}" in res.table()
    # the test fold's "winner" row is that preset's replay
    folds = split_folds(changes.shape[0], 5, 0)
    test = changes[folds[0]]
    assert res.test["winner"].mean_change_rate == simulate(test, name).mean_change_rate
    out = tmp_path / "w.json"
    save_json(res, str(out))
    data = json.loads(out.read_text())
    assert data["returned_preset"] == name and data["expression"] == PRESETS[name].expression
    assert data["preset_guard"]["learned_expression"] == res.winner.expression
    # off: the learned expression, as before
    off = evolve(
        changes, EvolveConfig(**SMALL, terminals="n,X", preset_guard=False), progress=False
    )
    assert off.guard is None and off.expression == off.winner.expression
    assert off.returned_preset is None


def test_the_guard_compares_on_the_same_validation_data_with_the_same_fitness():
    changes = _history(seed=6)
    config = EvolveConfig(**SMALL, fitness="changerate:0.5,freshness:0.5")
    res = evolve(changes, config, progress=False)
    folds = split_folds(changes.shape[0], 5, 0)
    _, valid_f, _ = fold_roles(5)
    valid = changes[np.sort(np.concatenate([folds[i] for i in valid_f]))]
    g = res.guard
    assert set(g.presets) == set(replayable_presets()) - {"rand"}
    for name in ("aad+", "age"):
        r = simulate(valid, name, seed=0)
        assert g.presets[name] == replay_fitness(config.fitness, r)
    learned = simulate(valid, res.winner.expression, seed=0)
    assert g.learned == replay_fitness(config.fitness, learned)
    assert (g.returned_preset is None) == (g.learned > max(g.presets.values()))


def test_a_preset_added_to_presets_is_guarded_against(monkeypatch):
    monkeypatch.setitem(
        PRESETS, "recent", Preset("recent", "t*NADp", "a test's preset", "for the guard")
    )
    assert "recent" in replayable_presets()
    res = evolve(_history(seed=7), EvolveConfig(**SMALL, terminals="n,X"), progress=False)
    assert "recent" in res.guard.presets and "recent" in res.test


def test_guard_result_rules():
    g = GuardResult("changerate", "t * X", 0.5, {"age": 0.4, "aad+": 0.45})
    assert g.returned_preset is None and g.expression == "t * X"
    assert "beats the best preset on the validation data" in g.line()
    tie = GuardResult("changerate", "t * X", 0.45, {"age": 0.4, "aad+": 0.45})
    assert tie.returned_preset == "aad+" and tie.expression == PRESETS["aad+"].expression
    # ranked on more data: the best preset there is the one compared with, on validation
    ranked = GuardResult(
        "changerate", "t * X", 0.42, {"age": 0.4, "aad+": 0.45}, {"age": 0.6, "aad+": 0.5}
    )
    assert ranked.best_preset == "age" and ranked.returned_preset is None
    assert "beats the best preset (ranked on every page but the test fold's) on" in ranked.line()
    kept = GuardResult(
        "changerate", "t * X", 0.38, {"age": 0.4, "aad+": 0.45}, {"age": 0.6, "aad+": 0.5}
    )
    assert kept.returned_preset == "age" and kept.to_json()["presets_ranking"]["age"] == 0.6


def test_the_guard_ranks_the_presets_on_every_page_but_the_test_folds():
    changes = _history(seed=8)
    config = EvolveConfig(**SMALL)
    res = evolve(changes, config, progress=False)
    folds = split_folds(changes.shape[0], 5, 0)
    train_f, valid_f, _ = fold_roles(5)
    seen = changes[np.sort(np.concatenate([folds[i] for i in (*train_f, *valid_f)]))]
    g = res.guard
    assert set(g.ranking) == set(g.presets)
    for name in ("cg+", "age", "burst"):
        assert g.ranking[name] == replay_fitness("changerate", simulate(seen, name, seed=0))
    best = max(g.ranking, key=lambda n: g.ranking[n])
    assert g.best_preset == best
    assert (g.returned_preset == best) == (g.presets[best] >= g.learned)


# ----------------------------------------------------------------- registry terminals


def _n_above_mean(state, cycle, now, a, b, get):
    # depends on every URL: not a function of a URL's own state
    n = get("n")
    return n - n.mean()


def _weight(state, *_):
    return (
        np.asarray(state["importance"], dtype=np.float64)
        if "importance" in state
        else (np.ones(np.shape(state["n"])))
    )


REGISTRY = TerminalRegistry(
    (
        *CORE_TERMINALS,
        Terminal("nbar", "n above the mean n of all URLs (test)", _n_above_mean),
        Terminal("wt", "the URL's importance column, 1 where absent (test)", _weight),
    )
)


class _Static:
    """simulate()'s extension giving a fixed per-URL column."""

    def __init__(self, columns):
        self._columns = columns

    def columns(self, cycle):
        return self._columns

    def fetched(self, idx, hit, cycle):
        pass


def test_any_registry_terminal_replays_as_simulate_does():
    changes = _history(pages=200, cycles=20, seed=8)
    importance = np.random.default_rng(0).integers(1, 4, changes.shape[0]).astype(float)
    terminals = gp.terminal_set("t,X,AADp,nbar,wt", registry=REGISTRY)
    trees = gp.ramped_half_and_half(random.Random(3), 30, terminals)
    trees += [("*", "nbar", "t"), ("*", "wt", "t"), ("+", "t", "X")]
    replay = PopulationReplay(changes, registry=REGISTRY, columns={"importance": importance})
    fit = replay.evaluate(trees)
    assert any("nbar" in gp.terminals_used(t) for t in trees[:30])
    for i, tree in enumerate(trees):
        scorer = TreeScorer(tree)
        scorer.registry = REGISTRY
        r = simulate(changes, IndexTieScorer(scorer), extension=_Static({"importance": importance}))
        assert r.mean_change_rate == fit.change_rate[i], gp.to_expression(tree)
        assert r.mean_freshness == fit.freshness[i], gp.to_expression(tree)
    # computed per class, nbar would use the mean over classes: not simulate's numbers
    assert ("*", "nbar", "t") in trees


def test_the_registry_set_holds_every_store_terminal_and_evolves():
    names = gp.terminal_set("registry", registry=REGISTRY)
    assert names[: len(gp.TERMINAL_SETS["all"])] == gp.TERMINAL_SETS["all"]
    assert {"nbar", "wt"} <= set(names) and "hours" not in names and "D" not in names
    res = evolve(
        _history(seed=9),
        EvolveConfig(**SMALL, terminals="registry", seed_presets=True),
        progress=False,
        registry=REGISTRY,
    )
    assert "nbar" in res.terminals


# ----------------------------------------------------------------- the group column


def _two_directories(fast: int = 40, slow: int = 120, cycles: int = 30, seed: int = 11):
    """Pages of two directories, one changing every 2 to 5 days, one every 10 days or
    less often (rows shuffled, so every fold holds both); the page names and their group
    codes."""
    rng = np.random.default_rng(seed)
    rate = np.concatenate([rng.uniform(0.2, 0.5, fast), rng.uniform(0.0, 0.1, slow)])
    names = [f"site/fast/p{i}" for i in range(fast)] + [f"site/slow/p{i}" for i in range(slow)]
    order = rng.permutation(fast + slow)
    changes = (rng.random((fast + slow, cycles)) < rate[:, None]).astype(np.uint8)[order]
    names = [names[i] for i in order]
    return changes, names, history_groups(names, len(names))


def test_the_learner_replays_with_the_pages_groups():
    changes, _, groups = _two_directories()
    config = EvolveConfig(**SMALL, terminals="t,AADh,NADh", seed_presets=True)
    terminals = gp.terminal_set(config.terminals)
    tree = gp.tree_of_expression("1 - exp(-AADh*t)")
    assert tree is not None
    # the batched replay (training, validation, held-out folds) with the groups is
    # simulate's with them, and not the one-group replay
    grouped = _replay(Rows.of(changes, groups), config, terminals).evaluate([tree])
    one = _replay(Rows.of(changes), config, terminals).evaluate([tree])
    scorer = IndexTieScorer(TreeScorer(tree))
    assert grouped.change_rate[0] == simulate(changes, scorer, groups=groups).mean_change_rate
    assert one.change_rate[0] == simulate(changes, scorer).mean_change_rate
    # the directories' priors tell the slow pages apart: far more changes found
    assert grouped.change_rate[0] > one.change_rate[0] + 0.1

    res = evolve(changes, config, progress=False, groups=groups)
    flat = evolve(changes, config, progress=False)
    folds = split_folds(changes.shape[0], 5, config.seed)
    _, valid_f, test_f = fold_roles(5)
    vrows = np.sort(np.concatenate([folds[i] for i in valid_f]))
    trows = folds[test_f]
    kw = {"seed": config.seed}
    # the guard's replays are simulate(..., groups=) of the validation pages
    for name in ("aad+h", "nad+h", "aad+"):
        r = simulate(changes[vrows], name, groups=groups[vrows], **kw)
        assert res.guard.presets[name] == replay_fitness(config.fitness, r), name
    assert res.guard.learned == replay_fitness(
        config.fitness,
        simulate(changes[vrows], res.winner.expression, groups=groups[vrows], **kw),
    )
    # the report's test fold too: the presets and what the run returned
    for name in ("aad+h", "nad+h"):
        r = simulate(changes[trows], name, groups=groups[trows], **kw)
        assert res.test[name].mean_change_rate == r.mean_change_rate, name
        assert res.test[name].mean_freshness == r.mean_freshness, name
    what = res.guard.returned_preset or res.winner.expression  # the winner row's
    returned = simulate(changes[trows], what, groups=groups[trows], **kw)
    assert res.test["winner"].mean_change_rate == returned.mean_change_rate
    # the held-out spread of a pooled preset: the validation folds and the test fold
    spread = {s.label: s for s in res.noise.presets}["aad+h"]
    expected = [
        replay_fitness(config.fitness, simulate(changes[f], "aad+h", groups=groups[f], **kw))
        for f in (*(folds[i] for i in valid_f), trows)
    ]
    assert spread.values.tolist() == expected
    # and without the groups (one group) the pooled preset scores otherwise
    assert flat.test["aad+h"].mean_change_rate != res.test["aad+h"].mean_change_rate


# ----------------------------------------------------------------- bench/selftrain.py


@pytest.mark.slow
@pytest.mark.parametrize("start", ["warm", "cold"])
def test_selftrain_quick_runs_and_ends_with_its_summary(tmp_path, start):
    path = tmp_path / "small.npz"
    np.savez(path, changes=_history(pages=150, cycles=40, seed=10))
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "selftrain.py"), "--quick", "--no-site"]
        + ["--history", str(path), "--jobs", "1", "--fitness", "changerate:0.5,freshness:0.5"]
        + ["--start", start],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = out.stdout.strip().splitlines()
    assert "| learned |" in out.stdout and "| oracle | 1.000 |" in out.stdout
    last = dict(kv.split("=", 1) for kv in lines[-1].removeprefix("summary: ").split())
    assert lines[-1].startswith("summary: ") and last["histories"] == "1"
    assert last["fitness"] == "changerate:0.5,freshness:0.5" and last["start"] == start
    assert 0.0 < float(last["learned_share"]) <= 1.0 + 1e-9
    assert 0.0 < float(last["learned_freshness"]) <= 1.0


def test_top_k_by_index_is_score_then_index_order():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        s = rng.integers(0, 6, n).astype(float)
        s[rng.random(n) < 0.1] = np.nan
        s[rng.random(n) < 0.05] = -np.inf
        k = int(rng.integers(0, n + 3))
        want = np.lexsort((np.arange(n), -np.where(np.isfinite(s), s, -np.inf)))[: min(k, n)]
        assert (top_k_by_index(s, k) == want).all()


# ----------------------------------------------------------------- presets as seeds


def test_preset_expressions_become_trees_that_score_alike(monkeypatch):
    state = simulate(_history(pages=300, seed=11), "age").state
    terms = compute_terminals(state, 40)
    converted = 0
    for name, preset in PRESETS.items():
        if preset.expression is None:
            continue
        tree = gp.tree_of_expression(preset.expression)
        if tree is None or not gp.terminals_used(tree) <= set(terms):
            continue
        converted += 1
        want = Scorer.from_spec(name).score(terms)
        np.testing.assert_allclose(gp.evaluate(tree, terms), want, rtol=1e-12, err_msg=name)
    assert converted >= 13
    assert gp.tree_of_expression("Min(t, 3)") is None  # no Min in the GP's functions
    # a preset added to PRESETS is a seed of the first generation, without a change in learn/
    monkeypatch.setitem(PRESETS, "recent", Preset("recent", "t/(n + 1)", "a test's", "seed"))
    tree = ("*", "t", ("/", 1.0, ("+", "n", 1.0)))
    assert gp.tree_of_expression("t/(n + 1)") == tree
    assert tree in gp.preset_trees(("t", "n")) and tree not in gp.preset_trees(("t",))
