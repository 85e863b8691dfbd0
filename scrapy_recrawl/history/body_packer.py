"""Bodies compressed off the crawl's thread.

A store keeps each good body compressed (:func:`~.base.compress_body`). zlib's deflate
of a page of a few KB is the largest single cost of recording a first fetch (about
40 µs), and zlib lets go of the GIL while it deflates: :class:`BodyPacker` hands a
body to one worker thread and the store keeps the :class:`~concurrent.futures.Future`
in its write buffer in place of the bytes; the flush (and a read of a body still in
the buffer) takes the result with :func:`packed`. The reactor's thread goes on with
the crawl meanwhile, on another core when there is one. Small bodies are compressed
at once: a hand-off would cost more than their deflate. The worker thread is made at
the first hand-off and ended when the store closes.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor

from .base import compress_body

#: bodies shorter are compressed where they are recorded (a hand-off is a few µs)
HAND_OFF_BYTES = 1024


class BodyPacker:
    """Compresses bodies on one worker thread (module docstring)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0  # the process the worker thread is in (a forked child has none)

    def pack(self, body: bytes) -> bytes | Future[bytes]:
        """The compressed body, or a Future of it."""
        if len(body) < HAND_OFF_BYTES:
            return compress_body(body)
        if self._pool is None or self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="recrawl-bodies")
            self._pid = os.getpid()
        return self._pool.submit(compress_body, body)

    def close(self) -> None:
        """End the worker thread (after the bodies handed to it are compressed)."""
        pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.shutdown(wait=True)


def packed(payload: bytes | Future[bytes]) -> bytes:
    """The compressed bytes of :meth:`BodyPacker.pack`'s result (waiting for them)."""
    return payload if isinstance(payload, bytes) else payload.result()
