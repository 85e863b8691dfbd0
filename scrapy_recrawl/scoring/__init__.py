"""Scoring: the one place where a page's recrawl priority is computed.

Used by the live scheduler and by the offline simulator alike::

    scorer = Scorer.from_spec("nad+")            # preset, expression or JSON path
    terms = compute_terminals(state, cycle, now, prior=scorer.prior,
                              needed=scorer.terminals_needed)
    fetch = scorer.top_k(terms, k)               # indices, best first

The terminals a scorer may name are a registry's (:mod:`.registry`): the
core's (:func:`core_registry`), plus those the listed plug-ins declare when the
layer that loads them adds them (:mod:`scrapy_recrawl.plugin_terminals`).
"""

from scrapy_recrawl.scoring.expression import (
    ExpressionScorer,
    RandomScorer,
    Scorer,
    score_expression,
)
from scrapy_recrawl.scoring.parse import parse_expression
from scrapy_recrawl.scoring.presets import (
    PAPER_PRESETS,
    PRESETS,
    RECOMMENDED_SCORER,
    SMOOTHED_PRESETS,
    Preset,
)
from scrapy_recrawl.scoring.protected import pdiv, plog, ppow
from scrapy_recrawl.scoring.registry import (
    TerminalRegistry,
    compute_terminals,
    core_registry,
    core_registry_from_settings,
)
from scrapy_recrawl.scoring.terminals import (
    CORE_TERMINALS,
    DEFAULT_PRIOR,
    Terminal,
    check_prior,
    optional_column,
)
from scrapy_recrawl.scoring.topk import top_k_indices

__all__ = [
    "CORE_TERMINALS",
    "DEFAULT_PRIOR",
    "PAPER_PRESETS",
    "PRESETS",
    "RECOMMENDED_SCORER",
    "SMOOTHED_PRESETS",
    "ExpressionScorer",
    "Preset",
    "RandomScorer",
    "Scorer",
    "Terminal",
    "TerminalRegistry",
    "check_prior",
    "compute_terminals",
    "core_registry",
    "core_registry_from_settings",
    "optional_column",
    "parse_expression",
    "pdiv",
    "plog",
    "ppow",
    "score_expression",
    "top_k_indices",
]
