# cython: language_level=3
"""The words of a text node, found and hashed in one pass: the walk's inner loop.

A word is a run of bytes that are not separators (``separates``: ASCII whitespace
and control characters, U+00A0). :func:`word_end` finds where a word ends and
hashes it as it goes: the hash is ``_hashes.pxd``'s ``span_hash`` of the word's
bytes (= ``shingles.span_hashes(..., mix=False)``), computed from the same 8-byte
reads that find the word's end. Where the machine is little-endian, 8 bytes are
tested at once (a word is 6 bytes on average, so most words take one read); the
last 7 bytes of a text, and a byte 0xC2 that does not start U+00A0, are read one
by one, as everything is on a big-endian machine.
"""

from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

from ._hashes cimport CHUNK_MUL, LITTLE_ENDIAN, fmix

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SR_CTZ64(x) __builtin_ctzll(x)
    #else
    static int SR_CTZ64(unsigned long long x) {
        int n = 0;
        while (!(x & 1)) { x >>= 1; n++; }
        return n;
    }
    #endif
    #define SR_ONES 0x0101010101010101ULL
    #define SR_HIGHS 0x8080808080808080ULL
    """
    int ctz64 "SR_CTZ64"(uint64_t x) noexcept nogil
    const uint64_t ONES "SR_ONES"
    const uint64_t HIGHS "SR_HIGHS"


cdef inline bint separates(const uint8_t* p) noexcept nogil:
    """ASCII whitespace and control characters, and U+00A0, separate words."""
    return p[0] <= 32 or (p[0] == 0xC2 and p[1] == 0xA0)


cdef inline uint64_t special_bytes(uint64_t x) noexcept nogil:
    """The high bit of every byte of ``x`` (little-endian) that is at most 0x20 or is 0xC2
    (the lead byte of U+00A0). Exact for the lowest such byte, which is all that is read
    (a borrow may mark bytes above it)."""
    cdef uint64_t y = x ^ (0xC2 * ONES)
    return ((x - 0x21 * ONES) & ~x & HIGHS) | ((y - ONES) & ~y & HIGHS)


cdef inline size_t word_end(
    const uint8_t* p, size_t i, size_t n, uint64_t* hash
) noexcept nogil:
    """Where the word starting at ``p[i]`` (not a separator) ends, ``n`` at the latest
    (``p[n]`` is the text's NUL); its ``span_hash`` in ``hash``.

    span_hash: up to 8 bytes, the bytes as a little-endian integer; longer, the sum of
    ``fmix`` of chunk 0 and of ``chunk k + 8k * CHUNK_MUL`` for the next 8-byte
    chunks, the last one zero-filled."""
    cdef size_t k, off = 0  # off: where the current chunk starts in the word
    cdef uint64_t x, m, chunk, first = 0, acc = 0
    if LITTLE_ENDIAN:
        while i + 7 <= n:  # the 8 bytes read lie within the text and its NUL
            memcpy(&x, p + i, 8)
            m = special_bytes(x)
            if m == 0:  # 8 word bytes: a whole chunk
                if off == 0:
                    first = x
                else:
                    acc += fmix(x + <uint64_t>off * CHUNK_MUL)
                off += 8
                i += 8
                continue
            k = ctz64(m) >> 3
            if p[i + k] == 0xC2 and p[i + k + 1] != 0xA0:
                break  # 0xC2 in a word (U+0080..U+00BF): the rest byte by byte
            if k == 0 and off == 8:
                hash[0] = first  # exactly 8 bytes: the bytes themselves
            elif off == 0:
                hash[0] = x & ((<uint64_t>1 << (8 * k)) - 1)
            else:
                acc += fmix(first)
                if k:
                    chunk = x & ((<uint64_t>1 << (8 * k)) - 1)
                    acc += fmix(chunk + <uint64_t>off * CHUNK_MUL)
                hash[0] = acc
            return i + k
    # byte by byte, from the start of the current chunk
    chunk = 0
    k = 0
    while p[i] and not separates(p + i):
        chunk |= (<uint64_t>p[i]) << (8 * k)
        k += 1
        i += 1
        if k == 8:
            if off == 0:
                first = chunk
            else:
                acc += fmix(chunk + <uint64_t>off * CHUNK_MUL)
            off += 8
            chunk = 0
            k = 0
    if off == 0:
        hash[0] = chunk
    elif off == 8 and k == 0:
        hash[0] = first
    else:
        acc += fmix(first)
        if k:
            acc += fmix(chunk + <uint64_t>off * CHUNK_MUL)
        hash[0] = acc
    return i
