"""The offline commands' tables, drawn by ``rich`` in Markdown's pipe form.

Pipe tables stay readable in a terminal, in a log and pasted into docs or an
issue; ``rich`` sizes the columns (no hand-written padding in each command).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], *, right: Sequence[int] = ()
) -> str:
    """``rows`` under ``headers``; the columns whose index is in ``right`` (numbers) are
    right-aligned. Cells are printed with ``str`` (format numbers before)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.MARKDOWN, show_edge=True, pad_edge=True)
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(str(v) for v in row))
    out = io.StringIO()
    Console(file=out, width=10_000, color_system=None, highlight=False).print(table)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    return "\n".join(line for line in lines if line)
