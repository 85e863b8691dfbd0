"""The offline commands on bad input (issue 16 item 6), as a user runs them: each of
``recrawl-evolve``, ``recrawl-baskets``, ``recrawl-plan`` and ``recrawl-report`` fed a missing path, a
foreign SQLite file, corrupt ``.npz`` and CSV files, or an output it cannot write
says so in one line and exits non-zero, and every input file is byte-identical
afterwards; fed a read-only store, it reads it."""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.estimate.probes import ProbeState, ProbeStore
from scrapy_recrawl.history import SqliteHistoryStore, Visit

from .cli_project import Run, make_project, scrapy_in_process
from .helpers import REPO
from .test_evolve import _fill_store, _history
from .test_store_lock import without_privileges

pytestmark = pytest.mark.slow

TINY = ["--population", "12", "--generations", "2", "--seeds", "1", "--keep-best", "6", "-q"]


def scrapy(project: Path, *args: str, prefix: list[str] | None = None) -> Run:
    """``scrapy ARGS`` in a process of its own, as a user runs it (``prefix``: e.g.
    under another user); most tests use :func:`run_command`, seconds faster."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    out = subprocess.run(
        [*(prefix or []), sys.executable, "-m", "scrapy", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Run(out.returncode, out.stdout, out.stderr)


def run_command(project: Path, *args: str) -> Run:
    """The command through Scrapy's entry point in this process (its status, stdout
    and stderr are a process's: tests/cli_project.py); that it is what ``scrapy
    ARGS`` in a process gives, line for line, is
    :func:`test_the_command_line_gives_what_the_entry_point_gives`."""
    return scrapy_in_process(project, *args)


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _foreign_sqlite(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    db.execute("INSERT INTO invoices VALUES (1, 9.5)")
    db.commit()
    db.close()


def _bad_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("changes.npy", b"\x93NUMPY garbage")
    return buf.getvalue()


GOOD_CHANGES = (np.random.default_rng(0).random((30, 12)) < 0.3).astype(np.uint8)

#: name -> bytes (None: made by a function); every one of them is bad input
FILES: dict[str, bytes | None] = {
    "truncated.npz": _npz(changes=GOOD_CHANGES)[:300],
    "text.npz": b"changes\n0,1\n",
    "badzip.npz": _bad_zip(),
    "nan.npz": _npz(changes=np.full((5, 6), np.nan)),
    "shape.npz": _npz(changes=np.zeros(7, dtype=np.uint8)),
    "empty.npz": _npz(changes=np.zeros((0, 4), dtype=np.uint8)),
    "pickled.npz": _npz(changes=np.array([{"a": 1}], dtype=object)),
    "nan_features.npz": _npz(features=np.full((6, 64), np.nan), basket=np.arange(6) % 5),
    "wrong_features.npz": _npz(features=np.zeros((6, 3)), basket=np.arange(6) % 5),
    "labels.npz": _npz(features=np.zeros((6, 64)), basket=np.array([0, 1, 9, 2, 3, 1])),
    "rows.npz": _npz(features=np.zeros((6, 64)), basket=np.arange(4)),
    "binary.csv": bytes(range(256)) * 4,
    "nul.csv": b"url,cycle,changed\nhttp://a/,1,\x000\n",
    "nan.csv": b"url,cycle,changed\nhttp://a/,1,nan\n",
    "columns.csv": b"url,cycle,changed\nhttp://a/,1\n",
    "header.csv": b"url,cycle,changed\n",
    "span.csv": b"http://a/,1,0\nhttp://a/,20240101,1\n",
    "zeros.npz": _npz(changes=np.zeros((10, 8), dtype=np.uint8)),  # nothing to learn: no NaN
    "one_cycle.npz": _npz(changes=np.ones((4, 1), dtype=np.uint8)),
    "empty.sqlite3": None,  # a store with an empty history
    "foreign.db": None,
    "store.npz": None,  # a SQLite store given where a .npz is expected
}

# (command, its arguments; {f}: the input file, {store}: RECRAWL_STORE = that file)
CASES = [
    ("recrawl-evolve", ["--history", "{f}", *TINY], [n for n in FILES if n.endswith((".npz", ".csv"))]),
    ("recrawl-evolve", ["-s", "RECRAWL_STORE={f}", *TINY], ["missing.sqlite3", "foreign.db", "text.npz", "binary.csv", "empty.sqlite3"]),
    ("recrawl-plan", ["--history", "{f}", "--periods", "2", "--buckets", "4"], [n for n in FILES if n.endswith((".npz", ".csv")) and n != "zeros.npz"] + ["missing.npz", "foreign.db"]),
    ("recrawl-plan", ["-s", "RECRAWL_STORE={f}", "--periods", "2", "--buckets", "4"], ["missing.sqlite3", "foreign.db", "text.npz", "empty.sqlite3"]),
    ("recrawl-baskets", ["--history", "{f}", "--trees", "5"], [n for n in FILES if n.endswith(".npz")] + ["missing.npz", "binary.csv"]),
    ("recrawl-baskets", ["-s", "RECRAWL_STORE={f}", "--no-save"], ["missing.sqlite3", "foreign.db", "text.npz", "empty.sqlite3"]),
    ("recrawl-report", ["-s", "RECRAWL_STORE={f}"], ["missing.sqlite3", "foreign.db", "text.npz", "binary.csv"]),
    ("recrawl-report", ["-s", "RECRAWL_STORE={f}", "--export", "{f}.out.npz"], ["missing.sqlite3", "foreign.db", "empty.sqlite3"]),
]  # fmt: skip
TABLE = [(cmd, args, name) for cmd, args, names in CASES for name in names]
TABLE += [("recrawl-evolve", ["--history", "{f}", *TINY], "missing.csv")]

#: the extra (setup.cfg) a command needs, besides --plot's (tests/extras.py)
NEEDS = {"recrawl-plan": "planning", "recrawl-baskets": "ml"}


def needs(command: str, args: list[str]) -> list[pytest.MarkDecorator]:
    marks = [getattr(pytest.mark, NEEDS[command])] if command in NEEDS else []
    return marks + ([pytest.mark.plot] if "--plot" in args else [])


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("offline"), "RECRAWL_MONITOR_SHARE = 1.0\n")
    inputs = root / "inputs"
    inputs.mkdir()
    for name, data in FILES.items():
        if data is not None:
            (inputs / name).write_bytes(data)
    _foreign_sqlite(inputs / "foreign.db")
    with SqliteHistoryStore(inputs / "store.npz") as store:
        store.record(Visit(b"f" * 20, "http://h/", 1.0, 200))
    with SqliteHistoryStore(inputs / "empty.sqlite3"):
        pass
    return root


def snapshot(folder: Path) -> dict[str, str]:
    """Each file's digest; the WAL reader's housekeeping beside a store (its ``-shm``
    and an empty ``-wal``: history/sqlite_readonly.py) is none of the store's bytes."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if not (p.name.endswith("-shm") or (p.name.endswith("-wal") and not p.stat().st_size))
    }


