"""A throw-away Scrapy project in a temporary directory, for real ``scrapy`` command
lines (``scrapy crawl``, ``scrapy recrawl-reset``) as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .helpers import REPO

SETTINGS = """
BOT_NAME = "proj"
SPIDER_MODULES = ["proj.spiders"]
ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
RETRY_ENABLED = False
LOG_LEVEL = "WARNING"
"""

# yields one item per page (its URL and flags) and follows every link
SPIDER = """
import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, start_url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url or "http://127.0.0.1:9/"]

    def parse(self, response):
        yield {"url": response.url, "flags": response.flags}
        yield from response.follow_all(css="a", callback=self.parse)
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def make_project(root: Path, settings: str = "") -> Path:
    """scrapy.cfg, proj/settings.py (SETTINGS + ``settings``) and the ``pages`` spider."""
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "settings.py").write_text(SETTINGS + settings)
    (root / "proj" / "spiders" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "pages.py").write_text(SPIDER)
    return root


def scrapy(root: Path, *args: str, input: str | None = None, timeout: float = 180) -> Run:
    """``scrapy ARGS`` in the project at ``root``, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(root)])}
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=root,
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(out.returncode, out.stdout, out.stderr)


#: what a fresh interpreter's warning filters are (Python's defaults): a warning the
#: command's user would see on stderr is seen by the in-process run as well
_DEFAULT_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)


def scrapy_in_process(root: Path, *args: str) -> Run:
    """``scrapy ARGS`` in the project at ``root``, run by Scrapy's own entry point
    (``scrapy.cmdline.execute``, what ``python -m scrapy`` calls) inside the test
    process: the same parser, settings, exit status and stdout/stderr as
    :func:`scrapy`, without paying an interpreter's and Scrapy's start-up (seconds)
    per run. For the offline ``recrawl-*`` commands only: a crawl needs a reactor of
    its own (:func:`scrapy`). What a process would leave behind is undone: the
    working directory, ``os.environ`` (Scrapy sets ``SCRAPY_SETTINGS_MODULE``),
    ``sys.argv``, ``sys.path`` and the project's modules (every project here is ``proj``).

    As in a process of its own: a warning shows on stderr (Python's default
    filters), a log record of WARNING and above too (Python's last-resort handler:
    the commands run with ``LOG_ENABLED = False``), and an exception that escapes is
    a traceback on stderr and status 1."""
    import contextlib
    import io
    import logging
    import traceback
    import warnings

    import scrapy
    from scrapy.cmdline import execute

    assert args and args[0].startswith("recrawl-"), "a crawl runs in a process: scrapy()"
    out, err = io.StringIO(), io.StringIO()
    cwd, environ, path, argv = os.getcwd(), dict(os.environ), list(sys.path), sys.argv

    def forget_project() -> None:
        for name in [m for m in sys.modules if m == "proj" or m.startswith("proj.")]:
            del sys.modules[name]

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        err.write(warnings.formatwarning(message, category, filename, lineno, line))

    last_resort = logging.StreamHandler(err)
    last_resort.setLevel(logging.WARNING)
    root_logger = logging.getLogger()
    forget_project()
    os.chdir(root)
    for name in [k for k in os.environ if k.startswith("SCRAPY_")]:
        del os.environ[name]
    root_logger.addHandler(last_resort)
    # argparse names itself after sys.argv[0]: `python -m scrapy` has scrapy/__main__.py
    sys.argv = [str(Path(scrapy.__file__).with_name("__main__.py")), *args]
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.resetwarnings()
            for action, category, module in reversed(_DEFAULT_FILTERS):
                warnings.filterwarnings(action, category=category, module=module)
            warnings.showwarning = show
            try:
                execute(["scrapy", *args])
                code = 0  # execute() always exits; kept for the type checker
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    err.write(f"{exc.code}\n")
            except Exception:  # noqa: BLE001 -- what the interpreter does with it
                traceback.print_exc(file=err)
                code = 1
    finally:
        root_logger.removeHandler(last_resort)
        sys.argv = argv
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        forget_project()
    return Run(code, out.getvalue(), err.getvalue())
