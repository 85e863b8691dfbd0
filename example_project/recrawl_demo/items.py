from dataclasses import dataclass


@dataclass
class PageItem:
    """What the demo keeps of a page: enough to see that it was fetched."""

    url: str
    title: str
