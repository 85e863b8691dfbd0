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
from libc.stdlib cimport free, realloc

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


# -- the parts of a page's JSON documents ----------------------------------------------------

cdef extern from "Python.h":
    int Py_EnterRecursiveCall(const char* where) except -1
    void Py_LeaveRecursiveCall()


cdef class _Leaves:
    """The leaves of JSON documents hashed as they are met (``parts.json_parts``): the
    first ``limit - 1`` as ``(key, text)`` hashes, the others kept as ``(path, value)``
    until it is known whether they are one part (more than ``limit`` leaves) or not."""

    cdef uint64_t* keys
    cdef uint64_t* texts
    cdef Py_ssize_t count, cap, limit
    cdef uint64_t salt
    cdef dict path_hashes  # path -> xxh3 of its UTF-8 (this call's: paths repeat)
    cdef dict seen  # parts._BOOKKEEPING_SEEN, read here before calling ...
    cdef object bookkeeping  # ... parts._bookkeeping
    cdef object hash_bytes  # xxhash.xxh3_64_intdigest
    cdef list rest  # (path, value) of the leaves from limit - 1 on

    def __dealloc__(self):
        free(self.keys)
        free(self.texts)

    cdef uint64_t key_of(self, str path) except? 0:
        known = self.path_hashes.get(path)
        if known is None:
            known = self.hash_bytes(path.encode("utf-8", "replace"))
            self.path_hashes[path] = known
        return <uint64_t>known ^ self.salt

    cdef int add(self, str path, bytes value) except -1:
        cdef uint64_t* grown
        if self.count >= self.limit - 1:
            self.rest.append((path, value))
            self.count += 1
            return 0
        if self.count == self.cap:
            self.cap = self.cap * 2 if self.cap else 64
            grown = <uint64_t*>realloc(self.keys, self.cap * sizeof(uint64_t))
            if grown == NULL:
                raise MemoryError()
            self.keys = grown
            grown = <uint64_t*>realloc(self.texts, self.cap * sizeof(uint64_t))
            if grown == NULL:
                raise MemoryError()
            self.texts = grown
        self.keys[self.count] = self.key_of(path)
        self.texts[self.count] = fmix(
            attribute_hash(<const uint8_t*><char*>value, len(value), 0) ^ self.salt
        )
        self.count += 1
        return 0

    cdef int back_to(self, Py_ssize_t mark) except -1:
        """Forget the leaves from ``mark`` on."""
        if self.count > self.limit - 1:
            del self.rest[max(mark - (self.limit - 1), 0):]
        self.count = mark
        return 0

    cdef int leaves(self, object doc, str path) except -1:
        """``parts._leaves``: every leaf of ``doc`` but the bookkeeping ones, in document
        order; RecursionError where Python's recursion would end."""
        cdef str inner
        Py_EnterRecursiveCall(" in a JSON document")
        try:
            if isinstance(doc, dict):
                for k, v in (<dict>doc).items():
                    known = self.seen.get(k)
                    if known is None:
                        known = self.bookkeeping(k)
                    if not known:
                        self.leaves(v, f"{path}.{k}")
            elif isinstance(doc, list):
                inner = path + "[]"
                for v in <list>doc:
                    self.leaves(v, inner)
            elif isinstance(doc, str):
                self.add(path, (<str>doc).encode("utf-8", "replace"))
            elif doc is None:
                self.add(path, b"null")
            elif doc is True:
                self.add(path, b"true")
            elif doc is False:
                self.add(path, b"false")
            else:
                self.add(path, repr(doc).encode())
        finally:
            Py_LeaveRecursiveCall()
        return 0


def leaf_parts(
    list documents, Py_ssize_t limit, uint64_t salt, dict seen, bookkeeping, hash_bytes
):
    """``parts.json_parts`` of ``documents``, ``(name, document, text)`` per JSON script
    (the document: ``json.loads`` of the text, or the text where it is no JSON): the
    ``(keys, texts)`` arrays, None for no leaf. See ``parts.py`` for the rules."""
    cdef _Leaves out = _Leaves.__new__(_Leaves)
    cdef Py_ssize_t mark, i
    out.limit, out.salt, out.seen = limit, salt, seen
    out.bookkeeping, out.hash_bytes = bookkeeping, hash_bytes
    out.path_hashes, out.rest = {}, []
    for name, doc, text in documents:
        mark = out.count
        try:
            out.leaves(doc, name)
        except RecursionError:  # as deep as json.loads could go: the text as one part
            out.back_to(mark)
            out.leaves(text, name)
    if out.count == 0:
        return None
    rest = out.rest
    if out.count > limit:  # the rest as one part
        out.rest = []
        out.count = limit - 1
        out.limit = limit + 1
        out.add("\x00rest", b"\x00".join([value for _, value in rest]))
    else:
        out.count = limit - 1 if out.count > limit - 1 else out.count
        out.limit = limit + 1
        out.rest = []
        for path, value in rest:
            out.add(path, value)
    keys = np.empty(out.count, dtype=np.uint64)
    texts = np.empty(out.count, dtype=np.uint64)
    cdef uint64_t[::1] kv = keys
    cdef uint64_t[::1] tv = texts
    for i in range(out.count):
        kv[i] = out.keys[i]
        tv[i] = out.texts[i]
    return keys, texts
