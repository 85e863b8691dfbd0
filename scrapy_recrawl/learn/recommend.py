"""The one scorer a ``recrawl-evolve`` run recommends, and the numbers that justify it.

A run checks its learned pick twice, on different data: the preset guard
(learn/guard.py) against every preset on the validation data, then the noise rule
(learn/noise.py) against the best preset on every held-out fold, over seeds. The
recommendation is the learned expression only when it passes both; otherwise the
preset that stopped it, the expression then a runner-up:

1. the guard returned a preset (nothing learned beat it on validation): that preset;
2. else, the held-out folds do not show the learned pick better than the best preset
   beyond noise: that preset (simpler, documented, and as good as far as the
   history can tell);
3. else the learned expression.

Without the guard (``--no-preset-guard``: the user asked for the learned expression,
whatever a preset does) the learned expression is recommended, and its reason says
how it stands against the best preset beyond noise.

What the run prints ("recommended: ..."), the line "use it with RECRAWL_SCORER =",
the ``expression`` of the saved file and the ``expression:`` line all name it: one
run, one answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy_recrawl.scoring import PRESETS

from .guard import GuardResult
from .noise import NoiseReport

#: who decided: the learned pick passed both checks, or which check stopped it
LEARNED, GUARD, NOISE = "learned", "preset_guard", "held_out_noise"


@dataclass(frozen=True)
class Recommendation:
    """The scorer to use and why; ``runner_up``: the learned expression it was
    preferred to (None when the learned expression is the recommendation)."""

    #: a preset name, or "learned"
    scorer: str
    expression: str
    #: LEARNED, GUARD or NOISE
    by: str
    #: one line with the numbers that decided
    why: str
    runner_up: str | None = None

    @property
    def preset(self) -> str | None:
        """The preset recommended, or None (the learned expression)."""
        return None if self.scorer == LEARNED else self.scorer

    def setting(self, path: str | None = None) -> str:
        """The settings line that uses it (a saved file at ``path``, or the preset)."""
        value = path if path is not None else (self.preset or self.expression)
        return f"RECRAWL_SCORER = {value!r}"

    def lines(self, path: str | None = None) -> list[str]:
        """What the run prints about it."""
        if self.preset:
            what = f"the preset {self.preset} (`{self.expression}`)"
        else:
            what = f"the learned `{self.expression}`"
        out = [f"recommended: {what}: {self.why}"]
        if self.runner_up is not None:
            out.append(f"runner-up: the learned `{self.runner_up}` (not recommended: see above)")
        saved = f" (saved in {path}: the preset's expression)" if path and self.preset else ""
        out.append(f"use it with {self.setting(path)}{saved}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer,
            "expression": self.expression,
            "by": self.by,
            "why": self.why,
            "runner_up": self.runner_up,
        }


def recommend(learned: str, guard: GuardResult | None, noise: NoiseReport | None) -> Recommendation:
    """The rule of the module docstring. ``learned``: the final pick's expression;
    ``guard`` None: the preset guard was off."""
    if guard is not None and guard.returned_preset is not None:
        return Recommendation(
            guard.returned_preset, guard.expression, GUARD, guard.line(), runner_up=learned
        )
    # the noise rule's best preset: one a setting can name (rand only when alone)
    best = None if noise is None or not noise.presets else noise.best_preset
    preset = None if best is None else PRESETS.get(best.label)
    expression = None if preset is None else preset.expression
    worse = noise is not None and best is not None and not noise.better
    if guard is not None and noise is not None and best is not None and worse and expression:
        how = (
            "it is below the preset's"
            if noise.winner.interval()[1] < best.interval()[0]
            else "the intervals overlap"
        )
        why = (
            f"the learned pick is not better than {best.label} beyond noise on the held-out "
            f"folds ({noise.fitness}: learned {noise.winner.text()}; {best.label} "
            f"{best.text()}; {how})"
        )
        return Recommendation(best.label, expression, NOISE, why, runner_up=learned)
    parts = []
    if guard is None:
        parts.append("the preset guard is off (--no-preset-guard)")
    elif guard.presets:
        parts.append(guard.line())
    if noise is not None and best is not None:
        parts.append(
            f"it is {'not ' if worse else ''}better than {best.label} beyond noise on the "
            f"held-out folds ({noise.fitness}: learned {noise.winner.text()}; {best.label} "
            f"{best.text()})"
        )
    why = "; ".join(parts) or "no preset to compare it with"
    return Recommendation(LEARNED, learned, LEARNED, why)
