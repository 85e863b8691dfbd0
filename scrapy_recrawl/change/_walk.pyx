# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The element walk of :mod:`scrapy_recrawl.change.elements`, compiled.

One pass over lxml's tree in C (libxml2's ``xmlNode`` structs, reached through
lxml's public C API): every element's tag-path key, own-text hash and
attribute hash, and the hashes of the visible words in reading order. No
Python object is made per element or per word, which is what keeps a page's
signature within a small multiple of lxml's parse (``bench/change_detection.py``).

The hashing rules are the module docstring of ``elements.py``; the byte-span,
sequence and attribute hashes are ``_hashes.pxd``'s, the ones of ``shingles.py``
(same constants, same results), so text hashed there and a page hashed here agree.
What the walk hands over is hashed further by ``_hashes.pyx`` (JSON leaves, the
shingle simhash).
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, strcmp

from lxml.includes cimport tree
cimport lxml.includes.etreepublic as cetree

from ._hashes cimport (
    LEN_MIX,
    SEQ_BASE,
    attribute_hash,
    fmix,
    sequence_hash,
    span_hash,
)

import numpy as np

cetree.import_lxml__etree()

# -- the walk's own hash constants (the shared ones: _hashes.pxd) -------------------------

cdef uint64_t LEVEL_MUL = 0xD6E8FEB86659FD93ULL
cdef uint64_t RANK_MUL = 0x9FB21C651E98DF25ULL
# salts of the data parts (data-* values, <meta content>): keys unlike any element's
cdef uint64_t DATA_SALT = 0xA54FF53A5F1D36F1ULL
cdef uint64_t META_SALT = 0x3C6EF372FE94F82BULL

# -- growable arrays ---------------------------------------------------------------------

cdef struct Vec:
    uint64_t* data
    int64_t size
    int64_t cap


cdef int vec_push(Vec* v, uint64_t x) except -1 nogil:
    cdef uint64_t* grown
    if v.size == v.cap:
        v.cap = v.cap * 2 if v.cap else 256
        grown = <uint64_t*>realloc(v.data, v.cap * sizeof(uint64_t))
        if grown == NULL:
            with gil:
                raise MemoryError()
        v.data = grown
    v.data[v.size] = x
    v.size += 1
    return 0


cdef object vec_array(Vec* v):
    out = np.empty(v.size, dtype=np.uint64)
    cdef uint64_t[::1] view = out
    if v.size:
        memcpy(&view[0], v.data, v.size * sizeof(uint64_t))
    return out


cdef struct Bytes:
    uint8_t* data
    size_t size
    size_t cap


cdef int bytes_reserve(Bytes* b, size_t extra) except -1 nogil:
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


cdef int bytes_add(Bytes* b, const uint8_t* p, size_t n) except -1 nogil:
    bytes_reserve(b, n)
    memcpy(b.data + b.size, p, n)
    b.size += n
    return 0


# -- the walk ----------------------------------------------------------------------------

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
    Bytes word  # the word being read (may span text nodes)
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


#: Elements skipped with their content (their tails are read): scripts and styles,
#: and what no reader sees (asset links with build hashes, CSRF <meta> tokens).
#: Comments and processing instructions are dropped by the parser.
NOISE_TAGS = ("script", "style", "template", "link", "meta", "base")
cdef list _noise_names = [t.encode("ascii") for t in NOISE_TAGS]  # keeps the bytes alive
cdef const char* NOISE[8]
cdef int N_NOISE = len(_noise_names)


cdef void _point_at_noise_names():
    cdef bytes name
    cdef int i
    for i in range(N_NOISE):
        name = _noise_names[i]
        NOISE[i] = name


_point_at_noise_names()


cdef inline bint is_noise(const uint8_t* name) noexcept nogil:
    cdef int i
    for i in range(N_NOISE):
        if strcmp(<const char*>name, NOISE[i]) == 0:
            return True
    return False


cdef inline uint8_t lower(uint8_t c) noexcept nogil:
    return c | 0x20 if 65 <= c <= 90 else c


cdef inline int matches(const uint8_t* name, const char* word) noexcept nogil:
    """1: ``word`` (lowercase) is a prefix of ``name`` in any case, 2: all of it, 0: neither."""
    cdef size_t i = 0
    while word[i]:
        if lower(name[i]) != <uint8_t>word[i]:
            return 0
        i += 1
    return 2 if name[i] == 0 else 1


