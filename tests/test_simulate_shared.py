"""Replays on the real change histories in ../shared/data/changes (skipped where absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.core.simulate import load_changes, simulate
from scrapy_recrawl.scoring import PAPER_PRESETS, RECOMMENDED_SCORER, SMOOTHED_PRESETS

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "changes"
FILES = sorted(SHARED.glob("*.npz")) if SHARED.is_dir() else []

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(not FILES, reason=f"shared change histories not found at {SHARED}"),
]


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for f in FILES:
        c = load_changes(str(f))
        for p in ("oracle", "age", "rand", "gp4c", RECOMMENDED_SCORER):
            out[(f.stem, p)] = simulate(c, p).mean_change_rate
    return out


def test_recommended_scorer_beats_age_and_rand_on_average(results):
    def share(p: str) -> float:
        return float(np.mean([results[(f.stem, p)] / results[(f.stem, "oracle")] for f in FILES]))

    assert share(RECOMMENDED_SCORER) > share("age") > share("rand")
    for f in FILES:  # and rand on every dataset
        assert results[(f.stem, RECOMMENDED_SCORER)] > results[(f.stem, "rand")], f.stem


def test_paper_exact_gp4c_is_worse_than_random_on_sparse_histories(results):
    sparse = [f.stem for f in FILES if f.stem != "ota_raw_snapshots"]
    for d in sparse:
        assert results[(d, "gp4c")] < results[(d, "rand")], d


def test_oracle_bounds_every_preset_on_the_smallest_dataset():
    f = min(FILES, key=lambda p: p.stat().st_size)
    c = load_changes(str(f))
    oracle = simulate(c, "oracle")
    for p in (*PAPER_PRESETS, *SMOOTHED_PRESETS):
        assert simulate(c, p).mean_change_rate <= oracle.mean_change_rate + 1e-12, p
