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

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset, strcmp, strlen

from lxml.includes cimport tree
cimport lxml.includes.etreepublic as cetree

from ._hashes cimport (
    LEN_MIX,
    SEQ_BASE,
    attribute_hash,
    fmix,
    sequence_hash,
    simhash_of_words,
    span_hash,
)
from ._sort cimport Entry, sort_by_key_bucketed
from ._words cimport ctz64, separates, word_end

import numpy as np

cetree.import_lxml__etree()

_U64 = np.uint64

# -- the walk's own hash constants (the shared ones: _hashes.pxd) -------------------------

cdef uint64_t LEVEL_MUL = 0xD6E8FEB86659FD93ULL
cdef uint64_t RANK_MUL = 0x9FB21C651E98DF25ULL
# salts of the data parts (data-* values, <meta content>): keys unlike any element's
cdef uint64_t DATA_SALT = 0xA54FF53A5F1D36F1ULL
cdef uint64_t META_SALT = 0x3C6EF372FE94F82BULL

# -- the results as numpy arrays (the walk's structures: _walk.pxd) -----------------------

cdef object vec_array(Vec* v):
    out = np.empty(v.size, dtype=np.uint64)
    cdef uint64_t[::1] view = out
    if v.size:
        memcpy(&view[0], v.data, v.size * sizeof(uint64_t))
    return out


# -- the walk ----------------------------------------------------------------------------

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
    if name[0] != b"s" and name[0] != b"t" and name[0] != b"l" and name[0] != b"m" and (
        name[0] != b"b"
    ):  # no noise tag starts otherwise: most elements are told in one test
        return False
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
    cdef size_t n = strlen(<const char*>a.name), value_at
    cdef tree.xmlNode* t
    w.attr.size = 0
    bytes_reserve(&w.attr, n + 2)
    memcpy(w.attr.data, a.name, n)
    w.attr.data[n] = 61  # =
    w.attr.data[n + 1] = 34  # "
    w.attr.size = value_at = n + 2
    t = a.children
    while t != NULL:
        if t.content != NULL:
            bytes_add(&w.attr, <const uint8_t*>t.content, strlen(<const char*>t.content))
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
    if w.word.size:
        add_word(w, span_hash(w.word.data, w.word.size))
        w.word.size = 0
    elif w.open_size:
        add_word(w, w.open_hash)
        w.open_size = 0
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


cdef int read_text(Walk* w, const uint8_t* p) except -1 nogil:
    """The words of a text node. A word that touches either end of the node may go on
    in the next text node (after a skipped noise element): one that ends the node is
    kept open (``w.open_word``: where it is, hashed already), one that goes on from
    the last node is gathered in ``w.word``; any other word is hashed in place."""
    cdef size_t n = strlen(<const char*>p), i = 0, end
    cdef uint64_t h
    if n == 0:
        return 0
    if w.word.size or w.open_size:  # a word from the last text node: does it go on?
        if separates(p):
            end_word(w)
        else:
            end = word_end(p, 0, n, &h)
            if w.open_size:
                bytes_add(&w.word, w.open_word, w.open_size)
                w.open_size = 0
            bytes_add(&w.word, p, end)
            if end == n:
                return 0
            end_word(w)
            i = end
    # add_word's work, with the frame's sums and the words' array in locals (stores to
    # the array could otherwise be to the frame, for all the compiler knows)
    cdef Frame* f = &w.stack[w.depth - 1]
    cdef uint64_t seq = f.seq, power = f.power
    cdef int64_t count = f.words, size = w.words.size, cap = w.words.cap
    cdef uint64_t* words = w.words.data
    while i < n:
        if p[i] <= 32:
            i += 1
        elif p[i] == 0xC2 and p[i + 1] == 0xA0:
            i += 2
        else:
            end = word_end(p, i, n, &h)
            if end == n:
                w.open_word = p + i
                w.open_size = n - i
                w.open_hash = h
                break
            if size == cap:
                w.words.size = size
                vec_grow(&w.words)
                words, cap = w.words.data, w.words.cap
            words[size] = h
            size += 1
            seq += h * power
            power *= SEQ_BASE
            count += 1
            i = end
    w.words.size = size
    f.seq, f.power, f.words = seq, power, count
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
    if w.depth > w.deepest:
        w.deepest = w.depth
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
# the BOOKKEEPING words that start with each byte, as bits (word k: bit k; static: zeros)
cdef uint32_t STARTING[256]


