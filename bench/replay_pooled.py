"""The pooled priors (scoring/pooled.py) against the global prior on the shared histories.

    .venv/bin/python bench/replay_pooled.py

Each history of ``../shared/data/changes/*.npz`` is cut in two halves of its days
("fit": days 0..D/2, "check": the rest) and each half replayed as GP4C does (warm-up
W=2, then k = 5% of the pages per day: scrapy_recrawl.core.simulate) with ``aad+``,
``nad+`` (the global prior RECRAWL_PRIOR) and ``aad+h``, ``nad+h`` (each page's group,
its directory: core/groups.py), and the oracle. Prints ChangeRate as a share of the
oracle's and freshness per history and half, then the means over the histories.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.core.simulate import load_changes, load_groups, simulate  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"
POLICIES = ("aad+", "aad+h", "nad+", "nad+h")


def _run(args: tuple[str, int]) -> tuple[str, int, int, dict[str, tuple[float, float]]]:
    path, half = args
    changes = load_changes(path)
    groups = load_groups(path)
    mid = changes.shape[1] // 2
    part = changes[:, :mid] if half == 0 else changes[:, mid:]
    oracle = simulate(part, "oracle").mean_change_rate
    out = {}
    for p in POLICIES:
        r = simulate(part, p, groups=groups)
        out[p] = (r.mean_change_rate / oracle, r.mean_freshness)
    return Path(path).stem, half, int(groups.max()) + 1, out


def main() -> None:
    files = sorted(DATA.glob("*.npz"))
    if not files:
        sys.exit(f"no histories in {DATA}")
    tasks = [(str(f), half) for f in files for half in (0, 1)]
    with ProcessPoolExecutor(2) as ex:
        rows = list(ex.map(_run, tasks))
    print("W=2, k=5% of pages per day, RECRAWL_PRIOR default; CR/o = ChangeRate / oracle's")
    print()
    head = " | ".join(f"{p} CR/o | {p} fresh" for p in POLICIES)
    print(f"| history | half | groups | {head} |")
    print("|---|---|---:|" + "---:|" * (2 * len(POLICIES)))
    for name, half, groups, out in rows:
        cells = " | ".join(f"{out[p][0]:.3f} | {out[p][1]:.3f}" for p in POLICIES)
        print(f"| {name} | {('fit', 'check')[half]} | {groups} | {cells} |")
    print()
    print("Mean over the histories:")
    print()
    print("| scorer | fit CR/o | check CR/o | fit freshness | check freshness |")
    print("|---|---:|---:|---:|---:|")
    for p in POLICIES:
        vals = [[r[3][p] for r in rows if r[1] == half] for half in (0, 1)]
        cr = [np.mean([v[0] for v in vals[h]]) for h in (0, 1)]
        fr = [np.mean([v[1] for v in vals[h]]) for h in (0, 1)]
        print(f"| {p} | {cr[0]:.3f} | {cr[1]:.3f} | {fr[0]:.3f} | {fr[1]:.3f} |")


if __name__ == "__main__":
    main()
