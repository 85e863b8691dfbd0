"""What a GP4C run reports: the result, its table, its JSON file, its plot, its progress."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scrapy_recrawl.core.simulate import (
    ORACLE,
    ReplayResult,
)
from scrapy_recrawl.learn import gp
from scrapy_recrawl.scoring import PRESETS as _PRESETS

from .config import EvolveConfig, related_parameters
from .search import Candidate


@dataclass
class EvolveResult:
    """What ``recrawl-evolve`` prints and saves."""

    winner: Candidate
    candidates: list[Candidate]
    test: dict[str, ReplayResult]
    config: EvolveConfig
    terminals: tuple[str, ...]
    pages: dict[str, int]
    seconds: float
    stats: dict[str, float] = field(default_factory=dict)
    source: str = ""

    @property
    def expression(self) -> str:
        return self.winner.expression

    def rows(self) -> list[tuple[str, str, float, float, float, float]]:
        """(label, expression, ChangeRate, NDCG, freshness, ChangeRate/oracle) on the test fold."""
        orc = self.test[ORACLE].mean_change_rate
        out = []
        for label, r in self.test.items():
            expr = "(clairvoyant)" if label == ORACLE else r.policy
            if label == "winner":
                expr = self.expression
            elif label in _PRESET_TEXT:
                expr = _PRESET_TEXT[label]
            share = r.mean_change_rate / orc if orc > 0 else float("nan")
            out.append((label, expr, r.mean_change_rate, r.mean_ndcg, r.mean_freshness, share))
        return out

    def table(self) -> str:
        lines = [
            f"test fold: {self.pages['test']} pages x {self.test['winner'].change_rate.size} "
            f"budgeted cycles, k = {self.test['winner'].k} per cycle",
            "",
            "| scorer | expression | ChangeRate | NDCG | freshness | ChangeRate / oracle |",
            "|---|---|---:|---:|---:|---:|",
        ]
        undefined = False
        for label, expr, cr, nd, fr, share in self.rows():
            if len(expr) > 60:
                expr = expr[:57] + "..."
            ratio = f"{share:.3f}" if share == share else "n/a"  # NaN: no change to find
            undefined |= share != share
            lines.append(f"| {label} | `{expr}` | {cr:.4f} | {nd:.4f} | {fr:.4f} | {ratio} |")
        if undefined:
            lines += ["", "n/a: no page changed in the test fold, so not even the oracle finds one"]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        w = self.winner
        return {
            "expression": self.expression,
            "prior": list(self.config.prior),
            "fitness": self.config.fitness,
            "selection": self.config.selection,
            "train_fitness": w.train,
            "validation_fitness": w.validation,
            "seed": w.seed,
            "generation": w.generation,
            "test": {
                label: {
                    "change_rate": cr,
                    "ndcg": nd,
                    "freshness": fr,
                    "change_rate_vs_oracle": s if s == s else None,
                }
                for label, _e, cr, nd, fr, s in self.rows()
            },
            # paper 004's parameters the expression needs at crawl time: RECRAWL_WINDOW
            # must be at least the largest i of its C_i / D_i (checked on loading)
            "window": gp.window_of(self.terminals),
            "terminals_used": sorted(gp.terminals_used(w.tree)),
            **(
                {"related": _related_json(self.config.related)}
                if gp.uses_related(self.terminals)
                else {}
            ),
            "parameters": {
                **{k: v for k, v in asdict(self.config).items() if k != "related"},
                "terminal_names": list(self.terminals),
            },
            "history": {"source": self.source, **self.pages},
            "seconds": self.seconds,
            "stats": self.stats,
        }


def _related_json(related: Mapping[str, Any]) -> dict[str, Any]:
    """The Q replay's related-page parameters, named as the RECRAWL_* settings they mirror."""
    r = related_parameters(related)
    groups = r["groups"]
    return {
        "RECRAWL_EXPERTS": r["experts"],
        "RECRAWL_EXPERTS_LAG": r["max_lag"],
        "RECRAWL_EXPERTS_CANDIDATES": r["max_candidates"],
        "RECRAWL_EXPERTS_HISTORY": r["history"],
        "refresh_every": r["refresh_every"],
        "groups": None if groups is None else "per page (hosts / site folders)",
    }


_PRESET_TEXT = {
    name: (p.expression if p.expression is not None else "random") for name, p in _PRESETS.items()
}


def save_json(result: EvolveResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result.to_json(), fh, indent=2, default=_json_default)
        fh.write("\n")


def _json_default(o: object) -> object:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def plot(result: EvolveResult, path: str, labels: Sequence[str] | None = None) -> None:
    """Per-cycle ChangeRate of the winner and the baselines on the test fold (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(
            "--plot needs matplotlib: pip install matplotlib (or scrapy-recrawl[plot])"
        ) from None
    labels = list(result.test) if labels is None else list(labels)
    fig, ax = plt.subplots(figsize=(10, 5.5))
    ax.set_prop_cycle(color=[plt.get_cmap("tab20")(i) for i in range(20)])
    for label in labels:
        r = result.test[label]
        x = np.arange(r.warmup, r.warmup + r.change_rate.size)
        width = 2.5 if label in ("winner", ORACLE) else 1.0
        ax.plot(x, r.change_rate, label=label, linewidth=width)
    ax.set_xlabel("cycle")
    ax.set_ylabel("ChangeRate (test fold)")
    ax.set_title(f"recrawl-evolve: {math.floor(result.pages['test'])} test pages")
    ax.legend(ncol=3, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
