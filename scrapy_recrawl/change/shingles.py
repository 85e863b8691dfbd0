"""Words, word shingles and the vectorised 64-bit hashing they rest on.

A page's visible text is hashed word by word in a handful of numpy passes over
its UTF-8 bytes, never one Python call per word: a polynomial prefix hash over
the bytes gives every word's hash at once (``(P[end] - P[start]) * B**-start``,
all arithmetic mod 2**64), and a murmur3 finaliser spreads the bits. Shingles
and whole text pieces are hashed the same way one level up, over word hashes.
That keeps the cost of a page at a few numpy operations on arrays the size of
its text, which is what lets :class:`~scrapy_recrawl.change.ChangeDetector`
stay within a small multiple of the parse time (see ``bench/change_detection.py``).

The hashes are stable across processes and platforms (no ``hash()``; explicit
little-endian layout), so signatures can be stored and compared later. They are
not cryptographic: a page author who wanted to could craft two texts with the
same hash, which is harmless for change detection.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "fmix64",
    "hash_spans",
    "prefix_hashes",
    "run_edges",
    "sequence_hashes",
    "shingle_hashes",
    "text_shingles",
    "word_hashes",
]

_U64 = np.uint64
# Odd multipliers (odd, so invertible mod 2**64): the golden-ratio constant for
# bytes, splitmix64's increment rotated for the second level (sequences of hashes).
_BYTE_BASE = 0x9E3779B97F4A7C15
_SEQ_BASE = 0xBF58476D1CE4E5B9
_LEN_MIX = _U64(0x94D049BB133111EB)
_FMIX1 = _U64(0xFF51AFD7ED558CCD)
_FMIX2 = _U64(0xC4CEB9FE1A85EC53)
_S33 = _U64(33)


class _Powers:
    """``base**i`` and ``base**-i`` mod 2**64 for i < n, grown by doubling on demand."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.inverse = pow(base, -1, 1 << 64)
        self.pow = np.ones(1, dtype=_U64)
        self.inv = np.ones(1, dtype=_U64)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n > len(self.pow):
            size = max(n, 2 * len(self.pow), 4096)
            pw = np.full(size, self.base, dtype=_U64)
            pw[0] = 1
            iv = np.full(size, self.inverse, dtype=_U64)
            iv[0] = 1
            # cumprod on uint64 wraps mod 2**64, which is exactly the ring we want.
            self.pow, self.inv = np.cumprod(pw), np.cumprod(iv)
        return self.pow[:n], self.inv[:n]


_BYTE_POWERS = _Powers(_BYTE_BASE)
_SEQ_POWERS = _Powers(_SEQ_BASE)


def fmix64(x: np.ndarray) -> np.ndarray:
    """The murmur3 64-bit finaliser, vectorised (every input bit affects every output bit)."""
    x = x ^ (x >> _S33)
    x *= _FMIX1
    x ^= x >> _S33
    x *= _FMIX2
    x ^= x >> _S33
    return x


def run_edges(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of the runs of True in a bool array that starts and ends False."""
    edges = np.flatnonzero(np.diff(mask.view(np.int8))) + 1
    return edges[0::2], edges[1::2]


def prefix_hashes(buf: np.ndarray) -> np.ndarray:
    """Polynomial prefix sums of a uint8 buffer: ``P[i] = sum(buf[j] * B**j for j <= i)``."""
    pw, _ = _BYTE_POWERS.get(len(buf))
    prefix = np.multiply(buf, pw, dtype=_U64)
    np.cumsum(prefix, out=prefix)
    return prefix


def hash_spans(prefix: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hash of each span ``[starts[i], ends[i])`` (``starts >= 1``) of a prefix-hashed buffer.

    Equal byte strings hash alike wherever they are: the span sum is shifted
    back by ``B**-start`` and the length is mixed in before the finaliser.
    """
    _, iv = _BYTE_POWERS.get(len(prefix))
    h = (prefix[ends - 1] - prefix[starts - 1]) * iv[starts]
    h ^= (ends - starts).astype(_U64) * _LEN_MIX
    return fmix64(h)


def word_hashes(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hash every word of a UTF-8 buffer that starts and ends with a NUL byte.

    Returns ``(hashes, start offsets)`` in text order. A word is a maximal run
    of bytes above 0x20, i.e. ASCII whitespace, control characters and NUL
    (which separates text pieces) split words; UTF-8 multi-byte sequences are
    all >= 0x80 and never split. Callers map U+00A0 (no-break space) to a space.
    """
    starts, ends = run_edges(buf > 32)
    if len(starts) == 0:
        return np.zeros(0, dtype=_U64), starts
    return hash_spans(prefix_hashes(buf), starts, ends), starts


def sequence_hashes(values: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Order-sensitive hash of each run ``values[first[i]:last[i]]`` of 64-bit hashes.

    Empty runs hash to 0, so "no text" is a recognisable value.
    """
    n = len(values)
    pw, iv = _SEQ_POWERS.get(n + 1)
    prefix = np.empty(n + 1, dtype=_U64)
    prefix[0] = 0
    if n:
        np.cumsum(values * pw[:n], out=prefix[1:])
    safe_first = np.minimum(first, n)
    h = (prefix[last] - prefix[safe_first]) * iv[safe_first]
    count = (last - first).astype(_U64)
    h = fmix64(h ^ (count * _LEN_MIX))
    h[count == 0] = 0
    return h


def shingle_hashes(words: np.ndarray, size: int) -> np.ndarray:
    """Hashes of the word shingles (runs of ``size`` consecutive words) of a word-hash array.

    A text shorter than ``size`` words yields one shingle of all its words; an
    empty text yields none. Repeated shingles are kept (they weigh more in the
    simhash, as a repeated feature does in the ``simhash`` package).
    """
    n = len(words)
    if n == 0:
        return np.zeros(0, dtype=_U64)
    k = min(size, n)
    m = n - k + 1
    base = _U64(_SEQ_BASE)
    acc = words[:m].copy()
    for j in range(1, k):
        acc *= base
        acc += words[j : j + m]
    return fmix64(acc ^ _U64((k * int(_LEN_MIX)) & 0xFFFFFFFFFFFFFFFF))


def text_shingles(text: str, size: int) -> np.ndarray:
    """Shingle hashes of a plain string (whitespace-separated words, case kept).

    Same hashing as :func:`scrapy_recrawl.change.elements.extract` applies to a
    page, so a page whose visible text equals ``text`` gets the same shingles.
    """
    data = b"\x00" + text.replace("\xa0", " ").encode("utf-8", "replace") + b"\x00"
    words, _ = word_hashes(np.frombuffer(data, dtype=np.uint8))
    return shingle_hashes(words, size)
