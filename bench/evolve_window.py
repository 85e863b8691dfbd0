"""GP4C with and without paper 004's window terminals (C1..C3, D1..D3).

    .venv/bin/python bench/evolve_window.py --population 60 --generations 10 --seeds 2 \\
        --jobs 2 ota_terms_versions scoop_extras fdroid_metadata

For each shared history, ``evolve()`` once with ``--terminals all`` and once
with ``--terminals window`` (``all`` + C1..C3 + D1..D3; on change matrices
``D_i = max(C_1..C_i)``), same folds and seeds. Prints the test-fold
ChangeRate and freshness of each winner, and of ``aad+`` and the oracle.
The winner that uses window terminals is replayed on the test fold with
``simulate_content`` (``simulate`` plus the window columns).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.learn.evolve import EvolveConfig, evolve  # noqa: E402
from scrapy_recrawl.learn.simulate import load_changes  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("histories", nargs="+", help="names in ../shared/data/changes or .npz paths")
    ap.add_argument("--population", type=int, default=60)
    ap.add_argument("--generations", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(
        "| history | terminals | winner | ChangeRate | freshness | aad+ CR | aad+ fresh | oracle CR |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for name in args.histories:
        path = Path(name) if name.endswith(".npz") else DATA / f"{name}.npz"
        changes = load_changes(str(path))
        for terminals in ("all", "window"):
            config = EvolveConfig(
                population=args.population,
                generations=args.generations,
                seeds=args.seeds,
                jobs=args.jobs,
                seed=args.seed,
                terminals=terminals,
            )
            r = evolve(changes, config, progress=False, baselines=("aad+", "oracle"))
            w, a, o = r.test["winner"], r.test["aad+"], r.test["oracle"]
            expr = r.expression if len(r.expression) <= 50 else r.expression[:47] + "..."
            print(
                f"| {path.stem} | {terminals} | `{expr}` | {w.mean_change_rate:.4f} | "
                f"{w.mean_freshness:.4f} | {a.mean_change_rate:.4f} | {a.mean_freshness:.4f} | "
                f"{o.mean_change_rate:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
