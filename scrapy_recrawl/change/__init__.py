"""Is this response a real change? Shingles + simhash of the visible text, and an element diff.

See :mod:`scrapy_recrawl.change.detector` for the rule that decides ``changed``.
"""

from .detector import ChangeDetector, ChangeResult, Signature, SignatureVersionError

__all__ = ["ChangeDetector", "ChangeResult", "Signature", "SignatureVersionError"]
