"""``ldp serve``'s folder for prometheus-client's multiprocess files: emptied at each
start, and never anything of the operator's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldp_server.serve import PROMETHEUS_FOLDER, Server


def test_only_its_own_folder_is_emptied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    theirs = tmp_path / "prometheus" / "prometheus.yml"  # an operator's Prometheus config
    theirs.parent.mkdir()
    theirs.write_text("scrape_configs: []\n")
    stale = tmp_path / PROMETHEUS_FOLDER / "counter_123.db"  # the last run's counters
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    folder = Path(Server(port=1, data_dir=tmp_path)._prometheus_dir())
    assert folder == tmp_path / PROMETHEUS_FOLDER and list(folder.iterdir()) == []
    assert theirs.read_text() == "scrape_configs: []\n"


def test_a_file_in_its_place_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    (tmp_path / PROMETHEUS_FOLDER).write_text("x")
    assert Path(Server(port=1, data_dir=tmp_path)._prometheus_dir()).is_dir()


def test_the_operators_folder_is_used_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = tmp_path / "mine" / "prom"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(chosen))
    assert Server(port=1, data_dir=tmp_path / "data")._prometheus_dir() == str(chosen)
    assert chosen.is_dir()  # created when missing (gunicorn would die without it)
