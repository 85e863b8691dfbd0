# cython: language_level=3
"""The compiled walk's structures (``_walk.pyx``): growable arrays, the walk's state and
stack frames, and the entries of a page's signature with their sort by key."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

from lxml.includes cimport tree

# -- growable arrays ---------------------------------------------------------------------

cdef struct Vec:
    uint64_t* data
    int64_t size
    int64_t cap


cdef inline int vec_grow(Vec* v) except -1 nogil:
    cdef uint64_t* grown
    v.cap = v.cap * 2 if v.cap else 256
    grown = <uint64_t*>realloc(v.data, v.cap * sizeof(uint64_t))
    if grown == NULL:
        with gil:
            raise MemoryError()
    v.data = grown
    return 0


cdef inline int vec_push(Vec* v, uint64_t x) except -1 nogil:
    if v.size == v.cap:
        vec_grow(v)
    v.data[v.size] = x
    v.size += 1
    return 0


cdef struct Bytes:
    uint8_t* data
    size_t size
    size_t cap


cdef inline int bytes_reserve(Bytes* b, size_t extra) except -1 nogil:
    cdef uint8_t* grown
    cdef size_t cap
    if b.size + extra <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    while cap < b.size + extra:
        cap *= 2
    grown = <uint8_t*>realloc(b.data, cap)
    if grown == NULL:
        with gil:
            raise MemoryError()
    b.data = grown
    b.cap = cap
    return 0


cdef inline int bytes_add(Bytes* b, const uint8_t* p, size_t n) except -1 nogil:
    bytes_reserve(b, n)
    memcpy(b.data + b.size, p, n)
    b.size += n
    return 0


# An element whose children are being visited.
cdef struct Frame:
    tree.xmlNode* child  # next child to visit
    int64_t index  # the element's index in the per-element arrays
    uint64_t key  # running tag-path sum (the element's and its ancestors' (level, tag) hashes)
    uint64_t seq  # the current text piece: sum of word_i * SEQ_BASE**i
    uint64_t power  # SEQ_BASE**(words in the piece)
    int64_t words  # words in the current piece
    int64_t pieces  # pieces with words so far (their rank)
    bint mute  # its text is not read: a <time datetime> (or inside one)
    uint64_t data  # the sum of its data-* attribute hashes (0: none with a value)


cdef struct Walk:
    Frame* stack
    int64_t depth
    int64_t cap
    Bytes word  # a word that spans text nodes, read so far (see read_text())
    const uint8_t* open_word  # a word that ends its text node (it may go on in the next)
    size_t open_size  # its length (0: none)
    uint64_t open_hash  # and its hash, if it does not go on
    Bytes attr  # an attribute as ` name="value` (without the space), to hash
    Vec words  # word hashes, reading order
    Vec keys  # per element: running key, tag code, own text, attributes
    Vec codes
    Vec texts
    Vec attrs
    Vec part_keys  # the data-* parts (see walk())
    Vec part_texts
    Vec data_nodes  # JSON <script> elements (xmlNode pointers): detector.py reads them
    Bytes name  # a meta's name, folded (see bookkeeping())
    int64_t deepest  # the most elements open at once
    int64_t hidden  # skipped elements with elements inside (a <template>), or the root


# -- the sort by key -------------------------------------------------------------------------

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
