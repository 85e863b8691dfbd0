"""Which fingerprints a store has surely never been given: a Bloom filter in memory.

A SQLite store that opened with no URL holds, while it is open, only the URLs its own
``record()`` has added (it is the file's one writer: history/lock.py). Each is added
here, and ``knows()`` answers "no" for a URL this filter has never seen without a
query: on a first crawl, every new link the scheduler admits asked the file once
(about 30 µs in a crawl: a read transaction's two file locks, and the B-tree walk).

A Bloom filter never answers "not seen" for a fingerprint it was given, so a "no" is
exact; a "maybe" (a fingerprint given, or a false positive: about 1 in 200 with a
million URLs, 1 in 8 with five million) is settled by the query, as without it. Its
size is fixed (2 MiB), so a crawl of many millions only loses the shortcut.
"""

from __future__ import annotations

#: bits in the filter: 2**24 (2 MiB); each fingerprint sets three of them
BITS = 1 << 24
_MASK = BITS - 1


class SeenFilter:
    """A set of fingerprints that may answer "maybe" for one it was not given, never
    "no" for one it was."""

    __slots__ = ("_bits",)

    def __init__(self) -> None:
        self._bits = bytearray(BITS >> 3)

    @staticmethod
    def _positions(fingerprint: bytes) -> tuple[int, int, int]:
        # Python's hash of bytes (SipHash, seeded per process): two 32-bit halves make
        # the three positions (double hashing), whatever the fingerprinter's bytes are
        h = hash(fingerprint)
        first = h & _MASK
        step = ((h >> 32) & _MASK) | 1
        return first, (first + step) & _MASK, (first + 2 * step) & _MASK

    def add(self, fingerprint: bytes) -> None:
        bits = self._bits
        for p in self._positions(fingerprint):
            bits[p >> 3] |= 1 << (p & 7)

    def __contains__(self, fingerprint: bytes) -> bool:
        bits = self._bits
        for p in self._positions(fingerprint):
            if not bits[p >> 3] & (1 << (p & 7)):
                return False
        return True
