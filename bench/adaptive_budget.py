"""What RECRAWL_ADAPTIVE_BUDGET saves and what it gives up, replayed.

    .venv/bin/python bench/adaptive_budget.py

For each history -- the shared ones in ``../shared/data/changes/*.npz`` and a
synthetic quiet site (2,000 pages over 120 days, each page's daily change chance
drawn from Beta(0.2, 100), seed 1) -- ``aad+`` is replayed as GP4C does (warm-up
W=2, then k = 5% of the pages a day: scrapy_recrawl.core.simulate) without the cut
and with each threshold. Each cell is ``pages spent / changes found``, both as a
share of the uncut replay's (docs/cycles.md, "The adaptive budget").
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.simulate import load_changes, simulate  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
THRESHOLDS = (0.5, 1.0, 2.0, 5.0)
SYNTHETIC = "synthetic Beta(0.2, 100)"


def quiet_site() -> np.ndarray:
    rng = np.random.default_rng(1)
    chance = rng.beta(0.2, 100, 2000)
    return (rng.random((2000, 120)) < chance[:, None]).astype(np.uint8)


def _run(source: str) -> tuple[str, list[tuple[float, float]]]:
    changes = quiet_site() if source == SYNTHETIC else load_changes(source)
    full = simulate(changes, "aad+", k="5%")
    cells = []
    for threshold in THRESHOLDS:
        cut = simulate(changes, "aad+", k="5%", adaptive_budget=threshold)
        spent = cut.fetched.sum() / full.fetched.sum()
        found = cut.changed_fetched.sum() / max(1, full.changed_fetched.sum())
        cells.append((float(spent), float(found)))
    return (source if source == SYNTHETIC else Path(source).stem), cells


def main() -> None:
    sources = [str(f) for f in sorted(DATA.glob("*.npz"))] + [SYNTHETIC]
    with ProcessPoolExecutor(2) as ex:
        rows = list(ex.map(_run, sources))
    print("aad+, W=2, k=5% a day; pages spent / changes found, as shares of the uncut replay's")
    print()
    print("| history | " + " | ".join(f"threshold {t:g}" for t in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for name, cells in rows:
        print(f"| {name} | " + " | ".join(f"{s:.3f} / {f:.3f}" for s, f in cells) + " |")


if __name__ == "__main__":
    main()
