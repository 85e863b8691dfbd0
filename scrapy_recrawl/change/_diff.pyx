# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The element diff of :func:`scrapy_recrawl.change.elements.diff`, compiled.

Linear time: the multiset matchings are counted in an open-addressing hash
table (element hashes are already well mixed), not sorted. Identical elements in
the same place are first matched key by key along the two sorted arrays (a key's
elements the same on both sides: all matched, no table), so the table only holds
what differs.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset
from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_FORMAT,
    PyBuffer_Release,
    PyObject_GetBuffer,
)

from ._sort cimport Entry, sort_by_key_bucketed
from .signature import ChangeResult

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SR_POPCOUNT64(x) __builtin_popcountll(x)
    #else
    static int SR_POPCOUNT64(unsigned long long x) {
        int n = 0;
        while (x) { x &= x - 1; n++; }
        return n;
    }
    #endif
    """
    int popcount64 "SR_POPCOUNT64"(uint64_t x) noexcept nogil

_new = object.__new__

cdef enum:
    SMALL_GROUP = 16  # a key with at most this many new elements is matched without a table

cdef uint64_t TEXT_SALT = 0x2545F4914F6CDD1DULL
cdef uint64_t KEY_SALT = 0x81DADEF4BC2DD44DULL


cdef struct Slot:
    uint64_t value
    int32_t olds  # copies on the old side ...
    int32_t news  # ... and on the new side (a slot with neither is free)
    int32_t seen_old  # copies met so far in document order
    int32_t seen_new


cdef Slot* slot_of(Slot* table, uint64_t mask, uint64_t v) noexcept nogil:
    """The slot of ``v``; a free one is taken (the caller counts a copy in it at once)."""
    cdef uint64_t i = (v ^ (v >> 29)) & mask
    while (table[i].olds or table[i].news) and table[i].value != v:
        i = (i + 1) & mask
    table[i].value = v
    return &table[i]


cdef int64_t leftovers(
    const uint64_t* ids_old, int64_t* old, int64_t n_old,
    const uint64_t* ids_new, int64_t* new, int64_t n_new,
    int64_t* n_new_left,
) except -1 nogil:
    """Multiset intersection of ``ids[old]`` and ``ids[new]`` (index lists, ascending).

    The n-th copy of a value on one side matches the n-th on the other; the
    unmatched indices are compacted in place, still ascending. Returns the
    old side's count left (the new side's in ``n_new_left``).
    """
    cdef uint64_t size = 16, mask
    cdef Slot* table
    cdef Slot* s
    cdef int64_t i, kept
    while size < <uint64_t>(2 * (n_old + n_new)):
        size <<= 1
    mask = size - 1
    table = <Slot*>calloc(size, sizeof(Slot))
    if table == NULL:
        with gil:
            raise MemoryError()
    for i in range(n_old):
        slot_of(table, mask, ids_old[old[i]]).olds += 1
    for i in range(n_new):
        slot_of(table, mask, ids_new[new[i]]).news += 1
    kept = 0
    for i in range(n_old):
        s = slot_of(table, mask, ids_old[old[i]])
        if s.seen_old >= s.news:
            old[kept] = old[i]
            kept += 1
        s.seen_old += 1
    n_new_left[0] = 0
    for i in range(n_new):
        s = slot_of(table, mask, ids_new[new[i]])
        if s.seen_new >= s.olds:
            new[n_new_left[0]] = new[i]
            n_new_left[0] += 1
        s.seen_new += 1
    free(table)
    return kept


cdef int64_t same_place(
    const uint64_t* ok, const uint64_t* ids_old, int64_t* old, int64_t n_old,
    const uint64_t* nk, const uint64_t* ids_new, int64_t* new, int64_t n_new,
    int64_t* n_new_left,
) except -1 nogil:
    """``leftovers`` of all elements (``old``, ``new``: 0, 1, 2...) by ``ids`` that hold
    the key, key by key along the arrays (sorted by key): a key on one side only leaves
    all its elements; a key with the same ids in the same order on both sides, none;
    any other key's elements go through ``leftovers``, which only they fill."""
    cdef int64_t i = 0, j = 0, i1, j1, k, m, lo = 0, ln = 0, left_old, left_new
    cdef bint same
    cdef uint8_t taken[SMALL_GROUP]
    while i < n_old or j < n_new:
        if j == n_new or (i < n_old and ok[i] < nk[j]):
            old[lo] = i
            lo += 1
            i += 1
        elif i == n_old or nk[j] < ok[i]:
            new[ln] = j
            ln += 1
            j += 1
        else:
            i1 = i + 1
            while i1 < n_old and ok[i1] == ok[i]:
                i1 += 1
            j1 = j + 1
            while j1 < n_new and nk[j1] == nk[j]:
                j1 += 1
            same = i1 - i == j1 - j
            k = 0
            while same and k < i1 - i:
                same = ids_old[i + k] == ids_new[j + k]
                k += 1
            if not same and j1 - j <= SMALL_GROUP:
                # few on the new side: each old element takes the first free equal new one
                # (the n-th copy of a value matches the n-th: what leftovers() counts)
                memset(taken, 0, j1 - j)
                for k in range(i, i1):
                    m = j
                    while m < j1 and (taken[m - j] or ids_new[m] != ids_old[k]):
                        m += 1
                    if m < j1:
                        taken[m - j] = 1
                    else:
                        old[lo] = k
                        lo += 1
                for m in range(j, j1):
                    if not taken[m - j]:
                        new[ln] = m
                        ln += 1
            elif not same:
                for k in range(i, i1):
                    old[lo + k - i] = k
                for k in range(j, j1):
                    new[ln + k - j] = k
                left_old = leftovers(
                    ids_old, old + lo, i1 - i, ids_new, new + ln, j1 - j, &left_new
                )
                lo += left_old
                ln += left_new
            i, j = i1, j1
    n_new_left[0] = ln
    return lo