@pytest.mark.parametrize(
    ("command", "args", "name"),
    [pytest.param(c, a, n, marks=needs(c, a), id=f"{c}-{a[0]}-{n}") for c, a, n in TABLE],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(project, command, args, name):  # fmt: skip
    inputs = project / "inputs"
    before = snapshot(inputs)
    path = str(inputs / name)
    run = run_command(project, command, *[a.replace("{f}", path) for a in args])
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and "nan" not in run.stdout.lower()
    assert len(run.lines) == 1, run.stderr
    line = run.lines[0]
    assert line.startswith(f"scrapy {command}: error: ") and name in line, line
    assert snapshot(inputs) == before  # byte-identical, nothing created beside them


#: one bad input per command, and a usage error (Scrapy's usage text and status 2)
CLI_CASES = [
    ("recrawl-evolve", ["--history", "{f}", *TINY], "nan.npz"),
    ("recrawl-plan", ["-s", "RECRAWL_STORE={f}", "--periods", "2", "--buckets", "4"], "foreign.db"),
    ("recrawl-baskets", ["--history", "{f}", "--trees", "5"], "labels.npz"),
    ("recrawl-report", ["-s", "RECRAWL_STORE={f}", "--export", "{f}.out.npz"], "missing.sqlite3"),
    ("recrawl-report", ["-s", "RECRAWL_STORE={f}", "--all"], "empty.sqlite3"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "args", "name"),
    [pytest.param(c, a, n, marks=needs(c, a), id=f"{c}-{n}") for c, a, n in CLI_CASES],
)
def test_the_command_line_gives_what_the_entry_point_gives(project, command, args, name):
    """The tests above run the commands in this process (seconds each saved); here the
    real command line, ``python -m scrapy`` in a process of its own (the entry points
    of setup.cfg, Scrapy's start-up, the interpreter's exit), gives the same status,
    stdout and stderr, character for character."""
    inputs = project / "inputs"
    before = snapshot(inputs)
    argv = [a.replace("{f}", str(inputs / name)) for a in args]
    real = scrapy(project, command, *argv)
    assert real.returncode in (1, 2) and real.stderr, real
    assert run_command(project, command, *argv) == real
    assert snapshot(inputs) == before


@pytest.mark.parametrize(
    ("command", "args"),
    [
        pytest.param(c, a, marks=needs(c, a))
        for c, a in [
            ("recrawl-evolve", ["--history", "{good}", "--output", "{out}/x.json", *TINY]),
            ("recrawl-evolve", ["--history", "{good}", "--plot", "{out}/x.png", *TINY]),
            ("recrawl-baskets", ["--history", "{good}", "--output", "{inputs}"]),
            ("recrawl-baskets", ["--history", "{good}", "--output", "{out}/m.bin"]),
            ("recrawl-report", ["-s", "RECRAWL_STORE={good}", "--plot", "{out}/x.png"]),
            ("recrawl-report", ["-s", "RECRAWL_STORE={good}", "--export", "{out}/x.npz"]),
        ]
    ],
)
def test_output_paths_are_checked_before_the_work(project, command, args):
    inputs = project / "inputs"
    good = project / "good.npz"
    np.savez(good, changes=GOOD_CHANGES)
    before = snapshot(inputs)
    fill = {"{good}": str(good), "{out}": str(project / "no-such-folder"), "{inputs}": str(inputs)}
    argv = []
    for a in args:
        for k, v in fill.items():
            a = a.replace(k, v)
        argv.append(a)
    run = run_command(project, command, *argv)
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr
    assert "no-such-folder" in run.lines[0] or "is a folder" in run.lines[0]
    assert "history:" not in run.stderr and run.stdout == ""  # refused before any work
    assert snapshot(inputs) == before and not (project / "no-such-folder").exists()


def _probed_store(path: Path, pages: int = 40) -> None:
    """A history with finished probes and a few visits per page, for recrawl-baskets."""
    rng = np.random.default_rng(3)
    with SqliteHistoryStore(path) as store:
        for u in range(pages):
            gap = (6, 24, 96)[u % 3] * 3600.0
            for k in range(7):
                store.record(
                    Visit(f"p{u}".encode(), f"http://h/{u}", k * gap, 200, k > 0 and k % 2 == 0)
                )
        probes = ProbeStore(store)
        for url_id in range(1, pages + 1):
            feats = rng.integers(0, 4, 64).astype(float)
            probes.save(ProbeState(url_id, 0.0, 8, None, None, feats, done=True))


@pytest.mark.parametrize("command", [pytest.param(c, marks=needs(c, [])) for c in ("recrawl-evolve", "recrawl-baskets")])  # fmt: skip
def test_a_read_only_store_is_read(tmp_path, command):
    project = make_project(tmp_path, "RECRAWL_MONITOR_SHARE = 1.0\n")
    folder = project / "ro"
    folder.mkdir()
    store = folder / "history.sqlite3"
    if command == "recrawl-evolve":
        truth = _history(60, 10, seed=4)
        truth[:, 0] = 0
        _fill_store(store, 10, 60, truth)
        args = [*TINY, "--folds", "3"]
    else:
        _probed_store(store)
        args = ["--no-save", "--min-span", "0", "--trees", "5", "--test-share", "0"]
    store.chmod(0o444)
    folder.chmod(0o555)
    before = snapshot(folder), store.stat().st_mtime_ns
    prefix = without_privileges()  # root too then obeys the modes
    try:
        run = scrapy(project, command, "-s", f"RECRAWL_STORE={store}", *args, prefix=prefix)
        # saving the model in it would make the command a writer: refused in one line
        refused = (
            scrapy(
                project, command, "-s", f"RECRAWL_STORE={store}", "--min-span", "0", prefix=prefix
            )
            if command == "recrawl-baskets" and prefix
            else None
        )
    finally:
        folder.chmod(0o755)
        store.chmod(0o644)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    if command == "recrawl-evolve":
        assert "60 pages x 10 cycles" in run.stderr and "expression:" in run.stdout
    else:
        assert "40 pages; true baskets" in run.stdout
    if refused is not None:
        assert refused.returncode == 1 and len(refused.lines) == 1, refused.stderr
        assert f"cannot open the history store sqlite:///{store}" in refused.lines[0]
    assert (snapshot(folder), store.stat().st_mtime_ns) == before
    assert sorted(p.name for p in folder.iterdir()) == ["history.sqlite3", "history.sqlite3.lock"]
