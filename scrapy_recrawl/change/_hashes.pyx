# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The hashing of what the walk hands over, compiled: JSON leaves and word shingles.

:func:`value_hashes` hashes the leaves of a page's JSON data as the walk
(``_walk.pyx``) hashes attribute values; :func:`shingle_simhash` turns the walk's
word hashes into the page's simhash in one pass. The hashing itself is
``_hashes.pxd``'s, shared with the walk; the readable statement of both is
``shingles.py`` and ``simhash.py`` (tests check they agree).
"""

# (fmix, attribute_hash, SEQ_BASE, LEN_MIX: declared in _hashes.pxd, in scope here)
from libc.stdint cimport int64_t, uint8_t, uint64_t

import numpy as np


def value_hashes(list values, uint64_t salt):
    """Hashes of byte strings as attribute values are hashed (token-like runs left out),
    each mixed with ``salt``: the leaves of a page's JSON data (detector.py)."""
    cdef Py_ssize_t i, n = len(values)
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] view = out
    cdef bytes v
    cdef const uint8_t* p
    for i in range(n):
        v = values[i]
        p = <const uint8_t*>v
        view[i] = fmix(attribute_hash(p, len(v), 0) ^ salt)
    return out


# SPREAD[v]: byte j is bit j of v, so adding SPREAD[byte] to a uint64 counts
# 8 bits at once in 8 byte lanes (flushed before a lane can reach 256).
cdef uint64_t SPREAD[256]
cdef int _v, _j
for _v in range(256):
    SPREAD[_v] = 0
    for _j in range(8):
        SPREAD[_v] |= (<uint64_t>((_v >> _j) & 1)) << (8 * _j)


def shingle_simhash(const uint64_t[::1] words, int size):
    """``simhash.fingerprint(shingles.shingle_hashes(words, size))`` in one pass."""
    cdef int64_t n = words.shape[0], m, i, j, k, pending = 0
    cdef uint64_t acc, h, tail
    cdef uint64_t lanes[8]
    cdef int64_t counts[64]
    cdef uint64_t result = 0
    cdef int b, c
    if n == 0:
        return 0
    k = size if size < n else n
    m = n - k + 1
    tail = <uint64_t>k * LEN_MIX
    for b in range(64):
        counts[b] = 0
    for c in range(8):
        lanes[c] = 0
    with nogil:
        for i in range(m):
            acc = words[i]
            for j in range(1, k):
                acc = acc * SEQ_BASE + words[i + j]
            h = fmix(acc ^ tail)
            for c in range(8):
                lanes[c] += SPREAD[(h >> (8 * c)) & 0xFF]
            pending += 1
            if pending == 255 or i == m - 1:
                for c in range(8):
                    for b in range(8):
                        counts[8 * c + b] += (lanes[c] >> (8 * b)) & 0xFF
                    lanes[c] = 0
                pending = 0
        # the package's rule: a bit is set when more than half the features have it
        for b in range(64):
            if counts[b] * 2 > m:
                result |= (<uint64_t>1) << b
    return result
