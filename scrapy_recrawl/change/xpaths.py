"""``RECRAWL_IGNORE_XPATHS``: checked and compiled once, applied to every parsed page.

:func:`xpath_list` and :func:`compile_xpath` turn the setting into compiled XPaths
(a bad one is a :class:`~scrapy_recrawl.settings.RecrawlSettingError` naming it);
:func:`remove_matches` takes out of a parsed page what one selected, before the
page is signed (:class:`~scrapy_recrawl.change.detector.ChangeDetector`).
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from ..settings import RecrawlSettingError

__all__ = ["compile_xpath", "remove_matches", "xpath_list"]


def xpath_list(value: Any) -> tuple[str, ...]:
    """The setting's XPaths (one string or a list of them), checked."""
    if isinstance(value, str):
        value = [value]
    try:
        items = tuple(value)
    except TypeError:
        raise RecrawlSettingError(
            f"RECRAWL_IGNORE_XPATHS={value!r}: expected a list of XPath strings"
        ) from None
    for x in items:
        if not isinstance(x, str) or not x.strip():
            raise RecrawlSettingError(
                f"RECRAWL_IGNORE_XPATHS: {x!r} is not an XPath (expected non-empty strings)"
            )
    return items


_PROBE = etree.fromstring("<html><body><p>x</p></body></html>", etree.HTMLParser())


def compile_xpath(expr: str) -> etree.XPath:
    """One XPath compiled and tried on a small page (a bad one fails at start-up)."""
    try:
        xpath = etree.XPath(expr, smart_strings=True)
        xpath(_PROBE)  # unknown functions and variables only fail when evaluated
    except etree.XPathError as exc:
        raise RecrawlSettingError(f"RECRAWL_IGNORE_XPATHS: bad XPath {expr!r}: {exc}") from None
    return xpath


def remove_matches(result: Any) -> None:
    """Remove what an ignore-XPath selected: elements (keeping their tail), attributes, text."""
    if not isinstance(result, list):
        return
    for item in result:
        if isinstance(item, etree._Element):
            parent = item.getparent()
            if parent is None:
                continue
            tail = item.tail
            if tail:
                prev = item.getprevious()
                if prev is not None:
                    prev.tail = (prev.tail or "") + tail
                else:
                    parent.text = (parent.text or "") + tail
            parent.remove(item)
        elif isinstance(item, str) and hasattr(item, "getparent"):
            owner = item.getparent()
            if owner is None:
                continue
            if getattr(item, "is_attribute", False):
                owner.attrib.pop(item.attrname, None)  # type: ignore[attr-defined]  # lxml smart str
            elif getattr(item, "is_tail", False):
                owner.tail = None
            elif getattr(item, "is_text", False):
                owner.text = None
