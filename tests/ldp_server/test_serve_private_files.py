"""Everything `ldp serve` writes under its data dir is its user's only: 0700 folders, 0600 files.

Issue 35 item 7: the data dir was 0755 and its logs and ``.prometheus-multiproc/*.db``
0644, so another local user could read the per-metric counts that ``/metrics`` keeps
behind a token (and the logs). The embedded Redis's own folder was already private
(issue 29). Fails on the old code: the data dir, the logs and the Prometheus files.
"""

from __future__ import annotations

import json
import os
import random
import stat
import urllib.request
from pathlib import Path
from typing import Any

from serve_helpers import ldp_serve

from client_sdk.wire import MetricDefinition, build_report
from ldp_server.demo import fresh_run_folder

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-admin-token-private-files"


def modes(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (itself too) that is not a 0700 folder or a 0600 file."""
    loose = {}
    for path in [folder, *folder.rglob("*")]:
        info = path.lstat()
        kind = stat.S_IFMT(info.st_mode)
        want = {stat.S_IFDIR: 0o700, stat.S_IFREG: 0o600}.get(kind)
        if stat.S_IMODE(info.st_mode) != want:
            loose[str(path.relative_to(folder.parent))] = oct(info.st_mode)
    return loose


def call(url: str, path: str, method: str = "GET", body: Any = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, response.read()


def test_ldp_serve_keeps_its_data_dir_to_its_user(tmp_path: Path) -> None:
    """A real start (embedded Redis, a web worker, an aggregator), a metric, a report and
    a scrape of ``/metrics`` (so the Prometheus files and logs exist), then the tree is
    walked. The data dir exists already, 0755 with a 0644 log, as an older version left
    it: it is tightened too."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    (data / "web.log").write_text("an older run's log\n")
    (data / "web.log").chmod(0o644)
    args = ["--port", "0", "--data-dir", str(data), "--web-workers", "1", "--aggregators", "1"]
    umask = {"preexec_fn": lambda: os.umask(0o022)}  # the usual umask, whatever pytest's
    with ldp_serve(args, {"LDP_ADMIN_TOKEN": TOKEN}, **umask) as (url, _):
        spec = {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "grr"}
        status, body = call(url, "/v1/metrics/app.private", "PUT", spec)
        assert status == 201
        definition = MetricDefinition.from_dict(json.loads(body))
        report = build_report(definition, 1, random.Random(35))
        assert call(url, "/v1/reports", "POST", {"reports": [report]})[0] == 202
        assert b"app.private" in call(url, "/metrics")[1]
        found = sorted(p.name for p in data.rglob("*"))
        assert any(n.endswith(".db") for n in found) and "redis" in found, found
        assert "web.log" in found and "admin-token" not in found  # the token came from env
        assert modes(data) == {}
    assert modes(data) == {}  # and as it left them


def test_the_demos_folders_are_its_users_only(tmp_path: Path) -> None:
    """`ldp demo` runs each time in a fresh ``run-*`` folder of its data dir."""
    root = tmp_path / "demo"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    run, _ = fresh_run_folder(str(root))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
