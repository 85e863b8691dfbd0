"""bench/rate_estimators.py: its per-URL state follows the replay's fetches exactly,
and the bench runs on one history."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import rate_estimators as bench  # noqa: E402

from scrapy_recrawl.core.simulate import simulate  # noqa: E402


def _changes(pages: int = 80, days: int = 40, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.01, 0.4, pages)[:, None]
    return (rng.random((pages, days)) < rates).astype(np.uint8)


def _replay_followed(changes: np.ndarray, T: float):
    """An age-ordered replay whose every cycle's state a DecayedRate(T) follows; returns
    the tracker (having seen the end state too), the pages' fetch cycles, the result."""
    seen = bench.DecayedRate(T)
    visits: list[list[int]] = [[0, 1] for _ in range(changes.shape[0])]  # the warm-up

    def oldest_first(state, cycle: int, k: int) -> np.ndarray:
        seen.follow(state)
        idx = np.lexsort((np.arange(changes.shape[0]), state["last_visit_cycle"]))[:k]
        for i in idx:
            visits[i].append(cycle)
        return idx

    result = simulate(changes, oldest_first, k=8)
    seen.follow(result.state)
    return seen, visits, result


def test_undecayed_rate_is_changes_over_days_observed():
    """With no decay, the folded sums are the store's X and the span from the first to
    the last visit: the per-URL state follows the replay's fetches exactly."""
    seen, _, result = _replay_followed(_changes(), np.inf)
    span = result.state["last_visit_cycle"] - result.state["first_cycle"]
    np.testing.assert_array_equal(seen.changes, result.state["X"])
    np.testing.assert_array_equal(seen.exposure, span)


def test_decayed_rate_weighs_each_observation_by_its_age():
    """Against each page's visits worked out one by one: an observation at visit v,
    ``gap`` days after the one before, counts ``exp(-(last - v)/T)``."""
    changes, T = _changes(seed=5), 7.0
    seen, visits, _ = _replay_followed(changes, T)
    for page, cycles in enumerate(visits):
        last = cycles[-1]
        hits = gaps = 0.0
        for prev, v in itertools.pairwise(cycles):
            weight = np.exp(-(last - v) / T)
            hits += weight * float(changes[page, prev + 1 : v + 1].any())
            gaps += weight * (v - prev)
        assert seen.changes[page] == pytest.approx(hits)
        assert seen.exposure[page] == pytest.approx(gaps)


def test_previous_change_follows_the_last_change_cycle():
    seen = bench.PreviousChange()
    for last in ([-1, 3, 5], [2, 3, 7], [2, 9, 8]):
        seen.follow({"last_change_cycle": np.array(last)})
    assert seen.previous.tolist() == [-1, 3, 7]


def test_the_bench_runs_on_one_history(tmp_path):
    path = tmp_path / "h.npz"
    changes = _changes(pages=120, days=60)
    np.savez(path, changes=changes, pages=np.array([f"d{i % 3}/p{i}" for i in range(120)]))
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rate_estimators.py"), "--jobs", "1"]
        + ["--history", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    last = out.stdout.strip().splitlines()[-1]
    fields = dict(kv.split("=", 1) for kv in last.removeprefix("summary: ").split())
    assert last.startswith("summary: ") and fields["histories"] == "1"
    for name in ("aad+", "burst", "decayed+burst", "interval", "true_rate"):
        assert 0.0 < float(fields[name]) <= 1.5
