"""A good body against the URL's stored signature: one change observation.

For each 2xx response the middleware asks :class:`ChangeObserver` to sign the body
(change/), compare it with the stored signature, record the visit with what it
found (visit_recorder.py), keep the bag of words a content plug-in wants, teach the
boilerplate learner (boilerplate_pairs.py), put the
:class:`~scrapy_recrawl.change.ChangeResult` in ``request.meta`` and flag the response
``recrawl:new``, ``recrawl:changed`` or ``recrawl:unchanged``.

A body the store keeps is signed lazily: its first visit stores a *deferred*
signature (a content hash), signed in full only once the body changes, from the
kept copy. At a change, the kept body (the version before it) is copied aside first
(history/previous_body.py: ``RECRAWL_KEEP_PREVIOUS``), for ``recrawl-report --url``.
A signature made by another version of the hashing or under other
signing rules (``RECRAWL_IGNORE_XPATHS`` or a watch list edited: the request's own,
``ChangeDetector.for_request``) is made again from the kept copy, so neither is a change
of the page.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.http import Response

from .boilerplate_pairs import PairFetcher
from .change import ChangeDetector, Signature, SignatureVersionError
from .core.meta import FLAG_CHANGED, FLAG_NEW, FLAG_UNCHANGED, META_RESULT
from .core.plugins import BagKeeper
from .history import HistoryStore, UrlRecord
from .history.previous_body import PreviousBodies, content_type_of
from .visit_recorder import VisitRecorder, first, header

#: the middleware's log lines keep its logger's name (a user's logging config names it)
logger = logging.getLogger("scrapy_recrawl.middleware")


class ChangeObserver:
    """Observes a good body's change and records it (module docstring).

    ``bags``: the plug-in keeping each version's bag of words (content-aware prediction:
    the chi-squared rule needs the previous bag, the D* terminals the last l), or None;
    ``pairs``: the boilerplate learner, or None; ``max_body_bytes``:
    RECRAWL_MAX_PARSE_BYTES (a larger body is compared, never kept)."""

    def __init__(
        self,
        store: HistoryStore,
        detector: ChangeDetector,
        recorder: VisitRecorder,
        *,
        bags: BagKeeper | None,
        pairs: PairFetcher | None,
        max_body_bytes: int,
    ) -> None:
        self.store = store
        self.detector = detector
        self.recorder = recorder
        self.bags = bags
        self.pairs = pairs
        self.max_body_bytes = max_body_bytes
        if bags is not None:
            detector.keep_bags = True
        self._too_deep_seen = 0  # detector.too_deep already counted in the stats
        #: the body before each change, kept aside (None: RECRAWL_KEEP_PREVIOUS off)
        self.previous = PreviousBodies.from_settings(
            recorder.crawler.settings, store, detector.content_hash
        )

    def good(
        self, request: Request, response: Response, fp: bytes, rec: UrlRecord | None
    ) -> Response:
        """Sign, compare, record and flag a 2xx response (module docstring); ``rec``: the
        URL's record before this visit (None: never seen)."""
        detector = self.detector.for_request(request.meta)  # its own watch list, if any
        bags = self.bags
        recorder = self.recorder
        body = response.body
        content_type = header(response, "Content-Type")
        old = self._old_signature(rec, fp, response.url, detector)
        small = len(body) <= self.max_body_bytes
        keep_body = small and self.store.store_bodies
        if old is not None and old.kind == "deferred":
            if old.content_hash != detector.content_hash(body):
                old = self._resolve_deferred(fp, response.url, detector) or old
            new = detector.signature(body, response.url, content_type, previous=old)
        elif old is None and keep_body and bags is None:
            # first visit of a body the store keeps: sign it only if it ever changes
            new = detector.deferred(body)
        else:
            new = detector.signature(body, response.url, content_type, previous=old)
        self._count_too_deep()
        old_bags = bags.previous(rec.id) if bags is not None and rec is not None else []
        # the learned boilerplate matters only to a compare of two different bodies
        ignore = (
            None
            if self.pairs is None or old is None or old.content_hash == new.content_hash
            else self.pairs.ignore_for(response.url)
        )
        result = detector.compare(
            old, new, old_bag=old_bags[0] if old_bags else None, ignore=ignore
        )
        if result.changed and old is not None and rec is not None:
            self._keep_previous(request, fp, rec, old, new)
        is_first = first(rec)
        saved = recorder.record(
            request,
            response,
            fp,
            changed=None if old is None else result.changed,
            result=result,
            signature=new.to_bytes(),
            body=body if small else None,
            before=rec,  # the items signal holds a refetch's visit (held_observations.py)
        )
        # paper 004: keep this version's bag (a byte-identical body reuses the last one)
        bag = new.bag if new.bag is not None else (old_bags[0] if new is old and old_bags else None)
        if bags is not None and bag is not None:
            bags.keep(saved.id, bag, old_bags)
        recorder.inc("visits")
        outcome = None if old is None else "changed" if result.changed else "unchanged"
        recorder.count(request, is_first, outcome)
        recorder.note_refetch(request, rec, saved)
        if is_first:
            recorder.inc("new")
        elif outcome is not None:
            recorder.inc(outcome)
        request.meta[META_RESULT] = result
        if self.pairs is not None and recorder.arrived is None:  # a held one: too late for a pair
            self.pairs.after_visit(
                request, response, old, new, result.changed, recorder.cycle_of(request)
            )
        # nothing to compare with (first fetch, or an unreadable old signature): new
        tag = FLAG_NEW if old is None else FLAG_CHANGED if result.changed else FLAG_UNCHANGED
        response.flags.append(tag)  # in place, as HttpCacheMiddleware adds "cached"
        return response

    def _keep_previous(
        self, request: Request, fp: bytes, rec: UrlRecord, old: Signature, new: Signature
    ) -> None:
        """The stored body, still the version before this change, copied aside before the
        visit replaces it (history/previous_body.py)."""
        if self.previous is None:
            return
        kept = self.previous.changed(
            rec.id,
            fp,
            before=old.content_hash,
            after=new.content_hash,
            before_cycle=rec.last_visit_cycle,
            before_time=rec.last_visit_time,
            cycle=self.recorder.cycle_of(request),
            time=self.recorder.now(),
        )
        if kept:
            self.recorder.inc("previous_kept")

    def _resolve_deferred(self, fp: bytes, url: str, detector: ChangeDetector) -> Signature | None:
        """The full signature of the stored body a deferred signature stands for."""
        stored = self.store.body(fp)
        if stored is None:
            return None
        return detector.signature(stored.body, url, content_type_of(stored))

    def _old_signature(
        self, rec: UrlRecord | None, fp: bytes, url: str, detector: ChangeDetector
    ) -> Signature | None:
        if rec is None or rec.signature is None:
            return None
        try:
            old = Signature.from_bytes(rec.signature)
        except SignatureVersionError:
            # made by another version of the hashing: sign the stored body again
            return self._resolve_deferred(fp, url, detector)
        except ValueError as exc:
            logger.warning(
                "recrawl: stored signature of %s unreadable (%s); starting afresh", url, exc
            )
            return None
        if detector.same_rules(old):
            return old
        # made under other signing rules (ignore or watch list edited): the kept copy is
        # signed again under today's, so the edit itself is no change; with no copy kept,
        # this visit is the new baseline (recorded without a change observation)
        self.recorder.inc("resigned")
        resigned = self._resolve_deferred(fp, url, detector)
        if resigned is None:
            self.recorder.inc("rebaselined")
        return resigned

    def _count_too_deep(self) -> None:
        """``recrawl/too_deep``: pages signed since the last call that nest deeper than the
        parser reads (their text past the limit was compared as one hash)."""
        seen = self.detector.too_deep
        stats = self.recorder.stats
        if seen != self._too_deep_seen and stats is not None:
            stats.inc_value("recrawl/too_deep", seen - self._too_deep_seen)
        self._too_deep_seen = seen
