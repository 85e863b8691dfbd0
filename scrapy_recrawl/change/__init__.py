"""Is this response a real change? Shingles + simhash of the visible text, and an element diff.

See :mod:`scrapy_recrawl.change.detector` for the rule that decides ``changed``.
"""

from .boilerplate import BoilerplateModel
from .detector import ChangeDetector, ChangeResult, Ignore, Signature, SignatureVersionError

__all__ = [
    "BoilerplateModel",
    "ChangeDetector",
    "ChangeResult",
    "Ignore",
    "Signature",
    "SignatureVersionError",
]
