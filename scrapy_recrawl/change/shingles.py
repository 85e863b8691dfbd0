"""Words, word shingles and the vectorised 64-bit hashing they rest on.

The word, shingle and fmix64 hashing of the change detector, in numpy, for
plain text: :func:`text_shingles` gives a string the shingles a page with that
visible text gets from the compiled walk (``_walk.pyx`` uses the same constants
and rules; the tests check the two agree), and :func:`shingle_hashes` is the
readable statement of the shingling that ``_hashes.shingle_simhash`` fuses with
the simhash. :func:`span_hashes` hashes many byte spans of one buffer at once:
it reads each span as little-endian 64-bit chunks straight from the buffer (an
unaligned, 1-byte-strided uint64 view, see :func:`u64_view`); a murmur3
finaliser spreads the bits.

The hashes are stable across processes and platforms (no ``hash()``; explicit
little-endian layout), so signatures can be stored and compared later. They are
not cryptographic: a page author who wanted to could craft two texts with the
same hash, which is harmless for change detection.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "fmix64",
    "run_edges",
    "shingle_hashes",
    "span_hashes",
    "text_shingles",
    "u64_view",
    "visible_text",
    "word_hashes",
]

_U64 = np.uint64
_LE_U64 = np.dtype("<u8")
# Odd multipliers (odd, so invertible mod 2**64): the golden-ratio constant for
# chunks of bytes, splitmix64's increment rotated for sequences of hashes.
_CHUNK_MUL = _U64(0x9E3779B97F4A7C15)
_CHUNK_MUL_8 = _U64((8 * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
_SEQ_BASE = 0xBF58476D1CE4E5B9
_LEN_MIX = _U64(0x94D049BB133111EB)
_FMIX1 = _U64(0xFF51AFD7ED558CCD)
_FMIX2 = _U64(0xC4CEB9FE1A85EC53)
_S33 = _U64(33)
_PAD = bytes(8)
#: _LOW_BYTES[k] keeps the k low bytes of a little-endian uint64 (k = 0..8).
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=_U64)


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
    edges = (mask[1:] != mask[:-1]).nonzero()[0]
    edges += 1
    return edges[0::2], edges[1::2]


def u64_view(data: bytes) -> np.ndarray:
    """``view[i]`` = the 8 bytes ``data[i:i+8]`` as a little-endian uint64 (zero-padded).

    A read-only, 1-byte-strided (unaligned) view over a padded copy of ``data``:
    ``view[starts]`` reads one 64-bit chunk per start in a single gather.
    """
    return np.ndarray((len(data),), dtype=_LE_U64, buffer=data + _PAD, strides=(1,))


def span_hashes(
    view: np.ndarray, starts: np.ndarray, lengths: np.ndarray, mix: bool = True
) -> np.ndarray:
    """64-bit hash of each byte span ``[starts[i], starts[i] + lengths[i])`` of a :func:`u64_view`.

    Equal byte strings hash alike wherever they are. A span is read as 8-byte
    little-endian chunks (the last one zero-filled); chunk ``k > 0`` is mixed
    with its offset ``8 * k`` and the mixed chunks are summed. Spans of up to 8 bytes
    (most words and names) cost one read. The spans must not contain NUL
    bytes (markup never does), so the zero fill needs no length to tell
    ``"a"`` from ``"a\\0"``. Empty spans hash to 0.

    With ``mix=False`` the final murmur3 finaliser is skipped, so a span of up
    to 8 bytes "hashes" to its own bytes: cheaper, and fine for values that are
    only combined by :func:`shingle_hashes`, which mixes.
    """
    h = view[starts]
    h &= _LOW_BYTES.take(np.minimum(lengths, 8))
    long = (lengths > 8).nonzero()[0]
    if len(long):
        ls, ll = starts[long], lengths[long]
        extra = (ll - 1) >> 3  # chunks after the first
        ends = extra.cumsum()
        first = ends - extra
        if ends[-1] == len(long):  # no span over 16 bytes: one more chunk each
            chunks = view[ls + 8]
            chunks &= _LOW_BYTES.take(ll - 8)
            chunks += _CHUNK_MUL_8  # (rel = 8, as below)
        else:
            rel = np.arange(8, 8 * int(ends[-1]) + 8, 8) - (8 * first).repeat(extra)  # 8 * k
            chunks = view[ls.repeat(extra) + rel]
            chunks[ends - 1] &= _LOW_BYTES.take(ll - 8 * extra)
            chunks += rel.astype(_U64) * _CHUNK_MUL  # chunk k is mixed with 8 * k
        h[long] = fmix64(h[long]) + np.add.reduceat(fmix64(chunks), first)
    return fmix64(h) if mix else h


def word_hashes(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Hash every word of a UTF-8 byte string.

    Returns ``(hashes, start offsets)`` in text order (hashes as
    :func:`span_hashes` with ``mix=False`` gives them). A word is a maximal run
    of bytes above 0x20, i.e. ASCII whitespace and control characters split
    words; UTF-8 multi-byte sequences are all >= 0x80 and never split.
    """
    data = b" " + data + b" "
    starts, ends = run_edges(np.frombuffer(data, dtype=np.uint8) > 32)
    return span_hashes(u64_view(data), starts, ends - starts, mix=False), starts - 1


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


def visible_text(text: str) -> str:
    """Text as the element walk reads it: U+00A0 is a word separator, like a space."""
    return text.replace("\xa0", " ")


def text_shingles(text: str, size: int) -> np.ndarray:
    """Shingle hashes of a plain string (whitespace-separated words, case kept).

    Same hashing as :func:`scrapy_recrawl.change.elements.extract` applies to a
    page, so a page whose visible text (in reading order) equals ``text`` gets
    the same shingles.
    """
    words, _ = word_hashes(visible_text(text).encode("utf-8", "replace"))
    return shingle_hashes(words, size)
