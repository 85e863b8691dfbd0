"""Plan mode in the simulator's setting, the adaptive planner, and `scrapy recrawl-plan`."""

from __future__ import annotations

import argparse
import io
import re

import numpy as np
import pytest

from .extras import require_extra

require_extra("planning")

from scrapy.exceptions import UsageError  # noqa: E402

from scrapy_recrawl.commands.plan import Command  # noqa: E402
from scrapy_recrawl.core.simulate import simulate  # noqa: E402
from scrapy_recrawl.planning import PlanError, WebFountainPlanner  # noqa: E402
from scrapy_recrawl.planning.replay import replay_plan, simulate_policy  # noqa: E402
from scrapy_recrawl.scoring import Scorer, compute_terminals  # noqa: E402


def poisson_history(pages=300, cycles=40, seed=0):
    """Pages with rates from 1/200 to 1/2 changes per cycle (log-uniform)."""
    rng = np.random.default_rng(seed)
    rate = np.exp(rng.uniform(np.log(1 / 200), np.log(0.5), pages))
    return (rng.random((pages, cycles)) < -np.expm1(-rate)[:, None]).astype(np.uint8), rate


def test_simulate_policy_gives_the_simulators_numbers_for_a_scorer():
    changes, _ = poisson_history()
    scorer = Scorer.from_spec("aad+")

    def select(state, cycle, k):
        terms = compute_terminals(
            state, cycle, None, prior=scorer.prior, needed=scorer.terminals_needed
        )
        return scorer.top_k(terms, k)

    ours = simulate_policy(changes, select, "aad+", warmup=2, k=0.05)
    ref = simulate(changes, "aad+", warmup=2, k=0.05)
    np.testing.assert_allclose(ours.change_rate, ref.change_rate)
    np.testing.assert_allclose(ours.ndcg, ref.ndcg)
    np.testing.assert_allclose(ours.freshness, ref.freshness)


def test_replayed_planner_follows_the_budget_and_beats_random():
    changes, _ = poisson_history()
    res, planner = replay_plan(changes, "strategy1", k=0.1, periods=6, plan_every=6, n_buckets=16)
    assert res.k == 30 and res.change_rate.shape == (38,)
    assert planner.plans_solved == 7 and planner.last_error is None  # cycles 2, 8, ..., 38
    assert planner.plan is not None and planner.plan.success
    rand = simulate(changes, "rand", k=0.1)
    assert res.mean_change_rate > rand.mean_change_rate
    assert res.mean_freshness > rand.mean_freshness
    assert (res.change_rate <= 1.0).all() and (res.freshness <= 1.0).all()


def test_planner_quotas_oldest_first_and_new_pages():
    rng = np.random.default_rng(1)
    n = rng.integers(1, 30, 400)
    cols = {
        "n": n,
        "X": rng.binomial(n, rng.uniform(0, 1, n.size)),
        "last_visit_cycle": rng.integers(0, 30, n.size),
        "first_cycle": np.zeros(n.size, dtype=np.int64),
    }
    cols["last_visit_cycle"][:5] = -1  # never fetched: not a recrawl candidate
    planner = WebFountainPlanner("strategy1", periods=4, plan_every=2, n_buckets=8)
    sel = planner.select(cols, 30, 50, new_waiting=30)
    assert sel.replanned and sel.period == 0
    assert sel.indices.size + sel.new_quota == 50
    assert len(set(sel.indices.tolist())) == sel.indices.size
    assert not np.isin(sel.indices, np.arange(5)).any()
    assert 0 < sel.new_quota <= 30
    assert (np.diff(sel.scores) <= 1e-12).all()  # best (likeliest stale) first
    # inside a bucket, no unpicked URL was visited before a picked one
    from scrapy_recrawl.planning import assign_buckets

    b = assign_buckets(cols, 30, edges=planner.edges).bucket
    known = cols["last_visit_cycle"] >= 0
    for j in np.unique(b[sel.indices]):
        inb = known & (b == j)
        picked = np.zeros(n.size, bool)
        picked[sel.indices] = True
        if (inb & ~picked).any():
            assert (
                cols["last_visit_cycle"][inb & picked].max()
                <= cols["last_visit_cycle"][inb & ~picked].min()
            )
    again = planner.select(cols, 31, 50, new_waiting=0)
    assert not again.replanned and again.period == 1 and again.new_quota == 0
    assert planner.select(cols, 32, 50).replanned


