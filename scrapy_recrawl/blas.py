"""One BLAS thread for code that makes many small matrix products.

On a busy 2-core machine multi-threaded OpenBLAS spends far more time waking
and syncing its threads than computing on products of a few thousand entries
(measured: the WebFountain solve at the paper's size took over 120 s instead of
about 10 s, the related-page index at 100,000 URLs 7-10 s instead of about 1.7 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["one_blas_thread"]


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit BLAS to one thread inside the block (with threadpoolctl, when installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - depends on the environment
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
