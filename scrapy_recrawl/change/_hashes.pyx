# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The hashing of what the walk hands over, compiled: JSON leaves and word shingles.

:func:`value_hashes` hashes the leaves of a page's JSON data as the walk
(``_walk.pyx``) hashes attribute values; :func:`shingle_simhash` turns the walk's
word hashes into the page's simhash in one pass. The hashing itself is
``_hashes.pxd``'s, shared with the walk; the readable statement of both is
``shingles.py`` and ``simhash.py`` (tests check they agree).
"""

# (fmix, attribute_hash, simhash_of_words: declared in _hashes.pxd, in scope here)
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


def shingle_simhash(const uint64_t[::1] words, int size):
    """``simhash.fingerprint(shingles.shingle_hashes(words, size))`` in one pass
    (``_hashes.pxd``'s, which the walk runs on its words too)."""
    cdef int64_t n = words.shape[0]
    cdef uint64_t result
    if n == 0:
        return 0
    with nogil:
        result = simhash_of_words(&words[0], n, size)
    return result
