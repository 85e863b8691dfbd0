"""GP4C with and without paper 004's terminals (C1..C3, D1..D3 and Q).

    .venv/bin/python bench/evolve_window.py --population 60 --generations 10 --seeds 2 \\
        --jobs 2 ota_terms_versions scoop_extras fdroid_metadata

For each shared history, ``evolve()`` once with ``--terminals all`` and once
with ``--terminals window`` (``all`` + C1..C3 + D1..D3 + Q; on change matrices
``D_i = max(C_1..C_i)``; Q from the related-page index with the RECRAWL_EXPERTS*
defaults, no host groups), same folds and seeds. Prints the test-fold
ChangeRate and freshness of each winner, and of ``aad+``, ``experts`` and the
oracle. A winner that uses window terminals or Q is replayed on the test fold
with ``simulate_content`` (``simulate`` plus those columns), as ``experts`` is.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_recrawl.content.replay import simulate_content  # noqa: E402
from scrapy_recrawl.core.simulate import load_changes  # noqa: E402
from scrapy_recrawl.learn import gp  # noqa: E402
from scrapy_recrawl.learn.config import EvolveConfig  # noqa: E402
from scrapy_recrawl.learn.evolve import evolve  # noqa: E402
from scrapy_recrawl.learn.search import fold_roles, split_folds  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "changes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("histories", nargs="+", help="names in ../shared/data/changes or .npz paths")
    ap.add_argument("--population", type=int, default=60)
    ap.add_argument("--generations", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cycles", type=int, default=None, help="first cycles of each history")
    ap.add_argument("--seed-presets", action=argparse.BooleanOptionalAction, default=False)
    args = ap.parse_args()
    print(
        "| history | terminals | winner | its C/D/Q | ChangeRate | freshness | aad+ CR | "
        "aad+ fresh | experts CR | oracle CR | wall |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.histories:
        path = Path(name) if name.endswith(".npz") else DATA / f"{name}.npz"
        changes = load_changes(str(path))[:, : args.cycles]
        folds = split_folds(changes.shape[0], 5, args.seed)
        test = changes[folds[fold_roles(5)[2]]]
        experts = simulate_content(test, "experts", seed=args.seed).mean_change_rate
        for terminals in ("all", "window"):
            config = EvolveConfig(
                population=args.population,
                generations=args.generations,
                seeds=args.seeds,
                jobs=args.jobs,
                seed=args.seed,
                terminals=terminals,
                seed_presets=args.seed_presets,
            )
            t0 = time.perf_counter()
            r = evolve(changes, config, progress=False, baselines=("aad+", "oracle"))
            w, a, o = r.test["winner"], r.test["aad+"], r.test["oracle"]
            expr = r.expression if len(r.expression) <= 50 else r.expression[:47] + "..."
            new = sorted(set(gp.terminals_used(r.winner.tree)) - set(gp.TERMINAL_SETS["all"]))
            print(
                f"| {path.stem} | {terminals} | `{expr}` | {' '.join(new) or '-'} | "
                f"{w.mean_change_rate:.4f} | "
                f"{w.mean_freshness:.4f} | {a.mean_change_rate:.4f} | {a.mean_freshness:.4f} | "
                f"{experts:.4f} | {o.mean_change_rate:.4f} | {time.perf_counter() - t0:.0f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
