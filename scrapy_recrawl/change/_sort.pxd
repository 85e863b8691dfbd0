# cython: language_level=3
"""The entries of a page's signature and their sort by key (``_walk.sign``; ``_diff.key_order``
shows the order to the tests)."""

from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset


cdef struct Entry:
    uint64_t key
    uint64_t text
    uint64_t attr


cdef inline Entry* sort_by_key(Entry* a, Entry* spare, int64_t n) noexcept nogil:
    """Sort ``n`` entries by key, stably (= numpy's ``argsort(kind="stable")``): runs of
    16 by insertion, then merged pairwise between ``a`` and ``spare``. Returns the
    buffer that holds the result."""
    cdef int64_t lo, hi, mid, i, j, k, width = 16
    cdef Entry e
    cdef Entry* src = a
    cdef Entry* dst = spare
    cdef Entry* t
    lo = 0
    while lo < n:
        hi = lo + width if lo + width < n else n
        for i in range(lo + 1, hi):
            e = a[i]
            j = i
            while j > lo and a[j - 1].key > e.key:
                a[j] = a[j - 1]
                j -= 1
            a[j] = e
        lo = hi
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if src[j].key < src[i].key:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            if i < mid:
                memcpy(dst + k, src + i, (mid - i) * sizeof(Entry))
            if j < hi:
                memcpy(dst + k, src + j, (hi - j) * sizeof(Entry))
            lo = hi
        t = src
        src = dst
        dst = t
        width *= 2
    return src


cdef inline Entry* sort_by_key_bucketed(Entry* a, Entry* spare, int64_t n) noexcept nogil:
    """``sort_by_key``, sooner for the well-mixed keys of a page: the entries spread
    stably into about 2n buckets by their top bits (one pass to count, one to place),
    then one insertion pass, which only moves entries within a bucket (equal keys,
    the repeats of a tag path, are not moved). Past 8 moves per entry (keys that are
    not spread) the merge sort finishes. Returns the buffer that holds the result."""
    cdef int bits = 6, b
    cdef int64_t i, j, moves = 0, at
    cdef int32_t* counts
    cdef Entry e
    if n < 64:
        return sort_by_key(a, spare, n)
    while bits < 16 and (<int64_t>1 << bits) < 2 * n:
        bits += 1
    counts = <int32_t*>malloc(((<size_t>1 << bits) + 1) * sizeof(int32_t))
    if counts == NULL:
        return sort_by_key(a, spare, n)
    memset(counts, 0, ((<size_t>1 << bits) + 1) * sizeof(int32_t))
    for i in range(n):
        counts[(a[i].key >> (64 - bits)) + 1] += 1
    for b in range(1 << bits):
        counts[b + 1] += counts[b]
    for i in range(n):
        at = counts[a[i].key >> (64 - bits)]
        counts[a[i].key >> (64 - bits)] = <int32_t>(at + 1)
        spare[at] = a[i]
    free(counts)
    for i in range(1, n):
        if spare[i - 1].key > spare[i].key:
            e = spare[i]
            j = i
            while j > 0 and spare[j - 1].key > e.key:
                spare[j] = spare[j - 1]
                j -= 1
                moves += 1
            spare[j] = e
            if moves > 8 * n:  # (the order of equal keys is still the walk's)
                return sort_by_key(spare, a, n)
    return spare
