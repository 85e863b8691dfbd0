# cython: language_level=3
"""The compiled walk's structures (``_walk.pyx``): growable arrays, the walk's state and
stack frames (the entries of a page's signature and their sort by key: ``_sort.pxd``)."""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport realloc
from libc.string cimport memcpy

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
