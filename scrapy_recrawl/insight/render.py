"""The report as a person reads it (tables drawn by ``rich``) or as a pipeline does
(CSV: one table; JSON: everything)."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .boilerplate import Boilerplate, Learned
from .cycles import CycleRow
from .urls import HostLine, UrlLine, UrlStory


@dataclass
class Report:
    source: str  # the store's location
    spider: str | None
    current_cycle: int
    urls: int
    cycles: list[CycleRow]
    changing: list[UrlLine]
    hosts: list[HostLine]
    wasted: list[UrlLine]
    boilerplate: list[Boilerplate]
    learned: list[Learned] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        return {
            "cycles": [r.as_dict() for r in self.cycles],
            "changing": [u.as_dict() for u in self.changing],
            "hosts": [h.as_dict() for h in self.hosts],
            "wasted": [u.as_dict() for u in self.wasted],
            "boilerplate": [b.as_dict() for b in self.boilerplate],
            "learned": [b.as_dict() for b in self.learned],
        }

    def as_dict(self) -> dict[str, Any]:
        head = {
            "store": self.source,
            "spider": self.spider,
            "current_cycle": self.current_cycle,
            "urls": self.urls,
            "notes": self.notes,
        }
        return {**head, **self.tables()}


TABLES = ("cycles", "changing", "hosts", "wasted", "boilerplate", "learned")


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: they are null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write_json(data: dict[str, Any], out: IO[str] | None = None) -> None:
    # sys.stdout when called, not when imported: a redirected stdout is the one written
    out = sys.stdout if out is None else out
    json.dump(_clean(data), out, indent=2)
    out.write("\n")


def write_csv(rows: Sequence[dict[str, Any]], out: IO[str] | None = None) -> None:
    out = sys.stdout if out is None else out
    if not rows:
        return
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in _clean(row).items()})


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 100:.0f}%"


def _band(value: float | None, low: float | None, high: float | None) -> str:
    """An estimate with its interval: ``79% (75-83%)``."""
    if value is None or not math.isfinite(value):
        return "-"
    if low is None or high is None:
        return _pct(value)
    return f"{value * 100:.0f}% ({low * 100:.0f}-{high * 100:.0f}%)"


def _esc(text: str) -> str:
    """Cells are data: ``[@id="x"]`` in an XPath or a URL is not rich markup."""
    from rich.markup import escape

    return escape(text)


def _console(out: IO[str] | None) -> Any:
    from rich.console import Console

    con = Console(file=out or sys.stdout)
    if not con.is_terminal:
        # piped or saved: no terminal width to fit, so no URL is cut to fit 80 columns
        con.width = 240
    return con


def _table(title: str, columns: Sequence[str], left: Collection[str], fold: bool = False) -> Any:
    """A titled table: the ``left`` columns (text) left-aligned, the others (numbers)
    right-aligned; ``fold``: long cells wrap instead of being cut."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for name in columns:
        t.add_column(
            name,
            justify="left" if name in left else "right",
            overflow="fold" if fold else "ellipsis",
        )
    return t


