"""Run Scrapy's own scheduler, engine and crawl tests with RecrawlScheduler as SCHEDULER.

Scrapy's test suite is not installed with Scrapy: it ships in the sdist. This
module finds (or fetches once) the ``tests/`` tree of the *installed* Scrapy
version, then runs the modules below in a fresh ``python -m pytest`` whose
``recrawl_scrapy_plugin`` (beside this file) swaps the scheduler in.

    .venv/bin/python tests/scrapy_suite/run.py            # all of MODULES
    .venv/bin/python tests/scrapy_suite/run.py -x tests/test_engine_loop.py

Where the tree comes from, first found wins:

1. ``$RECRAWL_SCRAPY_TESTS``: a directory holding Scrapy's ``conftest.py``,
   ``pyproject.toml`` and ``tests/`` (an unpacked sdist will do);
2. ``.venv/scrapy-tests/<version>/``, the cache this module fills;
3. ``pip download --no-binary :all: scrapy==<version>`` (pip's own cache first,
   then PyPI), unpacked into that cache.

Needs ``pytest-twisted`` (Scrapy's tests run on the Twisted reactor through it).
docs/scheduler.md has the results and the reasons behind MODULES and DESELECT.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PLUGIN = "recrawl_scrapy_plugin"

#: Scrapy's test modules that exercise the scheduler: its own tests, the engine's
#: (which drive it), full crawls, the dupefilter it owns, scheduler_empty, and the
#: crawler (which builds it). Other modules never reach the scheduler's behaviour.
MODULES = [
    "tests/test_scheduler.py",
    "tests/test_scheduler_base.py",
    "tests/test_engine.py",
    "tests/test_engine_close_spider.py",
    "tests/test_engine_download.py",
    "tests/test_engine_loop.py",
    "tests/test_engine_stop_download_bytes.py",
    "tests/test_engine_stop_download_headers.py",
    "tests/test_crawl.py",
    "tests/test_dupefilters.py",
    "tests/test_signals.py",
    "tests/test_crawler.py",
]

#: Tests that assert an internal of Scrapy's default scheduler rather than the
#: scheduler contract, left out (node ids; why for each in docs/scheduler.md).
#: None is needed with Scrapy 2.19.0.
DESELECT: list[str] = []

_NEEDED = ("conftest.py", "pyproject.toml", "tests/test_scheduler.py", "tests/test_crawl.py")


#: the outer pytest's settings, not the inner suite's: its options, its path, and an
#: xdist worker's identity (Scrapy's suite run from a worker would act as one)
_OUTER = ("PYTEST_ADDOPTS", "PYTHONPATH", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
          "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")  # fmt: skip


def scrapy_version() -> str:
    import scrapy

    return scrapy.__version__


def _complete(path: Path) -> bool:
    return all((path / name).exists() for name in _NEEDED)


def cache_dir(version: str) -> Path:
    return REPO / ".venv" / "scrapy-tests" / version


def locate_scrapy_tests(
    version: str | None = None, *, fetch: bool = True
) -> tuple[Path | None, str]:
    """The directory of Scrapy's test tree, and a message saying where it came from
    (or, with ``None``, why it could not be had)."""
    version = version or scrapy_version()
    env = os.environ.get("RECRAWL_SCRAPY_TESTS")
    if env:
        if _complete(Path(env)):
            return Path(env), f"Scrapy's tests from $RECRAWL_SCRAPY_TESTS={env}"
        return None, f"$RECRAWL_SCRAPY_TESTS={env} lacks one of {', '.join(_NEEDED)}"
    cached = cache_dir(version)
    if _complete(cached):
        return cached, f"Scrapy {version}'s tests cached in {cached}"
    if not fetch:
        return None, f"Scrapy {version}'s tests are not cached in {cached}"
    with tempfile.TemporaryDirectory(prefix="scrapy-sdist-") as tmp:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"scrapy=={version}",
                "-d",
                tmp,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        sdists = sorted(Path(tmp).glob("*.tar.gz"))
        if out.returncode != 0 or not sdists:
            return None, (
                f"could not download the Scrapy {version} sdist (its tests/ are not in the "
                f"wheel): pip said {(out.stderr or out.stdout).strip()[-500:]!r}"
            )
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(sdists[0]) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
                tar.extractall(unpacked, filter="data")
            else:
                tar.extractall(unpacked)  # noqa: S202 -- PyPI's own Scrapy sdist
        (root,) = [p for p in unpacked.iterdir() if p.is_dir()]
        staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=_mkdir(cached.parent)))
        # Only the test tree and its pytest config: never Scrapy's own package, so the
        # tests run against the installed Scrapy, the one RecrawlScheduler subclasses.
        for name in ("conftest.py", "pyproject.toml"):
            shutil.copy2(root / name, staging / name)
        shutil.copytree(root / "tests", staging / "tests")
        if not _complete(staging):
            shutil.rmtree(staging, ignore_errors=True)
            return None, f"the Scrapy {version} sdist has no complete tests/ tree"
        shutil.rmtree(cached, ignore_errors=True)
        staging.rename(cached)
    return cached, f"Scrapy {version}'s tests downloaded from its sdist into {cached}"


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def pytest_command(args: list[str] | None = None) -> list[str]:
    """``python -m pytest`` over MODULES (or ``args``' own paths), DESELECT left out."""
    args = list(args or [])
    paths = [a for a in args if a.startswith("tests/")]
    cmd = [sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider"]
    cmd += ["--timeout=300", "-q", "-rfEs"]
    cmd += args if paths else [*args, *MODULES]
    for node in DESELECT:
        cmd += ["--deselect", node]
    return cmd


def run(
    args: list[str] | None = None,
    *,
    tests_dir: Path,
    middleware: bool = False,
    report: Path | None = None,
    timeout: float | None = None,
    capture: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run Scrapy's tests in ``tests_dir`` with RecrawlScheduler; pytest's exit code back.

    ``middleware``: also enable RecrawlMiddleware, as RecrawlAddon does.
    ``report``: a file each pytest process appends its RecrawlScheduler count to.
    """
    env = {k: v for k, v in os.environ.items() if k not in _OUTER}
    # The plugin's directory, then this checkout (its scrapy_recrawl, before an
    # installed one): the repository's own ``tests`` package cannot shadow Scrapy's,
    # which its tests import as ``tests`` from their directory, first on sys.path.
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO)])
    env["RECRAWL_SUITE_MIDDLEWARE"] = "1" if middleware else "0"
    if report is not None:
        env["RECRAWL_SUITE_REPORT"] = str(report)
    return subprocess.run(
        pytest_command(args),
        cwd=tests_dir,
        env=env,
        text=True,
        capture_output=capture,
        timeout=timeout,
    )


def main(argv: list[str]) -> int:
    middleware = "--with-middleware" in argv
    argv = [a for a in argv if a != "--with-middleware"]
    tests_dir, how = locate_scrapy_tests()
    print(how, file=sys.stderr)
    if tests_dir is None:
        return 2
    return run(argv, tests_dir=tests_dir, middleware=middleware).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