cdef int counts(
    const uint64_t* ok, const uint64_t* ot, const uint64_t* oa, int64_t n_old,
    const uint64_t* nk, const uint64_t* nt, const uint64_t* na, int64_t n_new,
    int64_t* out,
) except -1:
    """``out[:4] = (added, removed, modified, attributes)``; the rules are elements.diff's."""
    cdef int64_t i, j, lo, ln, pairs = 0
    cdef int64_t modified = 0, attributes = 0
    cdef uint64_t* ids_old = <uint64_t*>malloc((2 * n_old + 1) * sizeof(uint64_t))
    cdef uint64_t* ids_new = <uint64_t*>malloc((2 * n_new + 1) * sizeof(uint64_t))
    cdef int64_t* old = <int64_t*>malloc((n_old + 1) * sizeof(int64_t))
    cdef int64_t* new = <int64_t*>malloc((n_new + 1) * sizeof(int64_t))
    try:
        if ids_old == NULL or ids_new == NULL or old == NULL or new == NULL:
            raise MemoryError()
        with nogil:
            # identity: own text (with the tag) and attributes; in the same place: + key
            for i in range(n_old):
                ids_old[n_old + i] = ot[i] * TEXT_SALT + oa[i]
                ids_old[i] = ids_old[n_old + i] + ok[i] * KEY_SALT
            for i in range(n_new):
                ids_new[n_new + i] = nt[i] * TEXT_SALT + na[i]
                ids_new[i] = ids_new[n_new + i] + nk[i] * KEY_SALT
            # 1. identical elements in the same place, 2. identical elements anywhere
            lo = same_place(ok, ids_old, old, n_old, nk, ids_new, new, n_new, &ln)
            lo = leftovers(ids_old + n_old, old, lo, ids_new + n_new, new, ln, &ln)
            # 3. the n-th leftover of a key on one side with the n-th on the other
            # (both sides are sorted by key, document order within a key)
            i = j = 0
            while i < lo and j < ln:
                if ok[old[i]] < nk[new[j]]:
                    i += 1
                elif ok[old[i]] > nk[new[j]]:
                    j += 1
                else:
                    pairs += 1
                    modified += ot[old[i]] != nt[new[j]]
                    attributes += oa[old[i]] != na[new[j]]
                    i += 1
                    j += 1
        out[0], out[1], out[2], out[3] = ln - pairs, lo - pairs, modified, attributes
        return 0
    finally:
        free(ids_old)
        free(ids_new)
        free(old)
        free(new)