cdef size_t attribute_bytes(Walk* w, tree.xmlAttr* a) except? 0 nogil:
    """Put ``name="value`` of ``a`` in ``w.attr``; return where the value starts."""
    cdef size_t n = 0, value_at
    cdef tree.xmlNode* t
    w.attr.size = 0
    while a.name[n]:
        n += 1
    bytes_add(&w.attr, <const uint8_t*>a.name, n)
    bytes_add(&w.attr, <const uint8_t*>b'="', 2)
    value_at = w.attr.size
    t = a.children
    while t != NULL:
        if t.content != NULL:
            n = 0
            while t.content[n]:
                n += 1
            bytes_add(&w.attr, <const uint8_t*>t.content, n)
        t = t.next
    return value_at


cdef bint noise_attribute(const uint8_t* name) noexcept nogil:
    """Attributes that are noise by name: on*, data-*, nonce, integrity (any case)."""
    return (
        matches(name, b"on") != 0
        or matches(name, b"data-") != 0
        or matches(name, b"nonce") == 2
        or matches(name, b"integrity") == 2
    )


cdef inline int add_word(Walk* w, uint64_t h) except -1 nogil:
    """A word's hash into the words and the current text piece."""
    cdef Frame* f = &w.stack[w.depth - 1]
    vec_push(&w.words, h)
    f.seq += h * f.power
    f.power *= SEQ_BASE
    f.words += 1
    return 0


cdef int end_word(Walk* w) except -1 nogil:
    """Hash the word kept across text nodes (if any)."""
    if w.word.size == 0:
        return 0
    add_word(w, span_hash(w.word.data, w.word.size))
    w.word.size = 0
    return 0


cdef int end_piece(Walk* w) except -1 nogil:
    """Close the current text piece of the innermost element (words end too)."""
    cdef Frame* f
    cdef uint64_t h
    end_word(w)
    f = &w.stack[w.depth - 1]
    if f.words:
        h = sequence_hash(f.seq, f.words) + <uint64_t>f.pieces * RANK_MUL
        w.texts.data[f.index] += fmix(h)
        f.pieces += 1
    f.seq = 0
    f.power = 1
    f.words = 0
    return 0


cdef inline bint separates(const uint8_t* p) noexcept nogil:
    """ASCII whitespace and control characters, and U+00A0, separate words."""
    return p[0] <= 32 or (p[0] == 0xC2 and p[1] == 0xA0)


cdef int read_text(Walk* w, const uint8_t* p) except -1 nogil:
    """The words of a text node. A word that touches either end of the node is
    kept in ``w.word``: it may go on in the next text node (after a skipped
    noise element); any other word is hashed in place."""
    cdef size_t i = 0, start
    while p[i]:
        if separates(p + i):
            end_word(w)
            i += 1 if p[i] <= 32 else 2
            continue
        start = i
        while p[i] and not separates(p + i):
            i += 1
        if w.word.size or p[i] == 0:
            bytes_add(&w.word, p + start, i - start)
        else:
            add_word(w, span_hash(p + start, i - start))
    return 0


cdef int open_element(Walk* w, tree.xmlNode* node) except -1 nogil:
    """Hash an element's tag and attributes and push it on the stack."""
    cdef const uint8_t* name = <const uint8_t*>node.name
    cdef size_t n = 0
    cdef uint64_t code, key, attrs = 0, data = 0
    cdef tree.xmlAttr* a
    cdef size_t value_at
    cdef Frame* f
    cdef Frame* grown
    cdef bint mute, is_time
    while name[n]:
        n += 1
    code = fmix(span_hash(name, n))
    key = fmix(code + <uint64_t>w.depth * LEVEL_MUL)
    mute = False
    if w.depth:
        key += w.stack[w.depth - 1].key
        mute = w.stack[w.depth - 1].mute
    is_time = matches(name, b"time") == 2
    a = node.properties
    while a != NULL:
        if is_time and matches(<const uint8_t*>a.name, b"datetime") == 2:
            # <time datetime="2025-12-14">18 days ago</time>: the attribute is the date,
            # the text its rendering relative to now (it changes every day): not read
            mute = True
        if not noise_attribute(<const uint8_t*>a.name):
            value_at = attribute_bytes(w, a)
            attrs += attribute_hash(w.attr.data, w.attr.size, value_at)
        elif matches(<const uint8_t*>a.name, b"data-") == 1:
            # data-price="19.99": what a scraper reads, kept apart from the attributes (a
            # part of its own, see walk()); valueless ones (Vue's data-v-<hash>) are markup
            value_at = attribute_bytes(w, a)
            if w.attr.size > value_at:
                data += attribute_hash(w.attr.data, w.attr.size, value_at)
        a = a.next
    if w.depth == w.cap:
        w.cap *= 2
        grown = <Frame*>realloc(w.stack, w.cap * sizeof(Frame))
        if grown == NULL:
            with gil:
                raise MemoryError()
        w.stack = grown
    f = &w.stack[w.depth]
    w.depth += 1
    f.child = node.children
    f.index = w.keys.size
    f.key = key
    f.seq = 0
    f.power = 1
    f.words = 0
    f.pieces = 0
    f.mute = mute
    f.data = data
    vec_push(&w.keys, key)
    vec_push(&w.codes, code)
    vec_push(&w.texts, 0)
    vec_push(&w.attrs, attrs)
    return 0


