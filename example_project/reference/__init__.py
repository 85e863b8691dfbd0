"""The reference site: a shop and a news site with real-site boilerplate and ground truth.

Why: a change detector, a freshness estimate and a new-page policy must be judged on a
site that behaves like a user's, against what really happened there. This package is
that site, shared by tests, benchmarks and the demo (docs/example.md, "The reference
site"):

* ``model`` -- seeded draws, words, change processes, page templates (pure);
* ``boilerplate`` -- the per-request noise that is not a change, each kind switchable;
* ``shop``, ``news`` -- the two sections' content as functions of (seed, path, day);
* ``truth`` -- each page's real-content versions, from content hashes day by day;
* ``world`` -- :class:`ReferenceSite`: clock, serving, served log, truth API;
* ``server`` -- HTTP (``start_in_thread``, ``python -m example_project.reference``);
* ``score`` -- precision/recall, true freshness, new-page latency against the truth.
"""

from .boilerplate import KINDS, parse_kinds, strip
from .score import (
    Detection,
    Latency,
    Visit,
    detection,
    expected_freshness_by_day,
    freshness_by_day,
    new_page_latency,
    page_path,
    true_freshness,
    truth_from_doc,
    visits_from_served,
    visits_from_store,
)
from .server import RunningReferenceSite, main, make_server, start_in_thread
from .truth import PageTruth, Served
from .world import SITES, ReferenceSite, Response

__all__ = [
    "KINDS",
    "SITES",
    "Detection",
    "Latency",
    "PageTruth",
    "ReferenceSite",
    "Response",
    "RunningReferenceSite",
    "Served",
    "Visit",
    "detection",
    "expected_freshness_by_day",
    "freshness_by_day",
    "main",
    "make_server",
    "new_page_latency",
    "page_path",
    "parse_kinds",
    "start_in_thread",
    "strip",
    "true_freshness",
    "truth_from_doc",
    "visits_from_served",
    "visits_from_store",
]
