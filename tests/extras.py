"""The optional extras of setup.cfg the tests need, and how a test says so.

``pip install -e '.[test]'`` alone has none of them: a test that needs one is
skipped with the command that installs it, never failed. Mark a test (or a module,
``pytestmark``) with ``@pytest.mark.planning`` / ``ml`` / ``plot`` (tests/conftest.py
skips it); a module that imports an extra's package at import time calls
:func:`require_extra` first, at module level, as ``pytest.importorskip`` would.
"""

from __future__ import annotations

import importlib.util

import pytest

#: each extra (setup.cfg ``[options.extras_require]``) and the modules it brings
EXTRAS: dict[str, tuple[str, ...]] = {
    "planning": ("scipy", "threadpoolctl"),
    "ml": ("sklearn",),
    "plot": ("matplotlib",),
}


def missing_extra(name: str) -> str | None:
    """Why a test needing the extra ``name`` cannot run here (the install command in
    it), or ``None`` when every module of the extra is importable."""
    absent = [m for m in EXTRAS[name] if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return f"needs the {name} extra ({', '.join(absent)}): pip install -e '.[{name}]'"


def require_extra(name: str) -> None:
    """Skip the whole module, at import, when the extra ``name`` is missing."""
    reason = missing_extra(name)
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)


__all__ = ["EXTRAS", "missing_extra", "require_extra"]