def test_planner_edge_cases():
    with pytest.raises(PlanError, match="unknown strategy"):
        WebFountainPlanner("fastest")
    with pytest.raises(PlanError, match="plan_every"):
        WebFountainPlanner(plan_every=0)
    empty = {"n": np.zeros(3, int), "X": np.zeros(3, int), "last_visit_cycle": np.full(3, -1)}
    sel = WebFountainPlanner().select(empty, 0, 10, new_waiting=4)
    assert sel.indices.size == 0 and sel.new_quota == 4


def run_command(argv):
    cmd = Command()
    from scrapy.settings import Settings

    cmd.settings = Settings()
    parser = argparse.ArgumentParser()
    cmd.add_options(parser)
    opts = parser.parse_args(argv)
    out = io.StringIO()
    cmd.run([], opts, out=out)
    return out.getvalue()


def test_command_prints_the_synthetic_plan():
    assert Command.requires_project is False
    text = run_command(
        ["--synthetic", "--strategy", "strategy2", "--buckets", "6", "--periods", "5"]
        + ["--pages", "6000"]
    )
    assert "strategy strategy2" in text
    assert "| period | crawled old |" in text and "| bucket | pages |" in text
    assert len(re.findall(r"\n\|\s+5 \|", text)) == 2  # period 5 row and bucket 5 row
    both = run_command(
        ["--synthetic", "--buckets", "5", "--periods", "4", "--pages", "5000", "--no-buckets"]
    )
    assert re.search(r"\| strategy\s+\| objective \|", both) and "| bucket |" not in both


def test_command_replays_a_history(tmp_path):
    changes, _ = poisson_history(pages=120, cycles=20)
    path = tmp_path / "toy.npz"
    np.savez(path, changes=changes)
    text = run_command(
        [
            "--history",
            str(path),
            "--strategy",
            "strategy1",
            "--buckets",
            "8",
            "--periods",
            "4",
            "--plan-every",
            "2",
            "--scorers",
            "aad+,oracle",
            "--budget",
            "0.1",
            "--no-buckets",
        ]
    )
    assert re.search(r"\| toy\s+\| plan:strategy1\s+\|", text)
    assert re.search(r"\| toy\s+\| aad\+\s+\|", text)
    assert re.search(r"\| toy\s+\| oracle\s+\|", text)


def test_command_rejects_bad_options():
    with pytest.raises(UsageError, match="strategy"):
        run_command(["--synthetic", "--strategy", "nope"])
    with pytest.raises(UsageError, match="buckets"):
        run_command(["--buckets", "300"])
    with pytest.raises(UsageError, match="choose one"):
        run_command(["--synthetic", "--history", "x.npz"])
    with pytest.raises(UsageError, match="empty"):
        # a budget of 1 page per period is fine; a missing file is not
        run_command(["--history", "/nonexistent/empty.npz"])


def test_planner_state_survives_a_restart():
    changes, _ = poisson_history(pages=200, cycles=12)
    res, planner = replay_plan(changes, "strategy1", k=0.1, periods=6, plan_every=6, n_buckets=8)
    import json

    saved = json.loads(json.dumps(planner.state()))
    again = WebFountainPlanner("strategy1", periods=6, plan_every=6, n_buckets=8)
    again.restore(saved)
    cols = {k: v for k, v in res.state.items()}
    a = planner.select(cols, planner.plan_cycle + 1, 20)
    b = again.select(cols, again.plan_cycle + 1, 20)
    assert not a.replanned and not b.replanned
    np.testing.assert_array_equal(a.indices, b.indices)
    WebFountainPlanner().restore({"plan_cycle": 0, "plan": None})  # nothing to restore: no error


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    """A SQLite history store written through the store API: 60 URLs over 10 cycles,
    from never changing to changing often."""
    from tests.test_evolve import _fill_store, _history

    truth = _history(60, 10, seed=2)
    truth[:, 0] = 0
    path = tmp_path_factory.mktemp("planstore") / "history.sqlite3"
    _fill_store(path, 10, 60, truth)
    return path


