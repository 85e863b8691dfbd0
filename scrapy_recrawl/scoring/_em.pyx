# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The freshness estimate's EM step (:mod:`scrapy_recrawl.scoring.freshness`), compiled.

One pass over the ``[rows, grid]`` likelihood per step: each row's marginal (its
likelihood times its group's prior, summed over the grid), then its posterior times its
count added to its group's sums, with no ``[rows, grid]`` temporary (issue 29: the
report fits one estimate per cycle, ~17,000 steps on a 20-cycle store). The posterior
``lik * prior / marginal`` is summed as ``prior * sum(lik * count / marginal)``: the
prior is the group's, so it leaves the row sum (the numpy step's figures to ~1e-16 a
step, in another order of the float operations).
"""

from libc.stdlib cimport free, malloc


def em_sums(
    const double[:, ::1] lik,
    const double[:, ::1] prior,
    const Py_ssize_t[::1] lengths,
    const double[::1] counts,
    double[:, ::1] sums,
):
    """Into ``sums[p, k]``: the sum over the rows of present group ``p`` (rows sorted
    by group, ``lengths[p]`` of them, ``prior[p]`` its prior) of ``counts[r] * lik[r, k]
    * prior[p, k] / marginal[r]``, ``marginal[r] = sum_k lik[r, k] prior[p, k]`` (at
    least 1e-300, as the numpy step)."""
    cdef Py_ssize_t rows = lik.shape[0], K = lik.shape[1], groups = lengths.shape[0]
    cdef Py_ssize_t p, r, k, start = 0, end
    cdef double marginal, w
    cdef const double* row
    cdef const double* pr
    if prior.shape[0] != groups or prior.shape[1] != K or sums.shape[0] != groups:
        raise ValueError("em_sums: prior, sums and lengths disagree on the groups")
    if sums.shape[1] != K or counts.shape[0] != rows:
        raise ValueError("em_sums: the likelihood, counts and sums disagree")
    cdef Py_ssize_t total = 0
    for p in range(groups):
        total += lengths[p]
    if total != rows:
        raise ValueError("em_sums: the groups' lengths do not cover the rows")
    cdef double* acc = <double*> malloc(K * sizeof(double))
    if acc == NULL:
        raise MemoryError()
    try:
        with nogil:
            for p in range(groups):
                end = start + lengths[p]
                pr = &prior[p, 0]
                for k in range(K):
                    acc[k] = 0.0
                for r in range(start, end):
                    row = &lik[r, 0]
                    marginal = 0.0
                    for k in range(K):
                        marginal += row[k] * pr[k]
                    if marginal < 1e-300:
                        marginal = 1e-300
                    w = counts[r] / marginal
                    for k in range(K):
                        acc[k] += row[k] * w
                for k in range(K):
                    sums[p, k] = acc[k] * pr[k]
                start = end
    finally:
        free(acc)
