"""``RECRAWL_IGNORE_XPATHS`` and ``RECRAWL_WATCH_XPATHS``: checked and compiled once,
applied to every parsed page.

:func:`xpath_list` and :func:`compile_xpath` turn a setting into compiled XPaths
(a bad one is a :class:`~scrapy_recrawl.settings.RecrawlSettingError` naming it;
:func:`css_list` turns ``RECRAWL_WATCH_CSS`` selectors into XPaths with cssselect, which
comes with Scrapy); :func:`remove_matches` takes out of a parsed page what an ignore
XPath selected, and :func:`keep_only` all but what the watch XPaths selected, before the
page is signed (:class:`~scrapy_recrawl.change.detector.ChangeDetector`).
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from ..settings import RecrawlSettingError

__all__ = ["compile_xpath", "css_list", "keep_only", "remove_matches", "xpath_list"]


def xpath_list(value: Any, name: str = "RECRAWL_IGNORE_XPATHS") -> tuple[str, ...]:
    """The setting's XPaths (one string or a list of them), checked; ``name``: the
    setting (or meta key) messages name."""
    if isinstance(value, str):
        value = [value]
    try:
        items = tuple(value)
    except TypeError:
        raise RecrawlSettingError(f"{name}={value!r}: expected a list of XPath strings") from None
    for x in items:
        if not isinstance(x, str) or not x.strip():
            raise RecrawlSettingError(f"{name}: {x!r} is not an XPath (expected non-empty strings)")
    return items


def css_list(value: Any, name: str = "RECRAWL_WATCH_CSS") -> tuple[str, ...]:
    """CSS selectors (one string or a list of them) as XPaths, by cssselect's
    ``GenericTranslator`` (what parsel's ``.css()`` uses); a bad one names ``name``."""
    from cssselect import GenericTranslator, SelectorError

    out = []
    for css in xpath_list(value, name):
        try:
            out.append(GenericTranslator().css_to_xpath(css))
        except SelectorError as exc:
            raise RecrawlSettingError(f"{name}: bad CSS selector {css!r}: {exc}") from None
    return tuple(out)


_PROBE = etree.fromstring("<html><body><p>x</p></body></html>", etree.HTMLParser())


def compile_xpath(expr: str, name: str = "RECRAWL_IGNORE_XPATHS") -> etree.XPath:
    """One XPath compiled and tried on a small page (a bad one fails at start-up)."""
    try:
        xpath = etree.XPath(expr, smart_strings=True)
        xpath(_PROBE)  # unknown functions and variables only fail when evaluated
    except etree.XPathError as exc:
        raise RecrawlSettingError(f"{name}: bad XPath {expr!r}: {exc}") from None
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


def keep_only(root: Any, results: list[Any]) -> bool:
    """Keep of ``root`` only the elements the watch XPaths selected (``results``: what
    each returned), with what is inside them; an XPath that selected an attribute or a
    text node watches the element holding it. Their ancestors stay as bare wrappers (no
    text, no attributes: blank, so not compared) so every watched element keeps its tag
    path, and with it the learned boilerplate's keys. False (``root`` untouched): none
    was selected, and the page is compared whole (docs/what-changed.md)."""
    watched: list[Any] = []
    for result in results:
        if not isinstance(result, list):
            continue
        for item in result:
            # an attribute's or a text node's owner (lxml's smart strings know it)
            el = item if isinstance(item, etree._Element) else getattr(item, "getparent", None)
            el = el() if callable(el) and not isinstance(el, etree._Element) else el
            if isinstance(el, etree._Element) and isinstance(el.tag, str):
                watched.append(el)
    if not watched:
        return False
    chosen = set(watched)
    spine: set[Any] = set()  # the ancestors of a watched element that is not inside another
    for el in watched:
        path = []
        parent = el.getparent()
        inside = False
        while parent is not None:
            if parent in chosen:
                inside = True
                break
            path.append(parent)
            parent = parent.getparent()
        if not inside:
            spine.update(path)
    if root in chosen:
        return True  # the whole page is watched
    for wrapper in spine:
        wrapper.text = None
        wrapper.attrib.clear()
        for child in list(wrapper):
            if child in spine or child in chosen:
                child.tail = None  # its parent's text, outside what is watched
            else:
                wrapper.remove(child)
    return True
