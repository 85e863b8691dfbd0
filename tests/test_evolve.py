"""GP4C's process: the batched replay equals simulate(), determinism, selection, histories."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from scrapy_recrawl.core.simulate import simulate
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.learn import gp, histories
from scrapy_recrawl.learn.config import EvolveConfig
from scrapy_recrawl.learn.evolve import evolve
from scrapy_recrawl.learn.fitness import IndexTieScorer, TreeScorer, top_k_by_class, top_k_by_index
from scrapy_recrawl.learn.population import PopulationReplay
from scrapy_recrawl.learn.report import save_json
from scrapy_recrawl.learn.search import Candidate, select_final
from scrapy_recrawl.scoring import Scorer


def _history(pages: int = 240, cycles: int = 24, seed: int = 0) -> np.ndarray:
    """Pages with per-page change rates from never to often (like the shared data, denser)."""
    rng = np.random.default_rng(seed)
    rate = np.where(rng.random(pages) < 0.4, 0.0, rng.beta(0.6, 3.0, pages))
    return (rng.random((pages, cycles)) < rate[:, None]).astype(np.uint8)


SMALL = dict(population=16, generations=3, seeds=2, keep_best=8, folds=5)


def test_batched_replay_equals_simulate_exactly():
    changes = _history()
    trees = gp.ramped_half_and_half(random.Random(5), 40, gp.TERMINAL_SETS["all"])
    trees += [("*", "t", "X"), "t", ("-", 1.0, ("exp", ("*", ("-", 0.0, "AADp"), "t")))]
    for k in (0.05, 7, 0.5):
        fit = PopulationReplay(changes, k=k, warmup=2).evaluate(trees)
        for i, tree in enumerate(trees):
            r = simulate(changes, IndexTieScorer(TreeScorer(tree)), warmup=2, k=k)
            assert r.mean_change_rate == fit.change_rate[i], gp.to_expression(tree)
            assert r.mean_ndcg == fit.ndcg[i], gp.to_expression(tree)
            assert r.mean_freshness == fit.freshness[i], gp.to_expression(tree)


def test_batched_replay_survives_compaction():
    changes = _history(pages=400, cycles=40, seed=3)
    trees = gp.ramped_half_and_half(random.Random(2), 30, gp.TERMINAL_SETS["all"])
    replay = PopulationReplay(changes, k=0.1)
    replay.compact_above = 16  # compact (drop dead classes, merge equal ones) every few cycles
    fit = replay.evaluate(trees)
    assert replay.compactions > 3
    for i in (0, 7, 29):
        r = simulate(changes, IndexTieScorer(TreeScorer(trees[i])), k=0.1)
        assert r.mean_ndcg == fit.ndcg[i]


def test_batched_replay_with_window_equals_simulate_content_exactly():
    """The window terminals (paper 004) as class columns: simulate_content's numbers."""
    from scrapy_recrawl.content.replay import simulate_content

    changes = _history(pages=300, cycles=30, seed=4)
    rng = random.Random(11)
    trees = gp.ramped_half_and_half(rng, 40, gp.TERMINAL_SETS["window"])
    trees += [
        "C1",
        ("+", "C2", ("*", "D3", "t")),
        ("*", ("-", 1.0, ("exp", ("*", ("-", 0.0, "AADp"), "t"))), ("+", 1.0, "D2")),
        ("+", "C4", "t"),  # beyond a window of 3: NaN, ranks last
        ("*", "t", "X"),  # no window terminal in a window replay
    ]
    for window, k in ((3, 0.05), (3, 17), (5, 0.1), (1, 0.1)):
        replay = PopulationReplay(changes, k=k, warmup=2, window=window)
        replay.compact_above = 64  # compaction must keep (and merge on) the window columns
        fit = replay.evaluate(trees)
        for i, tree in enumerate(trees):
            scorer = IndexTieScorer(TreeScorer(tree))
            r = simulate_content(changes, scorer, warmup=2, k=k, window=window)
            assert r.mean_change_rate == fit.change_rate[i], (window, gp.to_expression(tree))
            assert r.mean_ndcg == fit.ndcg[i], (window, gp.to_expression(tree))
            assert r.mean_freshness == fit.freshness[i], (window, gp.to_expression(tree))
    assert replay.compactions > 0


