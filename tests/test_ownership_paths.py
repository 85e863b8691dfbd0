"""Where a spider's default store is: history/ownership.py finds the project's data
directory without importing Scrapy (history/ is plain Python), and finds the one
Scrapy's ``data_path`` finds, in and out of a project."""

from __future__ import annotations

import os

import pytest
from scrapy.utils.project import data_path

from scrapy_recrawl.history.ownership import default_sqlite_path, recrawl_dir


@pytest.fixture
def home(tmp_path, monkeypatch):
    """No user's scrapy.cfg, no settings module named: only what a test writes."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    return tmp_path


def same_as_scrapys() -> str:
    ours = recrawl_dir()
    assert ours == data_path("recrawl")
    return ours


def test_outside_a_project_the_data_dir_is_dot_scrapy_here(home, monkeypatch):
    monkeypatch.chdir(home)
    assert same_as_scrapys() == os.path.join(".scrapy", "recrawl")
    assert default_sqlite_path("news") == os.path.join(
        ".scrapy", "recrawl", "news", "history.sqlite3"
    )


def test_in_a_project_it_is_beside_scrapy_cfg_from_any_folder_of_it(home, monkeypatch):
    project = home / "proj"
    (project / "proj" / "spiders").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    monkeypatch.chdir(project / "proj" / "spiders")
    assert same_as_scrapys() == str((project / ".scrapy").resolve() / "recrawl")
    assert (project / ".scrapy").is_dir()  # made, as Scrapy makes it


def test_a_datadir_section_moves_it(home, monkeypatch):
    project = home / "proj"
    project.mkdir()
    elsewhere = home / "data"
    (project / "scrapy.cfg").write_text(f"[datadir]\ndefault = {elsewhere}\n")
    monkeypatch.chdir(project)
    assert same_as_scrapys() == str(elsewhere / "recrawl")


def test_the_users_own_scrapy_cfg_is_read_too(home, monkeypatch):
    project = home / "proj"
    project.mkdir()
    (project / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    elsewhere = home / "user-data"
    config = home / "home" / ".config"
    config.mkdir(parents=True)
    (config / "scrapy.cfg").write_text(f"[datadir]\ndefault = {elsewhere}\n")
    monkeypatch.chdir(project)
    assert same_as_scrapys() == str(elsewhere / "recrawl")
