"""What a GP4C run reports: the result, its tables, its JSON file, its plot."""

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
from scrapy_recrawl.scoring import Scorer

from .config import EvolveConfig, related_parameters
from .guard import GuardResult
from .noise import NoiseReport
from .recommend import Recommendation, recommend
from .search import Candidate
from .tables import markdown_table


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
    #: each seed's best training fitness per generation (the plot's left panel)
    curves: list[list[float]] = field(default_factory=list)
    #: the spread over seeds and held-out folds, and whether the winner beats the presets
    noise: NoiseReport | None = None
    #: the final pick against every preset on the validation data (learn/guard.py)
    guard: GuardResult | None = None

    @property
    def recommendation(self) -> Recommendation:
        """The one scorer the run recommends, and why (learn/recommend.py)."""
        return recommend(self.winner.expression, self.guard, self.noise)

    @property
    def expression(self) -> str:
        """What the run returns (prints last, saves, says to use): the recommendation's
        expression, the learned one or a preset's."""
        return self.recommendation.expression

    @property
    def returned_preset(self) -> str | None:
        """The preset recommended instead of the learned scorer (by the guard or the
        noise rule), or None."""
        return self.recommendation.preset

    @property
    def tested_expression(self) -> str:
        """The test fold's ``winner`` row: the learned pick, or the guard's preset."""
        return self.winner.expression if self.guard is None else self.guard.expression

    def rows(self) -> list[tuple[str, str, float, float, float, float]]:
        """(label, expression, ChangeRate, NDCG, freshness, ChangeRate/oracle) on the test fold."""
        orc = self.test[ORACLE].mean_change_rate
        out = []
        for label, r in self.test.items():
            expr = "(clairvoyant)" if label == ORACLE else r.policy
            if label == "winner":
                expr = self.tested_expression
            elif label in _PRESET_TEXT:
                expr = _PRESET_TEXT[label]
            share = r.mean_change_rate / orc if orc > 0 else float("nan")
            out.append((label, expr, r.mean_change_rate, r.mean_ndcg, r.mean_freshness, share))
        return out

    def table(self) -> str:
        undefined = False
        rows = []
        for label, expr, cr, nd, fr, share in self.rows():
            if len(expr) > 60:
                expr = expr[:57] + "..."
            ratio = f"{share:.3f}" if share == share else "n/a"  # NaN: no change to find
            undefined |= share != share
            rows.append((label, f"`{expr}`", f"{cr:.4f}", f"{nd:.4f}", f"{fr:.4f}", ratio))
        lines = [
            f"test fold: {self.pages['test']} pages x {self.test['winner'].change_rate.size} "
            f"budgeted cycles, k = {self.test['winner'].k} per cycle",
            "",
            markdown_table(
                ("scorer", "expression", "ChangeRate", "NDCG", "freshness", "ChangeRate / oracle"),
                rows,
                right=(2, 3, 4, 5),
            ),
        ]
        if undefined:
            lines += ["", "n/a: no page changed in the test fold, so not even the oracle finds one"]
        if self.guard is not None:
            lines += ["", self.guard.line()]
        if self.noise is not None:
            lines += ["", self.spread_table()]
        return "\n".join(lines)

    def spread_table(self, top: int = 5) -> str:
        """The winner and the ``top`` presets over the held-out folds (learn/noise.py)."""
        n = self.noise
        assert n is not None
        rows = [
            (s.label, f"{s.mean:.4f}", f"{s.sd:.4f}", f"{s.values.min():.4f}",
             f"{s.values.max():.4f}", s.over)
            for s in n.rows()[: top + 1]
        ]  # fmt: skip
        verdict = (
            f"the winner is better than {n.best_preset.label} beyond noise"
            if n.better
            else f"the winner is not better than {n.best_preset.label} beyond noise"
        )
        return "\n".join(
            [
                f"held-out folds ({n.fitness}; validation folds and the test fold): {verdict} "
                "(intervals mean ± sd)",
                "",
                markdown_table(
                    ("scorer", "mean", "sd", "min", "max", "over"), rows, right=(1, 2, 3, 4)
                ),
            ]
        )

    def to_json(self) -> dict[str, Any]:
        w = self.winner
        rec = self.recommendation
        return {
            # what RECRAWL_SCORER = "<this file>" runs: the recommendation
            "expression": rec.expression,
            "recommended": rec.to_json(),
            "prior": list(self.config.prior),
            "fitness": self.config.fitness,
            "selection": self.config.selection,
            # the preset recommended instead of the learned scorer (by the guard or the
            # noise rule: learn/recommend.py), or null
            "returned_preset": rec.preset,
            **({"preset_guard": self.guard.to_json()} if self.guard is not None else {}),
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
            "terminals_used": sorted(
                gp.terminals_used(w.tree)
                if rec.preset is None
                else Scorer.from_spec(rec.preset).terminals_needed
            ),
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
            **({"held_out": self.noise.to_json()} if self.noise is not None else {}),
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
    """Two panels (matplotlib): each seed's best training fitness over the generations,
    and the winner against the presets, cycle by cycle, on the test fold (``labels``:
    which; default the winner, the oracle and the three best presets)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(
            "--plot needs matplotlib: pip install matplotlib (or scrapy-recrawl[plot])"
        ) from None
    if labels is None:
        presets = sorted(
            (k for k in result.test if k not in ("winner", ORACLE)),
            key=lambda k: -result.test[k].mean_change_rate,
        )
        labels = ["winner", *presets[:3], ORACLE]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.4]})
    for i, curve in enumerate(result.curves):
        left.plot(np.arange(1, len(curve) + 1), curve, marker=".", label=f"seed {i + 1}")
    from matplotlib.ticker import MaxNLocator

    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel("generation")
    left.set_ylabel(f"best {result.config.fitness} (training folds)")
    left.set_title("fitness over generations")
    if result.curves:
        left.legend(loc="lower right", fontsize="small", framealpha=0.8)
    for label in labels:
        r = result.test[label]
        x = np.arange(r.warmup, r.warmup + r.change_rate.size)
        style: dict[str, dict[str, Any]] = {
            "winner": {"linewidth": 2.5, "color": "black"},
            ORACLE: {"linestyle": ":"},
        }
        mean = f"{r.mean_change_rate:.3f}"
        right.plot(x, r.change_rate, label=f"{label} (mean {mean})", **style.get(label, {}))
    right.set_xlabel("cycle")
    right.set_ylabel("ChangeRate (changed / downloaded)")
    right.set_title(f"test fold: {math.floor(result.pages['test'])} pages")
    # the legend beside the axes: it never hides a line
    right.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.suptitle(f"recrawl-evolve: winner {_short(result.tested_expression)}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _short(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
