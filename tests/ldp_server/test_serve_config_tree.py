"""The web service's gunicorn config comes from the collector its workers import."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldp_server.serve import _collector_file

ROOT = Path(__file__).resolve().parents[2]


def _checkout(path: Path) -> Path:
    """A directory holding a ``collector`` package with a gunicorn config of its own."""
    (path / "collector").mkdir(parents=True)
    (path / "collector" / "__init__.py").write_text("")
    (path / "collector" / "gunicorn_conf.py").write_text("workers = 1\n")
    return path / "collector" / "gunicorn_conf.py"


def test_a_checkout_on_pythonpath_serves_its_own_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _checkout(tmp_path / "other-tree")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "other-tree"))
    assert _collector_file("gunicorn_conf.py") == conf


def test_the_working_directory_comes_first_as_for_python_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _checkout(tmp_path / "here")
    _checkout(tmp_path / "other-tree")
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "other-tree"))
    assert _collector_file("gunicorn_conf.py") == conf


def test_otherwise_the_installed_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert _collector_file("gunicorn_conf.py") == ROOT / "collector" / "gunicorn_conf.py"