#: Meta names and JSON keys that are no page data, folded (lowercase, letters and digits
#: only: "X-CSRF-Token" is "xcsrftoken"): per-request bookkeeping (nonces, CSRF tokens,
#: trace ids, session, request and user ids) and presentation or crawler hints
BOOKKEEPING = (
    "nonce", "token", "csrf", "xsrf", "trace", "baggage", "sentry", "session",
    "requestid", "userid", "timestamp", "buildid", "viewport", "themecolor",
    "colorscheme", "formatdetection", "generator", "referrer", "robots", "googlebot",
    "msapplication", "applemobile", "mobileweb", "handheldfriendly", "verification",
)
cdef list _bookkeeping_names = [t.encode("ascii") for t in BOOKKEEPING]
cdef const char* BOOKKEEPING_C[32]
cdef int N_BOOKKEEPING = len(_bookkeeping_names)


cdef void _point_at_bookkeeping():
    cdef bytes name
    cdef int i
    for i in range(N_BOOKKEEPING):
        name = _bookkeeping_names[i]
        BOOKKEEPING_C[i] = name


_point_at_bookkeeping()


cdef bint bookkeeping(Walk* w, const uint8_t* p, size_t n) except -1 nogil:
    """Whether a name, folded into ``w.name``, contains a ``BOOKKEEPING`` word."""
    cdef size_t i, j
    cdef uint8_t c
    cdef int k
    cdef const char* word
    w.name.size = 0
    for i in range(n):
        c = lower(p[i])
        if (48 <= c <= 57) or (97 <= c <= 122):
            bytes_add(&w.name, &c, 1)
    for k in range(N_BOOKKEEPING):
        word = BOOKKEEPING_C[k]
        for i in range(w.name.size):
            j = 0
            while word[j] and i + j < w.name.size and w.name.data[i + j] == <uint8_t>word[j]:
                j += 1
            if word[j] == 0:
                return True
    return False


cdef int meta_part(Walk* w, tree.xmlNode* node) except -1 nogil:
    """The part of a ``<meta content>`` with a ``name``, ``property`` or ``itemprop``
    (``product:price:amount``, ``og:title``, ``itemprop=price``): keyed by that name,
    valued by the content, tokens left out as in attribute values. ``http-equiv`` metas
    (HTTP headers) and bookkeeping names (``BOOKKEEPING``) are not read."""
    cdef tree.xmlAttr* a = node.properties
    cdef uint64_t ident = 0, content = 0
    cdef size_t value_at
    cdef bint has_content = False, has_name = False
    while a != NULL:
        if matches(<const uint8_t*>a.name, b"content") == 2:
            value_at = attribute_bytes(w, a)
            content = attribute_hash(w.attr.data + value_at, w.attr.size - value_at, 0)
            has_content = True
        elif not has_name and (
            matches(<const uint8_t*>a.name, b"name") == 2
            or matches(<const uint8_t*>a.name, b"property") == 2
            or matches(<const uint8_t*>a.name, b"itemprop") == 2
        ):
            value_at = attribute_bytes(w, a)
            if w.attr.size > value_at:
                if bookkeeping(w, w.attr.data + value_at, w.attr.size - value_at):
                    return 0
                ident = span_hash(w.attr.data + value_at, w.attr.size - value_at)
                ident = fmix(ident ^ <uint64_t>(w.attr.size - value_at) * LEN_MIX)
                has_name = True
        a = a.next
    if has_content and has_name:
        vec_push(&w.part_keys, ident ^ META_SALT)
        vec_push(&w.part_texts, fmix(content ^ META_SALT))
    return 0


cdef bint json_script(tree.xmlNode* node) noexcept nogil:
    """A ``<script>`` whose ``type`` mentions JSON (detector.py checks the type itself)."""
    cdef tree.xmlAttr* a = node.properties
    cdef tree.xmlNode* t
    cdef size_t i
    while a != NULL:
        if matches(<const uint8_t*>a.name, b"type") == 2:
            t = a.children
            while t != NULL:
                if t.content != NULL:
                    i = 0
                    while t.content[i]:
                        if matches(<const uint8_t*>t.content + i, b"json"):
                            return True
                        i += 1
                t = t.next
            return False
        a = a.next
    return False