def diff(
    const uint64_t[::1] ok, const uint64_t[::1] ot, const uint64_t[::1] oa,
    const uint64_t[::1] nk, const uint64_t[::1] nt, const uint64_t[::1] na,
):
    """``(added, removed, modified, attributes)``; the rules are elements.diff's."""
    cdef int64_t n_old = ok.shape[0], n_new = nk.shape[0]
    cdef int64_t out[4]
    cdef uint64_t dummy = 0
    if ot.shape[0] != n_old or oa.shape[0] != n_old or nt.shape[0] != n_new or (
        na.shape[0] != n_new
    ):
        raise ValueError("keys, texts and attrs must have the same length")
    counts(
        &ok[0] if n_old else &dummy, &ot[0] if n_old else &dummy, &oa[0] if n_old else &dummy,
        n_old,
        &nk[0] if n_new else &dummy, &nt[0] if n_new else &dummy, &na[0] if n_new else &dummy,
        n_new,
        out,
    )
    return out[0], out[1], out[2], out[3]


# -- the comparison of two HTML signatures, in one call ------------------------------------

cdef int take(object array, Py_buffer* view) except -1:
    """``array``'s buffer: one dimension of 8-byte unsigned integers, C-contiguous."""
    cdef const char* fmt
    PyObject_GetBuffer(array, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    fmt = view.format
    if fmt != NULL and (fmt[0] == b"<" or fmt[0] == b"=" or fmt[0] == b"@"):
        fmt += 1
    if view.ndim != 1 or view.itemsize != 8 or fmt == NULL or (
        (fmt[0] != b"L" and fmt[0] != b"Q") or fmt[1] != 0
    ):
        PyBuffer_Release(view)
        raise ValueError("expected a one-dimensional uint64 array")
    return 0


def compare(old, new, int64_t max_distance, int64_t min_changes):
    """:meth:`ChangeDetector.compare` of two HTML signatures (``simhash`` set on both), no
    learned boilerplate, the default rule: ``changed`` when the simhash distance is
    ``max_distance`` or more or the element changes are ``min_changes`` or more. The
    :class:`ChangeResult`, made here (no Python-level call between the signatures and it)."""
    cdef Py_buffer views[6]
    cdef int taken = 0
    cdef int64_t out[4]
    cdef int64_t dist, changes
    cdef uint64_t a = old.simhash, b = new.simhash
    arrays = (old.keys, old.texts, old.attrs, new.keys, new.texts, new.attrs)
    try:
        while taken < 6:
            take(arrays[taken], &views[taken])
            taken += 1
        if views[1].shape[0] != views[0].shape[0] or views[2].shape[0] != views[0].shape[0] or (
            views[4].shape[0] != views[3].shape[0] or views[5].shape[0] != views[3].shape[0]
        ):
            raise ValueError("keys, texts and attrs must have the same length")
        counts(
            <const uint64_t*>views[0].buf, <const uint64_t*>views[1].buf,
            <const uint64_t*>views[2].buf, views[0].shape[0],
            <const uint64_t*>views[3].buf, <const uint64_t*>views[4].buf,
            <const uint64_t*>views[5].buf, views[3].shape[0],
            out,
        )
    finally:
        while taken:
            taken -= 1
            PyBuffer_Release(&views[taken])
    dist = popcount64(a ^ b)
    changes = out[0] + out[1] + out[2] + out[3]
    result = _new(ChangeResult)
    fields = result.__dict__
    fields["changed"] = dist >= max_distance or changes >= min_changes
    fields["distance"] = dist
    fields["added"] = out[0]
    fields["removed"] = out[1]
    fields["modified"] = out[2]
    fields["attributes"] = out[3]
    return result


def key_order(const uint64_t[::1] keys):
    """The order ``_walk.sign`` puts entries with these keys in (indices), as its sort
    (``_sort.pxd``) makes it: = ``numpy.argsort(keys, kind="stable")`` (tests check it,
    the bucketed path and the merge sort it falls back to)."""
    cdef int64_t i, n = keys.shape[0]
    cdef Entry* entries = <Entry*>malloc((n + 1) * sizeof(Entry))
    cdef Entry* spare = <Entry*>malloc((n + 1) * sizeof(Entry))
    cdef Entry* done
    try:
        if entries == NULL or spare == NULL:
            raise MemoryError()
        for i in range(n):
            entries[i].key = keys[i]
            entries[i].text = <uint64_t>i
            entries[i].attr = 0
        done = sort_by_key_bucketed(entries, spare, n)
        return [done[i].text for i in range(n)]
    finally:
        free(entries)
        free(spare)
