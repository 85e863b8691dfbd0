"""What the add-on costs every run before the first request: its import time over
Scrapy's own, in one run.

    .venv/bin/python bench/import_cost.py [--repeat 5]

Each variant runs in a fresh interpreter, alternating, ``--repeat`` times:

* baseline: ``import scrapy`` (what every Scrapy run pays);
* add-on: ``import scrapy`` plus the add-on, the scheduler and the middleware, and the
  default scorer built (the preset ``aad+``, as the scheduler builds it);
* commands: ``import scrapy`` plus the five ``scrapy recrawl-*`` command modules
  (Scrapy loads every ``scrapy.commands`` entry point for any ``scrapy`` command).

Prints each variant's median wall time, its cost over the baseline, and whether sympy
was loaded. The interpreters run with Python's bytecode cache on, as an installed
package has it (pip writes each module's ``.pyc`` when it installs): with
``PYTHONDONTWRITEBYTECODE`` set, as in some shells and containers, every one of the
add-on's ~90 modules would be compiled from source on every run (about 0.1 s more,
which Scrapy, installed with its ``.pyc``, never pays), so the bench drops it for its
interpreters and the warm-up run writes the cache. Target (issue 32): the add-on's cost over Scrapy alone at most 0.25 s
(median of 5); numpy, a dependency, is about 0.07 s of it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

VARIANTS = {
    "baseline": "import scrapy",
    "add-on": (
        "import scrapy\n"
        "import scrapy_recrawl.addon, scrapy_recrawl.scheduler, scrapy_recrawl.middleware\n"
        "from scrapy.settings import Settings\n"
        "from scrapy_recrawl.plugin_terminals import scorer_from_settings\n"
        "scorer_from_settings(Settings())\n"
    ),
    "commands": (
        "import scrapy\n"
        "import scrapy_recrawl.commands.baskets, scrapy_recrawl.commands.evolve\n"
        "import scrapy_recrawl.commands.plan, scrapy_recrawl.commands.report\n"
        "import scrapy_recrawl.commands.reset\n"
    ),
}
TAIL = "\nimport sys\nprint('sympy' in sys.modules)\n"


def run_once(code: str) -> tuple[float, bool]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as installed (module docstring)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code + TAIL], capture_output=True, text=True, env=env, check=True
    )
    return time.perf_counter() - start, out.stdout.strip() == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    sympy: dict[str, bool] = {}
    for code in VARIANTS.values():
        run_once(code)  # warm the file cache once, and write the bytecode cache
    for _ in range(args.repeat):
        for name, code in VARIANTS.items():  # alternating: the machine's noise is shared
            elapsed, loaded = run_once(code)
            times[name].append(elapsed)
            sympy[name] = loaded
    base = statistics.median(times["baseline"])
    print(f"median of {args.repeat} fresh interpreters, {sys.executable}\n")
    print("| variant | median s | over Scrapy alone, s | sympy loaded |")
    print("|---|---:|---:|---|")
    for name in VARIANTS:
        med = statistics.median(times[name])
        over = "" if name == "baseline" else f"{med - base:.3f}"
        print(f"| {name} | {med:.3f} | {over} | {'yes' if sympy[name] else 'no'} |")
    cost = statistics.median(times["add-on"]) - base
    verdict = "met" if cost <= 0.25 else "NOT met"
    print(
        f"\nthe add-on's import cost over Scrapy alone: {cost:.3f} s (target <= 0.25 s: {verdict})"
    )


if __name__ == "__main__":
    main()