def run_on_store(argv, store):
    from scrapy.settings import Settings

    cmd = Command()
    cmd.settings = Settings({"RECRAWL_STORE": str(store), "RECRAWL_BUDGET": 6})
    parser = argparse.ArgumentParser()
    cmd.add_options(parser)
    out = io.StringIO()
    cmd.run([], parser.parse_args(argv), out=out)
    return out.getvalue()


def test_command_plans_from_the_spiders_store_by_default(store_path):
    before = store_path.read_bytes()
    text = run_on_store(["--strategy", "strategy1", "--periods", "3", "--buckets", "4"], store_path)
    head = text.splitlines()[0]
    assert head.startswith(f"sqlite:///{store_path}: cycle 9, 60 live pages fetched before in ")
    assert "budget 6 pages per period, T = 3" in head  # RECRAWL_BUDGET, not the paper's
    assert "strategy strategy1" in text and "| period | crawled old |" in text
    assert "Synthetic" not in text
    # the plan is the one the crawl's planner would solve: same buckets, same quotas
    from scrapy_recrawl.history.sqlite import SqliteHistoryStore
    from scrapy_recrawl.planning.webfountain import current_buckets

    with SqliteHistoryStore(str(store_path), read_only=True) as store:
        arrays = store.arrays()
    _, stats = current_buckets(arrays.columns, arrays.cycle, 4, ~arrays.columns["gone"])
    assert f"in {stats.buckets.size} non-empty buckets of 4" in head
    planner = WebFountainPlanner("strategy1", periods=3, n_buckets=4)
    planner.select(arrays.columns, arrays.cycle, 6)
    rows = re.findall(r"^\|\s+1 \|\s+(\d+) \|", text, re.M)  # period 1: crawled old
    assert rows and int(rows[0]) == round(planner.plan.x[0].sum())
    assert store_path.read_bytes() == before  # read-only


def test_command_synthetic_only_on_request(store_path):
    text = run_on_store(["--synthetic", "--strategy", "strategy1", "--periods", "2",
                         "--buckets", "3", "--pages", "3000", "--no-buckets"], store_path)  # fmt: skip
    assert text.startswith("Synthetic set-up of the paper, scaled to 3000 pages")


def test_command_refuses_a_missing_store_in_one_line(tmp_path):
    from scrapy_recrawl.commands import InputError

    with pytest.raises(InputError, match=r"no history store at .*nothing\.sqlite3"):
        run_on_store([], tmp_path / "nothing.sqlite3")
    assert not (tmp_path / "nothing.sqlite3").exists()


def test_command_replays_a_scorer_of_a_plugin_terminal_and_refuses_an_unknown_one(tmp_path):
    """--scorers knows the project's plug-ins' terminals (`C1` is the content
    plug-in's), as its crawl does; an unknown name is one usage line, no traceback."""
    changes, _ = poisson_history(pages=60, cycles=10)
    path = tmp_path / "toy.npz"
    np.savez(path, changes=changes)
    base = ["--history", str(path), "--buckets", "4", "--periods", "3", "--no-buckets"]
    text = run_command(base + ["--scorers", "C1 + n/t"])
    assert re.search(r"\| toy\s+\| C1 \+ n/t\s+\|", text)
    with pytest.raises(UsageError, match="--scorers 'nosuchterminal'"):
        run_command(base + ["--scorers", "nosuchterminal"])
