# cython: language_level=3
"""The byte-span, sequence and attribute-value hashing of the compiled change detector.

Defined here, inline, so that both compiled modules compile the very same code
into their own loops (no call across modules in the walk's inner loop):
``_walk.pyx`` (the tree walk) and ``_hashes.pyx`` (JSON leaves, shingle simhash)
``cimport`` it. The hashes are the ones of ``shingles.py`` (same constants, same
results), so text hashed there and a page hashed here agree.
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

# Compile-time constants (as shingles.py's); the byte order of the build machine
# decides whether 8 bytes can be loaded with one memcpy.
cdef extern from *:
    """
    #define SR_FMIX1 0xFF51AFD7ED558CCDULL
    #define SR_FMIX2 0xC4CEB9FE1A85EC53ULL
    #define SR_CHUNK_MUL 0x9E3779B97F4A7C15ULL
    #define SR_SEQ_BASE 0xBF58476D1CE4E5B9ULL
    #define SR_LEN_MIX 0x94D049BB133111EBULL
    #define SR_SCRUBBED 0x6A09E667F3BCC909ULL
    #if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_WIN32)
    #define SR_LITTLE_ENDIAN 1
    #else
    #define SR_LITTLE_ENDIAN 0
    #endif
    /* SR_TOKEN_CLASS[c]: token_class(c) as a table the compiler fills */
    #define SR_TC(c) (((c) >= 48 && (c) <= 57) ? 1 : ((c) >= 97 && (c) <= 122) ? 2 \
        : ((c) >= 65 && (c) <= 90) ? 4 : ((c) == 45 || (c) == 95) ? 8 : 0)
    #define SR_TC4(c) SR_TC(c), SR_TC((c) + 1), SR_TC((c) + 2), SR_TC((c) + 3)
    #define SR_TC16(c) SR_TC4(c), SR_TC4((c) + 4), SR_TC4((c) + 8), SR_TC4((c) + 12)
    #define SR_TC64(c) SR_TC16(c), SR_TC16((c) + 16), SR_TC16((c) + 32), SR_TC16((c) + 48)
    static const unsigned char SR_TOKEN_CLASS[256] = {
        SR_TC64(0), SR_TC64(64), SR_TC64(128), SR_TC64(192)
    };
    """
    const uint64_t FMIX1 "SR_FMIX1"
    const uint64_t FMIX2 "SR_FMIX2"
    const uint64_t CHUNK_MUL "SR_CHUNK_MUL"
    const uint64_t SEQ_BASE "SR_SEQ_BASE"
    const uint64_t LEN_MIX "SR_LEN_MIX"
    const uint64_t SCRUBBED "SR_SCRUBBED"
    const bint LITTLE_ENDIAN "SR_LITTLE_ENDIAN"
    const uint8_t TOKEN_CLASS "SR_TOKEN_CLASS"[256]


cdef inline uint64_t fmix(uint64_t x) noexcept nogil:
    x ^= x >> 33
    x *= FMIX1
    x ^= x >> 33
    x *= FMIX2
    x ^= x >> 33
    return x


cdef inline uint64_t load_le(const uint8_t* p, size_t n) noexcept nogil:
    """Up to 8 bytes as a little-endian integer, zero-filled."""
    cdef uint64_t v = 0
    cdef size_t i
    if n == 8 and LITTLE_ENDIAN:
        memcpy(&v, p, 8)
        return v
    for i in range(n):
        v |= (<uint64_t>p[i]) << (8 * i)
    return v


cdef inline uint64_t span_hash(const uint8_t* p, size_t n) noexcept nogil:
    """``shingles.span_hashes(..., mix=False)`` of one span."""
    cdef uint64_t acc
    cdef size_t k
    if n <= 8:
        return load_le(p, n)
    acc = fmix(load_le(p, 8))
    k = 8
    while k < n:
        acc += fmix(load_le(p + k, n - k if n - k < 8 else 8) + <uint64_t>k * CHUNK_MUL)
        k += 8
    return acc


cdef inline uint64_t sequence_hash(uint64_t seq, int64_t count) noexcept nogil:
    """Order-sensitive hash of a run of ``count`` hashes from its sum of value * SEQ_BASE**i
    (0 for an empty run, so "no text" is recognisable)."""
    if count == 0:
        return 0
    return fmix(seq ^ (<uint64_t>count * LEN_MIX))


cdef inline int token_class(uint8_t c) noexcept nogil:
    # 1 digit, 2 lowercase, 4 uppercase, 8 "-" or "_", 0 anything else (SR_TC above)
    return TOKEN_CLASS[c]


cdef enum:
    TOKEN_MIN = 16  # shortest token (elements._TOKEN_MIN)


cdef inline bint has_digit(const uint8_t* p, size_t n) noexcept nogil:
    """Whether ``p[:n]`` has an ASCII digit, 8 bytes at a time: with ``low`` the bytes'
    low 7 bits, 0xB9 - low has its high bit where low <= 0x39, low + 0x50 where
    low >= 0x30, ~x where the byte is below 0x80 (no borrow or carry leaves a byte)."""
    cdef size_t i = 0
    cdef uint64_t x, low
    if LITTLE_ENDIAN:
        while i + 8 <= n:
            memcpy(&x, p + i, 8)
            low = x & 0x7F7F7F7F7F7F7F7FULL
            if (0xB9B9B9B9B9B9B9B9ULL - low) & (low + 0x5050505050505050ULL) & ~x & (
                0x8080808080808080ULL
            ):
                return True
            i += 8
    while i < n:
        if 48 <= p[i] <= 57:
            return True
        i += 1
    return False


cdef inline uint64_t attribute_hash(const uint8_t* p, size_t n, size_t value_at) noexcept nogil:
    """Hash of ``name="value`` (``p[:n]``, the value from ``value_at``).

    Token-like runs in a value of 16 bytes or more are left out: the attribute
    is then the sequence of the pieces between them (see elements.py).
    """
    cdef size_t i, start, piece = 0
    cdef int cls, c
    cdef uint64_t seq = 0, power = 1
    cdef int64_t count = 0
    cdef bint scrubbed = False
    # a token has a digit (cls & 1 below): a value without one has none, and most
    # long values (class lists, paths of words) are told so without the scan
    if n - value_at >= TOKEN_MIN and has_digit(p + value_at, n - value_at):
        i = value_at
        while i < n:
            if token_class(p[i]) == 0:
                i += 1
                continue
            start = i
            cls = 0
            while i < n:
                c = token_class(p[i])
                if c == 0:
                    break
                cls |= c
                i += 1
            if (
                i - start >= TOKEN_MIN
                and cls & 1
                and cls & 6
                and (not (cls & 8) or (cls & 6) == 6)
            ):
                seq += fmix(span_hash(p + piece, start - piece)) * power
                power *= SEQ_BASE
                count += 1
                piece = i
                scrubbed = True
    if not scrubbed:
        return fmix(span_hash(p, n))
    seq += fmix(span_hash(p + piece, n - piece)) * power
    return sequence_hash(seq, count + 1) ^ SCRUBBED


cdef inline void add_nibbles(uint64_t* lanes, int r, uint64_t nibbles) noexcept nogil:
    """Move 16 nibble counters (bit 4q + r of the features: nibble q) into byte counters
    (``lanes[2r]``: the even nibbles, ``lanes[2r + 1]``: the odd ones)."""
    lanes[2 * r] += nibbles & 0x0F0F0F0F0F0F0F0FULL
    lanes[2 * r + 1] += (nibbles >> 4) & 0x0F0F0F0F0F0F0F0FULL


cdef inline void add_counts(int64_t* counts, uint64_t* lanes) noexcept nogil:
    """Move the byte counters of ``add_nibbles`` into one count per bit."""
    cdef int b, q
    for b in range(64):
        q = b >> 2
        counts[b] += (lanes[2 * (b & 3) + (q & 1)] >> (8 * (q >> 1))) & 0xFF
    for b in range(8):
        lanes[b] = 0


cdef inline uint64_t simhash_of_words(
    const uint64_t* words, int64_t n, int64_t size
) noexcept nogil:
    """``simhash.fingerprint(shingles.shingle_hashes(words, size))`` in one pass: each
    shingle's hash is made and its bits counted at once, four bits to a 4-bit counter
    (16 counters in a uint64, moved to 8-bit ones every 15 shingles, to integers every
    255)."""
    cdef int64_t m, i, j, k, pending = 0, flushes = 0
    cdef uint64_t acc, h, tail, b2, u0 = 0, u1 = 0, u2
    cdef uint64_t n0 = 0, n1 = 0, n2 = 0, n3 = 0
    cdef uint64_t lanes[8]
    cdef int64_t counts[64]
    cdef uint64_t result = 0
    cdef int b
    if n == 0:
        return 0
    k = size if size < n else n
    m = n - k + 1
    tail = <uint64_t>k * LEN_MIX
    for b in range(64):
        counts[b] = 0
    for b in range(8):
        lanes[b] = 0
    b2 = SEQ_BASE * SEQ_BASE
    if k == 4:  # the default: pairs u_i = w_i * B + w_(i+1), each made once, and the
        # shingle u_i * B**2 + u_(i+2) (the same value, two products instead of four)
        u0 = words[0] * SEQ_BASE + words[1]
        u1 = words[1] * SEQ_BASE + words[2]
    for i in range(m):
        if k == 4:
            u2 = words[i + 2] * SEQ_BASE + words[i + 3]
            acc = u0 * b2 + u2
            u0 = u1
            u1 = u2
        else:
            acc = words[i]
            for j in range(1, k):
                acc = acc * SEQ_BASE + words[i + j]
        h = fmix(acc ^ tail)
        n0 += h & 0x1111111111111111ULL
        n1 += (h >> 1) & 0x1111111111111111ULL
        n2 += (h >> 2) & 0x1111111111111111ULL
        n3 += (h >> 3) & 0x1111111111111111ULL
        pending += 1
        if pending == 15 or i == m - 1:
            add_nibbles(lanes, 0, n0)
            add_nibbles(lanes, 1, n1)
            add_nibbles(lanes, 2, n2)
            add_nibbles(lanes, 3, n3)
            n0 = n1 = n2 = n3 = 0
            pending = 0
            flushes += 1
            if flushes == 17 or i == m - 1:
                add_counts(counts, lanes)
                flushes = 0
    # the package's rule: a bit is set when more than half the features have it
    for b in range(64):
        if counts[b] * 2 > m:
            result |= (<uint64_t>1) << b
    return result