def test_window_terminals_need_a_window():
    changes = _history(pages=60, cycles=10)
    with pytest.raises(ValueError, match="window="):
        PopulationReplay(changes).evaluate([("+", "C1", "t")])
    with pytest.raises(ValueError, match="related-page parameter"):
        PopulationReplay(changes, related={"k": 3})
    assert gp.window_of(["t", "X"]) == 0
    assert gp.window_of(["C1", "t"]) == 3 and gp.window_of(["D5"]) == 5


def _q_trees(seed: int, count: int) -> list:
    rng = random.Random(seed)
    trees = gp.ramped_half_and_half(rng, count, gp.TERMINAL_SETS["window"])
    trees += gp.ramped_half_and_half(rng, count // 2, ("Q", "t", "X", "AADp", "C1"), max_depth=4)
    return trees + [
        "Q",
        ("*", "Q", "t"),
        ("+", ("*", "Q", "t"), ("*", "AADp", "t")),
        gp.PRESET_TREES["experts"],
        ("+", "C1", ("*", "Q", 10.0)),  # Q and the window together
        ("*", "t", "X"),  # no Q in a Q batch: the class-level path
        ("-", 1.0, ("exp", ("-", 0.0, ("*", "AADp", "t")))),
    ]


def test_batched_replay_with_q_equals_simulate_content_exactly():
    """Q (paper 004's related pages) per group: simulate_content's numbers, split groups too."""
    from scrapy_recrawl.content.replay import simulate_content

    changes = _history(pages=160, cycles=36, seed=6)
    trees = _q_trees(13, 40)
    assert sum("Q" in gp.terminals_used(t) for t in trees) >= 10
    groups = np.arange(160) % 3  # "hosts": the candidate blocks follow them
    for k, related in (
        (0.05, {}),
        (9, {"experts": 4, "max_lag": 2, "refresh_every": 3, "history": 12}),
        (0.1, {"experts": 6, "max_candidates": 20, "groups": groups, "refresh_every": 5}),
    ):
        replay = PopulationReplay(changes, k=k, warmup=2, window=3, related=related)
        replay.compact_above = 64
        fit = replay.evaluate(trees)
        for i, tree in enumerate(trees):
            scorer = IndexTieScorer(TreeScorer(tree))
            r = simulate_content(changes, scorer, warmup=2, k=k, window=3, **related)
            label = (k, gp.to_expression(tree))
            assert r.mean_change_rate == fit.change_rate[i], label
            assert r.mean_ndcg == fit.ndcg[i], label
            assert r.mean_freshness == fit.freshness[i], label
    # the Q individuals did not all fetch alike: their groups split and copied the Q state
    assert replay.q_copies > 0


def test_q_replay_leaves_the_other_trees_alone():
    """A batch with Q trees gives the others the numbers of a batch without them."""
    changes = _history(pages=200, cycles=30, seed=8)
    trees = _q_trees(3, 30)
    plain = [t for t in trees if "Q" not in gp.terminals_used(t)]
    with_q = PopulationReplay(changes, k=0.05, window=3).evaluate(trees)
    without = PopulationReplay(changes, k=0.05, window=3).evaluate(plain)
    rows = [i for i, t in enumerate(trees) if "Q" not in gp.terminals_used(t)]
    assert (with_q.change_rate[rows] == without.change_rate).all()
    assert (with_q.ndcg[rows] == without.ndcg).all()


def test_short_evolve_with_q_and_its_json(tmp_path):
    changes = _history(pages=200, cycles=24, seed=2)
    config = EvolveConfig(**SMALL, terminals="t,X,AADp,Q", related={"experts": 5})
    result = evolve(changes, config, progress=False, baselines=("aad+", "oracle"))
    assert "Q" in result.terminals
    # the presets over these terminals started every seed: experts and aad+ among them
    assert gp.PRESET_TREES["experts"] in gp.preset_trees(result.terminals)
    out = tmp_path / "q.json"
    save_json(result, str(out))
    data = json.loads(out.read_text())
    assert data["related"]["RECRAWL_EXPERTS"] == 5 and data["window"] == 0
    # what the returned expression uses (the learned one's, or the guard's preset's)
    assert data["terminals_used"] == sorted(Scorer.from_spec(result.expression).terminals_needed)
    assert np.isfinite(result.test["winner"].mean_change_rate)


def test_short_evolve_with_window_terminals():
    changes = _history(pages=200, cycles=20, seed=2)
    config = EvolveConfig(**SMALL, terminals="window")
    result = evolve(changes, config, progress=False, baselines=("aad+",))
    assert set(gp.WINDOW_TERMINALS) <= set(result.terminals)
    assert np.isfinite(result.test["winner"].mean_change_rate)


def test_top_k_by_class_is_top_k_by_index():
    rng = np.random.default_rng(0)
    for _ in range(50):
        classes = rng.integers(1, 30)
        cs = rng.integers(0, 5, classes).astype(float)
        cs[rng.random(classes) < 0.1] = np.nan
        pc = rng.integers(0, classes, 200)
        k = int(rng.integers(1, 220))
        assert (top_k_by_class(cs, pc, k) == top_k_by_index(cs[pc], k)).all()


def test_short_evolve_is_deterministic_for_a_seed():
    changes = _history()
    a = evolve(changes, EvolveConfig(**SMALL, seed=7), progress=False)
    b = evolve(changes, EvolveConfig(**SMALL, seed=7), progress=False)
    assert a.expression == b.expression
    assert [c.expression for c in a.candidates] == [c.expression for c in b.candidates]
    assert a.rows() == b.rows()
    c = evolve(changes, EvolveConfig(**SMALL, seed=7, jobs=2), progress=False)
    assert c.expression == a.expression and c.rows() == a.rows()


def test_evolve_report_and_json_scorer(tmp_path):
    changes = _history()
    res = evolve(changes, EvolveConfig(**SMALL, fitness="ndcg", selection="sum"), progress=False)
    labels = [r[0] for r in res.rows()]
    assert labels[0] == "winner" and labels[-1] == "oracle"
    assert {"rand", "age", "cg", "nad", "sad", "aad", "gad", "gp4c", "aad+"} <= set(labels)
    assert re.search(r"\| winner\s+\|", res.table())
    out = tmp_path / "w.json"
    save_json(res, str(out))
    data = json.loads(out.read_text())
    assert data["expression"] == res.expression
    assert data["parameters"]["population"] == 16 and data["fitness"] == "ndcg"
    scorer = Scorer.from_spec(str(out))  # RECRAWL_SCORER = "FILE.json"
    r = simulate(changes[:50], scorer)
    assert 0.0 <= r.mean_change_rate <= 1.0


def test_final_selection_methods():
    cands = [
        Candidate(("+", "t", "X"), train=0.50, seed=0, generation=0, validation=0.40),
        Candidate(("*", "t", "X"), train=0.42, seed=0, generation=0, validation=0.41),
        Candidate(("-", "t", "n"), train=0.30, seed=0, generation=0, validation=0.30),
        Candidate(1.0, train=0.99, seed=0, generation=0, validation=0.99),  # a constant
    ]
    assert select_final(cands, "best").expression == "t * X"
    # Sum-sigma: 0.9 - 0.05 = 0.85 beats 0.83 - 0.005
    assert select_final(cands, "sum").expression == "t + X"
    assert select_final(cands, "avg").expression == "t * X"  # 0.45 - 0.05 < 0.415 - 0.005


def test_one_standard_error_selection_prefers_the_simplest_close_candidate():
    rng = np.random.default_rng(0)
    base = rng.random(200)
    big = ("+", ("*", "t", "X"), ("log", ("+", "n", "AADp")))
    cands = [
        # the best validation, by a hair over a much smaller tree: noise
        Candidate(big, train=0.6, seed=0, generation=3, validation=0.501),
        Candidate(("*", "t", "X"), train=0.5, seed=0, generation=1, validation=0.500),
        Candidate("t", train=0.4, seed=0, generation=0, validation=0.300),  # clearly worse
    ]
    cands[0].validation_cycles = base + 0.001
    noise = rng.normal(0, 0.05, 200)
    cands[1].validation_cycles = base + noise - noise.mean()  # 0.001 below, se ~0.0035
    cands[2].validation_cycles = base - 0.2
    assert select_final(cands, "best").tree == big
    assert select_final(cands, "1se").expression == "t * X"
    cands[1].validation_cycles = base - 0.05  # now clearly worse than the best
    assert select_final(cands, "1se").tree == big
    for c in cands:
        c.validation_cycles = None  # without per-cycle values: best
    assert select_final(cands, "1se").tree == big


def test_seeded_presets_stay_candidates():
    changes = _history()
    config = EvolveConfig(**SMALL, terminals="t,X,AADp,NADp", seed_presets=True)
    res = evolve(changes, config, progress=False, baselines=("aad+", "oracle"))
    trees = {c.tree for c in res.candidates}
    assert set(gp.preset_trees(res.terminals)) <= trees
    assert all(c.validation_cycles is not None for c in res.candidates)
    off = evolve(
        changes, EvolveConfig(**SMALL, seed_presets=False), progress=False, baselines=("oracle",)
    )
    assert not set(gp.PRESET_TREES.values()) & {c.tree for c in off.candidates if c.generation == 0}


def test_config_errors_name_the_option():
    for kw, opt in [
        ({"population": 1}, "--population"),
        ({"tournament": 500}, "--tournament"),
        ({"crossover_depth": 12}, "--crossover-depth"),
        ({"folds": 2}, "--folds"),
        ({"fitness": "speed"}, "--fitness"),
        ({"selection": "top"}, "--selection"),
        ({"budget": 2.5}, "--budget"),
    ]:
        with pytest.raises(ValueError, match=opt):
            EvolveConfig(**kw).check()
    with pytest.raises(ValueError, match="--warmup"):
        EvolveConfig(warmup=24).check(cycles=24)


# --------------------------------------------------------------------------- histories


def test_history_files(tmp_path):
    changes = _history(20, 6)
    np.savez(tmp_path / "h.npz", changes=changes)
    assert (histories.load(str(tmp_path / "h.npz")).changes == changes).all()
    np.savez(tmp_path / "bad.npz", other=changes)
    with pytest.raises(histories.HistoryError, match="no array 'changes'.*other"):
        histories.load(str(tmp_path / "bad.npz"))
    with pytest.raises(histories.HistoryError, match="no such file"):
        histories.load(str(tmp_path / "missing.npz"))
    with pytest.raises(histories.HistoryError, match="is a directory"):
        histories.load(str(tmp_path))
    (tmp_path / "h.txt").write_text("x")
    with pytest.raises(histories.HistoryError, match="unknown file type"):
        histories.load(str(tmp_path / "h.txt"))
    rows = ["url,cycle,changed"]
    rows += [f"http://a/{p},{c},{int(changes[p, c])}" for p in range(20) for c in range(6)]
    rows += ["http://partial/,0,0", "http://partial/,2,1"]
    (tmp_path / "h.csv").write_text("\n".join(rows) + "\n")
    h = histories.load(str(tmp_path / "h.csv"))
    assert h.changes.shape == (20, 6) and "1 of 21 URLs left out" in h.note
    order = np.argsort([f"http://a/{p}" for p in range(20)])
    assert (h.changes == changes[order]).all()
    (tmp_path / "x.csv").write_text("http://a/,0,2\n")
    with pytest.raises(histories.HistoryError, match="changed must be 0 or 1"):
        histories.load(str(tmp_path / "x.csv"))


def _fill_store(path, cycles: int, urls: int, truth: np.ndarray) -> None:
    with SqliteHistoryStore(str(path)) as store:
        for c in range(cycles):
            if c:
                store.advance_cycle()
            for u in range(urls):
                store.record(
                    Visit(
                        fingerprint=f"fp{u}".encode(),
                        url=f"http://site/{u}",
                        time=1000.0 + c,
                        status=200,
                        changed=None if c == 0 else bool(truth[u, c]),
                    )
                )


def test_store_histories_come_from_the_monitoring_sample(tmp_path):
    truth = _history(30, 8, seed=2)
    truth[:, 0] = 0
    path = tmp_path / "h.sqlite3"
    _fill_store(path, 8, 30, truth)
    with SqliteHistoryStore(str(path)) as store:
        with pytest.raises(histories.HistoryError, match="RECRAWL_MONITOR_SHARE"):
            histories.from_store(store, monitor_share=0.0, seed=0)
        h = histories.from_store(store, monitor_share=1.0, seed=0)
        assert h.changes.shape == (30, 8)
        assert (h.changes == truth).all()
        part = histories.from_store(store, monitor_share=0.3, seed=0)
        assert 0 < part.pages < 30 and "monitoring sample" in part.note


def test_store_histories_follow_the_sample_each_cycle_recorded(tmp_path):
    """The crawl records the sample's rule in each cycle's plan: the rows are the URLs
    in the sample while observed, whatever share and seed the caller passes; a plan
    without a recorded rule (an older crawl) leaves the caller's share and seed."""
    from scrapy_recrawl.core.selection import monitor_mask
    from scrapy_recrawl.history.cycle_log import CyclePlan, monitor_samples, save_plan

    truth = _history(60, 8, seed=2)
    truth[:, 0] = 0
    path = tmp_path / "h.sqlite3"
    _fill_store(path, 8, 60, truth)
    with SqliteHistoryStore(str(path)) as store:
        save_plan(store, CyclePlan(1, 0.0, 0, "age", 60, None, 0))  # no rule: an old crawl
        assert monitor_samples(store) == {}
        assert histories.from_store(store, monitor_share=1.0, seed=0).pages == 60
        for c in range(8):  # the store's cycles 0..7: seed 1 for 0..4, then seed 2
            rule = dict(monitor_share=0.5, monitor_seed=1 if c <= 4 else 2)
            save_plan(store, CyclePlan(c, 0.0, 5, "age", 60, None, 0, **rule))
        ids = store.arrays().ids
        urls = dict(zip(ids.tolist(), store.urls(ids), strict=True))
        first = {urls[i] for i in ids[monitor_mask(ids, 0.5, 1)].tolist()}
        second = {urls[i] for i in ids[monitor_mask(ids, 0.5, 2)].tolist()}
        h = histories.from_store(store, monitor_share=0.0, seed=0)  # the settings: no sample
        assert not h.info and h.pages and set(h.names) <= second
        assert "RECRAWL_SEED=1 in cycles 0..4; " in h.note and "SEED=2 in cycles 5..7" in h.note
        window = int(h.note.rsplit("cycles ", 1)[1].split("..")[0])
        if window <= 4:  # a window reaching into seed 1's cycles: in both samples
            assert set(h.names) <= first & second
        rows = {u: r for r, u in enumerate(h.names)}
        for u in h.names:  # the recorded changes, cycle for cycle
            assert (h.changes[rows[u], 1:] == truth[int(u.rsplit("/", 1)[1]), window + 1 :]).all()
        for c in range(8):  # plan mode (or a share of 0) in every cycle: no sample
            save_plan(store, CyclePlan(c, 0.0, 5, "age", 60, None, 0, 0, 0, 0, 0.0, 0))
        with pytest.raises(histories.HistoryError, match="had no monitoring sample"):
            histories.from_store(store, monitor_share=1.0, seed=0)
