# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The freshness estimate's EM step (:mod:`scrapy_recrawl.scoring.freshness`), compiled.

One pass over the ``[rows, grid]`` likelihood per step: each row's marginal (its
likelihood times its group's prior, summed over the grid), then its posterior times its
count added to its group's sums, with no ``[rows, grid]`` temporary (issue 29: the
report fits one estimate per cycle, ~17,000 steps on a 20-cycle store). The posterior
``lik * prior / marginal`` is summed as ``prior * sum(lik * count / marginal)``: the
prior is the group's, so it leaves the row sum (the numpy step's figures to ~1e-16 a
step, in another order of the float operations). And the likelihood of the pages
that read a creation hazard, recomputed after each of its steps (``dated_likelihood``).
"""

from libc.math cimport INFINITY, exp, log
from libc.stdlib cimport free, malloc


def em_sums(
    const double[:, ::1] lik,
    const double[:, ::1] prior,
    const Py_ssize_t[::1] lengths,
    const double[::1] counts,
    double[:, ::1] sums,
    const double[::1] extra=None,
    double[:, ::1] extra_sums=None,
):
    """Into ``sums[p, k]``: the sum over the rows of present group ``p`` (rows sorted
    by group, ``lengths[p]`` of them, ``prior[p]`` its prior) of ``counts[r] * lik[r, k]
    * prior[p, k] / marginal[r]``, ``marginal[r] = sum_k lik[r, k] prior[p, k]`` (at
    least 1e-300, as the numpy step). With ``extra`` (a weight per row), the same sums
    weighed by it into ``extra_sums`` (the creation hazards' event mass)."""
    cdef Py_ssize_t rows = lik.shape[0], K = lik.shape[1], groups = lengths.shape[0]
    cdef Py_ssize_t p, r, k, start = 0, end
    cdef double marginal, w, x
    cdef const double* row
    cdef const double* pr
    cdef bint weighed = extra is not None
    if prior.shape[0] != groups or prior.shape[1] != K or sums.shape[0] != groups:
        raise ValueError("em_sums: prior, sums and lengths disagree on the groups")
    if sums.shape[1] != K or counts.shape[0] != rows:
        raise ValueError("em_sums: the likelihood, counts and sums disagree")
    if weighed and (
        extra_sums is None or extra.shape[0] != rows
        or extra_sums.shape[0] != groups or extra_sums.shape[1] != K
    ):
        raise ValueError("em_sums: extra needs extra_sums of the sums' shape")
    cdef Py_ssize_t total = 0
    for p in range(groups):
        total += lengths[p]
    if total != rows:
        raise ValueError("em_sums: the groups' lengths do not cover the rows")
    cdef double* acc = <double*> malloc(2 * K * sizeof(double))
    if acc == NULL:
        raise MemoryError()
    cdef double* acc_x = acc + K
    try:
        with nogil:
            for p in range(groups):
                end = start + lengths[p]
                pr = &prior[p, 0]
                for k in range(K):
                    acc[k] = 0.0
                    acc_x[k] = 0.0
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
                    if weighed:
                        x = w * extra[r]
                        if x != 0.0:
                            for k in range(K):
                                acc_x[k] += row[k] * x
                for k in range(K):
                    sums[p, k] = acc[k] * pr[k]
                    if weighed:
                        extra_sums[p, k] = acc_x[k] * pr[k]
                start = end
    finally:
        free(acc)


def dated_likelihood(
    const double[:, ::1] fixed,
    const double[::1] fixed_top,
    const double[::1] grid,
    const Py_ssize_t[::1] rows,
    const double[::1] age,
    const double[::1] event,
    const double[::1] eta,
    double[:, ::1] lik,
    double[:, ::1] top,
):
    """Into ``lik[r]`` and ``top[r, 0]``, for each row ``r = rows[i]`` (the dated rows
    of the groups whose creation hazard moved; ``eta[i]``: its group's hazard), the
    scaled likelihood and its scale that ``_Rows._likelihood`` computes, from the
    part that does not depend on the hazard: ``fixed[i] = exp(ll0 - fixed_top[i])``,
    ``ll0 = base[r] - grid * age[r]`` (``fixed_top[i]``: its maximum). The hazard
    adds ``-eta age[r]`` (a constant of the row: its scale only) and, where the date
    is an event, ``log(grid + eta)``: a product, then the row's maximum taken out.
    No exp or log per rate (one log per row): the figures of numpy's form to the last
    digits."""
    cdef Py_ssize_t n = rows.shape[0], K = grid.shape[0], i, k, r
    cdef double e, v, best
    if fixed.shape[0] != n or fixed.shape[1] != K or lik.shape[1] != K:
        raise ValueError("dated_likelihood: the grid and the rows disagree")
    if fixed_top.shape[0] != n or eta.shape[0] != n:
        raise ValueError("dated_likelihood: the rows and their hazards disagree")
    for i in range(n):
        r = rows[i]
        if not 0 <= r < min(lik.shape[0], top.shape[0], age.shape[0], event.shape[0]):
            raise ValueError("dated_likelihood: a row out of range")
    with nogil:
        for i in range(n):
            r = rows[i]
            e = eta[i]
            if event[r] == 0.0:  # "no change in a" only: the hazard moves the scale
                for k in range(K):
                    lik[r, k] = fixed[i, k]
                top[r, 0] = fixed_top[i] - e * age[r]
                continue
            best = 0.0
            for k in range(K):
                v = fixed[i, k] * (grid[k] + e)
                lik[r, k] = v
                if v > best:
                    best = v
            if best > 0.0:
                for k in range(K):
                    lik[r, k] = lik[r, k] / best
                top[r, 0] = fixed_top[i] - e * age[r] + log(best)
            else:
                top[r, 0] = -INFINITY
