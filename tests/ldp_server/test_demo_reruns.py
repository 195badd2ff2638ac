"""``ldp demo`` run twice in a row: each run's coverage line is about its own population."""

from __future__ import annotations

import fcntl
import re
import socket
from pathlib import Path

from click.testing import CliRunner

from ldp_server.cli import main
from ldp_server.demo import DEMO_METRICS, fresh_run_folder

INTERVALS = sum(len(e["spec"]["domain"]) for e in DEMO_METRICS.values())


def run_demo(data_dir: Path, users: int, seed: int) -> str:
    args = ["demo", "--data-dir", str(data_dir), "--users", str(users), "--processes", "1"]
    args += ["--port", "0"]  # not 8000: another test or program may hold it
    result = CliRunner().invoke(main, [*args, "--seed", str(seed), "--no-serve"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_a_second_demo_run_counts_only_its_own_users(tmp_path: Path) -> None:
    first = run_demo(tmp_path, 300, 1)
    second = run_demo(tmp_path, 500, 2)
    assert "removed" not in first and "removed 1 earlier demo run's data" in second
    for out, users in ((first, 300), (second, 500)):
        # every metric's n is this run's users, not the runs' sum
        assert out.count(f"n={users:,}") == len(DEMO_METRICS), out
        line = re.search(r"(\d+) of (\d+) intervals missed the true share; about (\d+)", out)
        assert line, out
        missed, total, expected = (int(x) for x in line.groups())
        assert total == INTERVALS and expected == round(0.05 * INTERVALS)
        # 95 % intervals: misses are Binomial(302, 0.05)-like, P(more than 40) < 10⁻⁷ —
        # the first version of this demo reported 252 of 302 covered (50 missed) on a rerun
        assert missed <= 40, out
        assert "interval vs truth" in out and "coverage not checked" not in out
    runs = sorted(p.name for p in tmp_path.iterdir())
    assert len(runs) == 1 and runs[0].startswith("run-")  # the first run's data is gone


def test_fresh_run_folder_keeps_what_is_not_a_finished_run(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "run-old").mkdir()
    busy = tmp_path / "run-busy"
    busy.mkdir()
    with open(busy / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a demo still running there
        folder, removed = fresh_run_folder(tmp_path)
    assert removed == [tmp_path / "run-old"]
    assert {p.name for p in tmp_path.iterdir()} == {"notes", "run-busy", folder.name}
    again, removed = fresh_run_folder(tmp_path)  # that demo has stopped: its folder goes
    assert tmp_path / "run-busy" in removed and not (tmp_path / "run-busy").exists()
    assert again.exists() and not any(again.iterdir()) and (tmp_path / "notes").exists()


def test_a_taken_port_is_refused_before_any_data_is_removed(tmp_path: Path) -> None:
    # An earlier run's folder as a run leaves it (its lock released; a real run's is
    # removed by the next run, the test above), not a real 50-user run (8 s).
    earlier = tmp_path / "run-20260101-000000"
    (earlier / "redis").mkdir(parents=True)
    (earlier / ".lock").touch()
    (earlier / "redis" / "appendonly.aof").write_bytes(b"*1\r\n$5\r\nMULTI\r\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        args = ["demo", "--data-dir", str(tmp_path), "--users", "50", "--port", str(port)]
        result = CliRunner().invoke(main, [*args, "--no-serve"])
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "--port 0" in result.output and "nothing was changed" in result.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # the earlier run is kept
    assert fresh_run_folder(tmp_path)[1] == [earlier]  # which a run on a free port removes