cdef void _point_at_bookkeeping():
    cdef bytes name
    cdef int i
    for i in range(N_BOOKKEEPING):
        name = _bookkeeping_names[i]
        BOOKKEEPING_C[i] = name
        STARTING[<uint8_t>name[0]] |= (<uint32_t>1) << i


_point_at_bookkeeping()


cdef bint bookkeeping(Walk* w, const uint8_t* p, size_t n) except -1 nogil:
    """Whether a name, folded into ``w.name``, contains a ``BOOKKEEPING`` word."""
    cdef size_t i, j
    cdef uint8_t c
    cdef int k
    cdef uint32_t starting
    cdef const char* word
    w.name.size = 0
    for i in range(n):
        c = lower(p[i])
        if (48 <= c <= 57) or (97 <= c <= 122):
            bytes_add(&w.name, &c, 1)
    for i in range(w.name.size):  # the words that start with the letter there
        starting = STARTING[w.name.data[i]]
        while starting:
            k = ctz64(starting)
            starting &= starting - 1
            word = BOOKKEEPING_C[k]
            j = 1
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
            else:
                if matches(<const uint8_t*>node.name, b"meta") == 2:
                    meta_part(w, node)
                elif matches(<const uint8_t*>node.name, b"script") == 2 and json_script(node):
                    vec_push(&w.data_nodes, <uint64_t><size_t>node)
                if node.children != NULL:
                    w.hidden += has_element(node.children)
    return 0


cdef inline bint has_element(tree.xmlNode* node) noexcept nogil:
    while node != NULL:
        if node.type == tree.XML_ELEMENT_NODE:
            return True
        node = node.next
    return False


cdef int walk_page(Walk* w, cetree._Element root) except -1:
    """Walk the tree under ``root`` into ``w`` (set to zero before), the data parts
    after the elements; the number of elements."""
    cdef int64_t i, elements
    w.cap = 64
    w.stack = <Frame*>malloc(w.cap * sizeof(Frame))
    if w.stack == NULL:
        raise MemoryError()
    if root._c_node.type == tree.XML_ELEMENT_NODE and not is_noise(
        <const uint8_t*>root._c_node.name
    ):
        with nogil:
            walk_tree(w, root._c_node)
    else:
        w.hidden += 1
    elements = w.keys.size
    for i in range(w.part_keys.size):
        vec_push(&w.keys, w.part_keys.data[i])
        vec_push(&w.codes, 0)
        vec_push(&w.texts, w.part_texts.data[i])
        vec_push(&w.attrs, 0)
    return elements


cdef list json_scripts(Walk* w, cetree._Element root):
    cdef int64_t i
    return [
        cetree.elementFactory(root._doc, <tree.xmlNode*><size_t>w.data_nodes.data[i])
        for i in range(w.data_nodes.size)
    ]


cdef void walk_free(Walk* w) noexcept:
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


def walk(cetree._Element root not None):
    """``(keys, codes, texts, attrs, words, elements, data)`` of the tree under ``root``.

    Per element in document order: ``keys`` the running tag-path sum (not yet
    mixed), ``codes`` the tag hash, ``texts`` the sum of its mixed text pieces
    (0: no own text), ``attrs`` the sum of its attribute hashes (0: none);
    ``words`` the word hashes in reading order. Elements named in
    ``NOISE_TAGS`` are skipped with their content (their tails are read).

    After the ``elements`` elements, the arrays hold the data parts (code 0, attrs 0),
    compared apart from the markup: one part per element with own text and ``data-*``
    attributes with a value (noise as attributes, but what a scraper reads:
    ``data-price="19.99"``), and one per ``<meta content>`` (see ``meta_part``;
    ``<meta>`` is noise as an element). ``data``: the JSON ``<script>`` elements met
    on the way (not walked), for their parts (detector.py), so they need no second pass.
    """
    cdef Walk w
    memset(&w, 0, sizeof(Walk))
    try:
        elements = walk_page(&w, root)
        return (
            vec_array(&w.keys),
            vec_array(&w.codes),
            vec_array(&w.texts),
            vec_array(&w.attrs),
            vec_array(&w.words),
            elements,
            json_scripts(&w, root),
        )
    finally:
        walk_free(&w)


