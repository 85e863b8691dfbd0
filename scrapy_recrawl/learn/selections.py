"""One cycle of a batched replay: each individual's top-k, each distinct one kept once.

:class:`Selections` scores the individuals of
:class:`~scrapy_recrawl.learn.population.PopulationReplay` for one cycle and keeps
the URLs each one fetches. Individuals of a group whose scores pick the same URLs
share one selection (and their metrics are computed once): the replay then reads
``group`` and ``idx``, one row per distinct selection.
"""

from __future__ import annotations

import numpy as np

from scrapy_recrawl.learn import gp

from .fitness import _Group, top_k_by_index

__all__ = ["Selections"]


class Selections:
    """The distinct selections of one cycle: ``group[s]``, the state group selection ``s``
    was made in, ``idx[s]``, the URLs it fetches (best first); ``k`` URLs per selection."""

    def __init__(self, interner: gp.Interner, k: int) -> None:
        self.interner = interner
        self.k = k
        self.group: list[int] = []
        self.idx: list[np.ndarray] = []
        self._known: dict[tuple, int] = {}

    def by_class(self, root: int, used: tuple[str, ...], grp: _Group, gid: int) -> int:
        """:func:`top_k_by_class` for one individual of a group (classes its URLs are in).

        Returns the id of its selection in ``idx`` / ``group``. The
        selection depends only on how the scores *rank* the classes down to the
        cut (with ties), so individuals of the group that rank them alike share
        one (and their metrics are computed once).
        """
        k = self.k
        m = grp.present.shape[0]
        cs = np.asarray(self.interner.evaluate(root, grp.sub(used), grp.memo), dtype=np.float64)
        if cs.shape != (m,):
            cs = np.broadcast_to(cs, (m,))
        if not np.isfinite(cs).all():
            cs = np.where(np.isfinite(cs), cs, -np.inf)
        neg = -cs
        order = np.argsort(neg, kind="stable")
        ranked = neg[order]
        cut = int(np.searchsorted(grp.cum_of(order), k))
        end = m if cut >= m else int(np.searchsorted(ranked, ranked[cut], side="right"))
        key = (gid, order[:end].tobytes(), (np.diff(ranked[:end]) != 0).tobytes())
        found = self._known.get(key)
        if found is not None:
            return found
        page_class, size = grp.page_class, grp.size
        full = np.empty(size)
        full[grp.present] = cs
        if cut >= m:
            chosen = np.arange(page_class.shape[0])
        else:
            v = cs[order[cut]]
            code = np.zeros(size, dtype=np.int8)
            code[grp.present] = (cs > v).view(np.int8) * np.int8(2) + (cs == v).view(np.int8)
            page_code = code[page_class]
            above = np.flatnonzero(page_code == 2)
            tied = np.flatnonzero(page_code == 1)[: k - above.shape[0]]
            chosen = np.sort(np.concatenate((above, tied)))
        chosen = chosen[np.argsort(-full[page_class[chosen]], kind="stable")][:k]
        return self._remember(key, chosen, gid)

    def by_url(self, root: int, used: tuple[str, ...], grp: _Group, gid: int) -> int:
        """The selection of a tree using ``Q`` (or another terminal known only per URL):
        scored per URL, :func:`top_k_by_index`."""
        pages = grp.page_class.shape[0]
        scores = np.asarray(
            self.interner.evaluate(root, grp.per_url(used), grp.url_memo), dtype=np.float64
        )
        if scores.shape != (pages,):
            scores = np.broadcast_to(scores, (pages,))
        idx = top_k_by_index(scores, self.k)
        key = (gid, b"url", idx.tobytes())
        found = self._known.get(key)
        if found is not None:
            return found
        return self._remember(key, idx, gid)

    def _remember(self, key: tuple, chosen: np.ndarray, gid: int) -> int:
        """Keep a selection (the URLs a group's individual fetches) once; its id."""
        self.idx.append(chosen)
        self.group.append(gid)
        self._known[key] = len(self.idx) - 1
        return self._known[key]