def print_report(report: Report, out: IO[str] | None = None) -> None:
    con = _console(out)
    con.print(
        f"[bold]{_esc(report.source)}[/bold]"
        + (f" (spider {report.spider})" if report.spider else "")
        + f": {report.urls} URLs, current cycle {report.current_cycle}"
    )
    columns = (
        "cycle", "fetched", "recrawl", "new", "probe", "monitor", "start", "changed",
        "unchanged", "304", "errors", "gone", "budget", "used", "backlog", "est. freshness",
        "scorer",
    )  # fmt: skip
    t = _table("Per cycle", columns, left={"scorer"})
    for r in report.cycles:
        t.add_row(
            str(r.cycle), str(r.fetched), _fmt(r.recrawl), _fmt(r.new), _fmt(r.probe),
            _fmt(r.monitor), _fmt(r.start), str(r.changed), str(r.unchanged),
            str(r.not_modified), str(r.errors), str(r.gone), _fmt(r.budget),
            _pct(r.budget_used), _fmt(r.backlog),
            _band(r.freshness, r.freshness_low, r.freshness_high), _esc(r.scorer or "-"),
        )  # fmt: skip
    con.print(t)
    _url_table(con, "Top changing URLs", report.changing)
    h = _table(
        "Top changing hosts",
        ("host", "URLs", "visits", "observations", "changes", "change share"),
        left={"host"},
    )
    for line in report.hosts:
        h.add_row(
            _esc(line.host), str(line.urls), str(line.visits), str(line.observations),
            str(line.changes), _pct(line.change_share),
        )  # fmt: skip
    con.print(h)
    _url_table(con, "Wasted on (fetched often, never changed)", report.wasted)
    if report.learned:
        lt = _table(
            "Boilerplate learned (left out of every comparison; pin it with the line)",
            ("section", "pairs", "left out", "attributes left out", "named from"),
            left={"section", "left out", "attributes left out", "named from"},
            fold=True,
        )
        for ln in report.learned:
            unnamed = f" + {ln.unnamed} not in a kept copy" if ln.unnamed else ""
            lt.add_row(
                _esc(ln.section), str(ln.pairs), _esc(", ".join(ln.volatile) or "-") + unnamed,
                _esc(", ".join(ln.attributes) or "-"),
                _esc(ln.named_from or "no kept copy (RECRAWL_STORE_BODIES = False)"),
            )  # fmt: skip
        con.print(lt)
        for ln in report.learned:
            if ln.pin_line:
                con.print(f"pin {ln.section}: {ln.pin_line}", markup=False)
    if report.boilerplate:
        b = _table(
            "Changes that look like boilerplate",
            ("URL", "changes/obs.", "median D", "median elements", "silence it with"),
            left={"URL", "changes/obs.", "silence it with"},
            fold=True,
        )
        for bp in report.boilerplate:
            b.add_row(
                _esc(bp.url), f"{bp.changes}/{bp.observations}", _fmt(bp.median_distance, 1),
                _fmt(bp.median_elements, 1), _esc(bp.ignore_line),
            )  # fmt: skip
        con.print(b)
    for note in report.notes:
        con.print(f"note: {note}", markup=False)


def _url_table(con: Any, title: str, lines: Sequence[UrlLine]) -> None:
    t = _table(
        title,
        ("URL", "visits", "observations", "changes", "rate/cycle", "last change"),
        left={"URL"},
        fold=True,
    )
    for u in lines:
        t.add_row(
            _esc(u.url), str(u.visits), str(u.observations), str(u.changes), _fmt(u.rate),
            _fmt(u.last_change),
        )  # fmt: skip
    con.print(t)


def print_story(s: UrlStory, out: IO[str] | None = None) -> None:
    con = _console(out)
    con.print(f"[bold]{_esc(s.url)}[/bold] (URL id {s.url_id}){' -- gone' if s.gone else ''}")
    t = _table(
        "Visits",
        ("cycle", "status", "result", "D", "added", "removed", "modified", "attrs", "bytes"),
        left={"result"},
    )
    for v in s.visits:
        t.add_row(
            str(v.cycle), str(v.status), v.result, str(v.distance), str(v.added),
            str(v.removed), str(v.modified), str(v.attributes), str(v.bytes),
        )  # fmt: skip
    con.print(t)
    for line in why_lines(s):
        con.print(line, markup=False)
    for note in s.notes:
        con.print(f"note: {note}", markup=False)


def why_lines(s: UrlStory) -> list[str]:
    """Why it was, or was not, picked: the lines a person reads."""
    lines = [f"scorer: {s.scorer}"]
    if s.last_cycle is not None:
        cut = _fmt(s.cutoff, 4)
        if s.picked_rank is not None:
            lines.append(
                f"cycle {s.last_cycle}: picked, rank {s.picked_rank} of {s.picks} recrawls, "
                f"score {_fmt(s.picked_score, 4)} (cut-off {cut})"
            )
        elif s.picks_kept:
            lines.append(
                f"cycle {s.last_cycle}: not picked: {s.picks} recrawls scored above the "
                f"cut-off {cut}"
            )
        elif s.picks == 0 and s.cutoff is None:
            lines.append(
                f"cycle {s.last_cycle}: the scorer picked nothing (a warm-up, plan mode, or "
                "every page in the monitoring sample)"
            )
        else:
            lines.append(f"cycle {s.last_cycle}: cut-off {cut}; its picks are no longer kept")
    if s.monitored:
        lines.append(
            "in the monitoring sample (RECRAWL_MONITOR_SHARE): fetched every cycle, "
            "outside the budget and the scorer"
        )
    if s.terminals:
        terms = ", ".join(f"{k}={_fmt(v, 4)}" for k, v in s.terminals.items())
        lines.append(f"terminals now: {terms}")
    if s.score is not None:
        rank = f"rank {s.rank_now} of {max(s.candidates, s.rank_now or 0)} scored candidates"
        if s.ties:
            rank += f" (tied with {s.ties} others)"
        if s.monitored:
            rank = f"it would be {rank} were it not monitored"
        lines.append(f"score now (as the next cycle scores it): {_fmt(s.score, 4)}; {rank}")
    return lines