cdef enum:
    # Fewer elements open at once than this, on the walked path, and the parser cannot
    # have stopped at its depth limit (256 levels, 2,048 with huge_tree): its error
    # log need not be read (see sign()).
    SHALLOW = 200


def sign(
    cetree._Element root not None,
    more_parts,
    int64_t shingle_size,
    bint keep_words,
    bint every_page=False,
):
    """``(keys, texts, attrs, simhash, words, shallow)`` of the tree under ``root``:
    what ``elements.extract`` describes and ``_hashes.shingle_simhash`` of its words,
    made in C from the walk's arrays (no numpy pass, no sort in numpy).

    The elements that are shown (own text or attributes) and the data parts, their
    keys mixed, their texts mixed with their tag; then the parts ``more_parts``
    makes of the JSON scripts (called when the page has some, or on every page if
    ``every_page``; ``None``: no parts); all sorted by key, in walk order within a
    key. ``simhash``: 0 when ``shingle_size`` is 0; ``words``: the word hashes in
    reading order if ``keep_words``, else None. The three arrays are new and
    read-only. ``shallow``: no more than ``SHALLOW`` elements were ever open at
    once and none was skipped with elements inside, so the tree cannot have
    been cut at the parser's depth limit.
    """
    cdef Walk w
    cdef Entry* entries = NULL
    cdef Entry* spare = NULL
    cdef Entry* done
    cdef const uint64_t[::1] extra_keys
    cdef const uint64_t[::1] extra_texts
    cdef uint64_t[::1] out_keys
    cdef uint64_t[::1] out_texts
    cdef uint64_t[::1] out_attrs
    cdef int64_t i, n = 0, n_extra = 0
    cdef uint64_t simhash = 0
    memset(&w, 0, sizeof(Walk))
    try:
        walk_page(&w, root)
        extra = None
        if more_parts is not None and (w.data_nodes.size or every_page):
            extra = more_parts(json_scripts(&w, root))
        if extra is not None and extra[0].size:
            extra_keys = np.ascontiguousarray(extra[0], dtype=_U64)
            extra_texts = np.ascontiguousarray(extra[1], dtype=_U64)
            n_extra = extra_keys.shape[0]
        entries = <Entry*>malloc((w.keys.size + n_extra + 1) * sizeof(Entry))
        spare = <Entry*>malloc((w.keys.size + n_extra + 1) * sizeof(Entry))
        if entries == NULL or spare == NULL:
            raise MemoryError()
        with nogil:
            # blank elements (no own text, no attributes left) are structure only
            for i in range(w.keys.size):
                if w.texts.data[i] != 0 or w.attrs.data[i] != 0:
                    entries[n].key = fmix(w.keys.data[i])
                    entries[n].text = fmix(w.texts.data[i] ^ w.codes.data[i])
                    entries[n].attr = w.attrs.data[i]
                    n += 1
            for i in range(n_extra):
                entries[n].key = extra_keys[i]
                entries[n].text = extra_texts[i]
                entries[n].attr = 0
                n += 1
            done = sort_by_key_bucketed(entries, spare, n)
            if shingle_size > 0:
                simhash = simhash_of_words(w.words.data, w.words.size, shingle_size)
        keys, texts, attrs = np.empty(n, _U64), np.empty(n, _U64), np.empty(n, _U64)
        out_keys, out_texts, out_attrs = keys, texts, attrs
        for i in range(n):
            out_keys[i] = done[i].key
            out_texts[i] = done[i].text
            out_attrs[i] = done[i].attr
        keys.flags.writeable = texts.flags.writeable = attrs.flags.writeable = False
        words = vec_array(&w.words) if keep_words else None
        return keys, texts, attrs, simhash, words, w.deepest < SHALLOW and w.hidden == 0
    finally:
        walk_free(&w)
        free(entries)
        free(spare)