cdef int walk_tree(Walk* w, tree.xmlNode* root) except -1 nogil:
    cdef tree.xmlNode* node
    cdef Frame* f
    open_element(w, root)
    while w.depth:
        f = &w.stack[w.depth - 1]
        node = f.child
        if node == NULL:  # the element ends
            end_piece(w)
            if f.data and w.texts.data[f.index]:  # data-* of an element with text
                vec_push(&w.part_keys, f.key + DATA_SALT)
                vec_push(&w.part_texts, fmix(f.data ^ DATA_SALT))
            w.depth -= 1
            continue
        f.child = node.next
        if node.type == tree.XML_TEXT_NODE or node.type == tree.XML_CDATA_SECTION_NODE:
            if node.content != NULL and not f.mute:
                read_text(w, <const uint8_t*>node.content)
        elif node.type == tree.XML_ELEMENT_NODE:
            if not is_noise(<const uint8_t*>node.name):
                end_piece(w)  # a child element ends the current piece of its parent
                open_element(w, node)
            elif matches(<const uint8_t*>node.name, b"meta") == 2:
                meta_part(w, node)
            elif matches(<const uint8_t*>node.name, b"script") == 2 and json_script(node):
                vec_push(&w.data_nodes, <uint64_t><size_t>node)
    return 0


def walk(cetree._Element root not None):
    """``(keys, codes, texts, attrs, words, elements, data)`` of the tree under ``root``.

    Per element in document order: ``keys`` the running tag-path sum (not yet
    mixed), ``codes`` the tag hash, ``texts`` the sum of its mixed text pieces
    (0: no own text), ``attrs`` the sum of its attribute hashes (0: none);
    ``words`` the word hashes in reading order. Elements named in
    ``NOISE_TAGS`` are skipped with their content (their tails are read).

    After the ``elements`` elements, the arrays hold the data parts (code 0, attrs 0),
    compared apart from the markup: one part per element with own text and ``data-*`` attributes with a value
    (noise as attributes, but what a scraper reads: ``data-price="19.99"``), and one
    per ``<meta content>`` (see ``meta_part``; ``<meta>`` is noise as an element).
    ``data``: the JSON ``<script>`` elements met on the way (not walked), for their
    parts (detector.py), so they need no second pass.
    """
    cdef Walk w
    w.depth = 0
    w.cap = 64
    w.stack = <Frame*>malloc(w.cap * sizeof(Frame))
    if w.stack == NULL:
        raise MemoryError()
    w.word = Bytes(NULL, 0, 0)
    w.attr = Bytes(NULL, 0, 0)
    w.words = Vec(NULL, 0, 0)
    w.keys = Vec(NULL, 0, 0)
    w.codes = Vec(NULL, 0, 0)
    w.texts = Vec(NULL, 0, 0)
    w.attrs = Vec(NULL, 0, 0)
    w.part_keys = Vec(NULL, 0, 0)
    w.part_texts = Vec(NULL, 0, 0)
    w.data_nodes = Vec(NULL, 0, 0)
    w.name = Bytes(NULL, 0, 0)
    cdef int64_t i, elements
    try:
        if root._c_node.type == tree.XML_ELEMENT_NODE and not is_noise(
            <const uint8_t*>root._c_node.name
        ):
            with nogil:
                walk_tree(&w, root._c_node)
        elements = w.keys.size
        for i in range(w.part_keys.size):
            vec_push(&w.keys, w.part_keys.data[i])
            vec_push(&w.codes, 0)
            vec_push(&w.texts, w.part_texts.data[i])
            vec_push(&w.attrs, 0)
        return (
            vec_array(&w.keys),
            vec_array(&w.codes),
            vec_array(&w.texts),
            vec_array(&w.attrs),
            vec_array(&w.words),
            elements,
            [
                cetree.elementFactory(root._doc, <tree.xmlNode*><size_t>w.data_nodes.data[i])
                for i in range(w.data_nodes.size)
            ],
        )
    finally:
        free(w.stack)
        free(w.word.data)
        free(w.attr.data)
        free(w.words.data)
        free(w.keys.data)
        free(w.codes.data)
        free(w.texts.data)
        free(w.attrs.data)
        free(w.part_keys.data)
        free(w.part_texts.data)
        free(w.data_nodes.data)
        free(w.name.data)
