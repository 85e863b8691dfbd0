"""The ``group`` column: which URLs pool their change evidence (the pooled priors,
:mod:`scrapy_recrawl.scoring.pooled`).

One definition of a URL's group per kind of key, :func:`group_key`:

* a URL (``scheme://netloc/...``): its host, as the per-host cap reads it
  (:func:`~scrapy_recrawl.core.selection.hosts_of`);
* a page name without a scheme (the shared histories' ``owner/repo/dir/file``):
  its directory (everything before the last ``/``; a name with no ``/`` is in the
  group ``""``).

:func:`group_codes` turns keys into dense int codes (first seen, first code); the
replay (:func:`scrapy_recrawl.core.simulate.simulate`, ``groups=``) and the
learner get theirs from the page names of a history (:func:`history_groups`). The
live crawl's codes come from :class:`GroupIndex`, which keeps each id's code in
the scheduler's process, so a cycle reads the URLs of new ids only, not every URL
of the store (at 10M URLs a full read is the cost of ``store.urls`` over them all).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ..scoring.pooled import GROUP
from .selection import hosts_of

#: the per-URL column the pooled terminals read (int codes, one per group), as they name it
GROUP_COLUMN = GROUP

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def group_keys(keys: Sequence[str]) -> list[str]:
    """The group of each key (:func:`group_key`), hosts looked up once per netloc."""
    keys = list(keys)
    urls = [i for i, k in enumerate(keys) if _SCHEME.match(k)]
    out = [k.rpartition("/")[0] for k in keys]
    if urls:
        for i, host in zip(urls, hosts_of([keys[i] for i in urls]), strict=True):
            out[i] = host
    return out


def group_key(key: str) -> str:
    """A URL's host, or a page name's directory (the module docstring)."""
    return group_keys([key])[0]


def group_codes(keys: Sequence[str], code_of: dict[str, int] | None = None) -> np.ndarray:
    """Dense int32 group codes of ``keys`` (first seen, first code); ``code_of`` (kept
    by the caller across calls) keeps the codes of groups seen before."""
    table: dict[str, int] = {} if code_of is None else code_of
    return np.fromiter(
        (table.setdefault(g, len(table)) for g in group_keys(keys)),
        dtype=np.int32,
        count=len(keys),
    )


def history_groups(names: Sequence[str] | None, pages: int) -> np.ndarray:
    """The ``group`` column of a replayed history: its page names' groups; no names
    (a matrix alone): every page in one group, so the pooled prior is the global one."""
    if names is None:
        return np.zeros(pages, dtype=np.int32)
    if len(names) != pages:
        raise ValueError(f"{len(names)} page names for {pages} pages")
    return group_codes([str(n) for n in names])


class GroupIndex:
    """Each URL id's group code, kept between cycles in the scheduler's process.

    :meth:`codes` asks ``urls_of`` only for ids it has not seen. A store emptied under
    the crawl (``clear()``, or a shared store lost and started afresh) starts the cache
    afresh, so a reused id never keeps another URL's group: seen as its cycle counter
    going back (it restarts at 0) or its ids starting again below the highest one kept.
    """

    def __init__(self) -> None:
        self._reset()
        #: URLs read so far (the cost the cache saves; tests check it)
        self.urls_read = 0

    def _reset(self) -> None:
        self._cycle = -1
        self._ids = np.empty(0, dtype=np.int64)  # ascending
        self._codes = np.empty(0, dtype=np.int32)
        self._code_of: dict[str, int] = {}

    def __len__(self) -> int:
        return int(self._ids.size)

    def codes(
        self,
        ids: np.ndarray,
        urls_of: Callable[[np.ndarray], list[str]],
        cycle: int | None = None,
    ) -> np.ndarray:
        """The group codes of ``ids`` (ascending, as ``store.arrays()`` gives them) in the
        store's ``cycle`` (None: not checked)."""
        ids = np.asarray(ids, dtype=np.int64)
        emptied = cycle is not None and cycle < self._cycle
        if emptied or (ids.size and self._ids.size and ids[-1] < self._ids[-1]):
            self._reset()  # the store was emptied: its ids are reused
        if cycle is not None:
            self._cycle = cycle
        pos = np.searchsorted(self._ids, ids)
        known = pos < self._ids.size
        known[known] = self._ids[pos[known]] == ids[known]
        new = ids[~known]
        if new.size:
            urls = urls_of(new)
            self.urls_read += len(urls)
            fresh = group_codes(urls, self._code_of)
            if not self._ids.size or new[0] > self._ids[-1]:
                self._ids = np.concatenate([self._ids, new])
                self._codes = np.concatenate([self._codes, fresh])
            else:  # ids below the highest kept (rare): merge, keep ascending
                all_ids = np.concatenate([self._ids, new])
                order = np.argsort(all_ids, kind="stable")
                self._ids = all_ids[order]
                self._codes = np.concatenate([self._codes, fresh])[order]
            pos = np.searchsorted(self._ids, ids)
        return self._codes[pos]
