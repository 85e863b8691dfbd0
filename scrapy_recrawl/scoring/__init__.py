"""Scoring: the one place where a page's recrawl priority is computed.

Used by the live scheduler and by the offline simulator alike::

    scorer = Scorer.from_spec("nad+")            # preset, expression or JSON path
    terms = compute_terminals(state, cycle, now, prior=scorer.prior,
                              needed=scorer.terminals_needed)
    fetch = scorer.top_k(terms, k)               # indices, best first
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
from scrapy_recrawl.scoring.terminals import (
    DEFAULT_PRIOR,
    TERMINALS,
    check_prior,
    compute_terminals,
)
from scrapy_recrawl.scoring.topk import top_k_indices

__all__ = [
    "DEFAULT_PRIOR",
    "PAPER_PRESETS",
    "PRESETS",
    "RECOMMENDED_SCORER",
    "SMOOTHED_PRESETS",
    "TERMINALS",
    "ExpressionScorer",
    "Preset",
    "RandomScorer",
    "Scorer",
    "check_prior",
    "compute_terminals",
    "parse_expression",
    "pdiv",
    "plog",
    "ppow",
    "score_expression",
    "top_k_indices",
]
