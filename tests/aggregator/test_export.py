"""``ldp export`` round-trips: estimates recomputed from an exported file equal the API's.

A real Redis, reports counted by the real worker over several hour and day windows
(entries appended with past arrival times, as the stream would hold them), the estimates
API of ``ldp serve``'s app, and the CLI writing CSV (and Parquet where pyarrow is
installed). From each file's counts alone, the statistics code must give the numbers
``GET /v1/estimates`` answers, window by window.
"""

from __future__ import annotations

import csv
import json
import random
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from aggregator import Counts, estimate_from_counts
from aggregator.cli import console, source
from aggregator.stats.numeric import NumericStats, estimate_mean
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_server.cli import main
from ldp_server.serve import Server
from ldp_store import keys, schema
from ldp_store.connection import connect
from ldp_store.embedded import REDIS_URL_FILE
from ldp_store.registry import Registry

TOKEN = "test-admin-token"
THEME = {"domain": ["light", "dark", "auto", "high-contrast"], "epsilon": 1.0, "mechanism": "oue"}
MINUTES = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}
DAYS_BACK = (3, 2, 2, 1)
"""Arrival days (before now) of the batches appended with past stream ids."""


def arrivals(now: datetime) -> list[int]:
    """The past arrival times (ms) of the batches, oldest first (stream ids increase)."""
    return sorted(
        int((now - timedelta(days=back, hours=i)).timestamp() * 1000)
        for i, back in enumerate(DAYS_BACK)
    )


def windows_of(now: datetime) -> set[str]:
    """Every window the counts have: the batches' hours and days, now's, and all."""
    found = {"all"}
    for ms in [*arrivals(now), int(now.timestamp() * 1000)]:
        hour, _, day, _ = schema.window_names(ms)
        found |= {hour, day}
    return found


@pytest.fixture
def filled(redis_db: Any) -> Any:
    """Two metrics with counts in several windows, and the web app reading them."""
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    web = app.test_client()
    admin = {"Authorization": f"Bearer {TOKEN}"}
    theme = MetricDefinition.from_dict(
        web.put("/v1/metrics/app.theme", json=THEME, headers=admin).json
    )
    minutes = MetricDefinition.from_dict(
        web.put("/v1/metrics/app.minutes", json=MINUTES, headers=admin).json
    )
    rng = random.Random(7)
    r = redis_db.client()
    now = datetime.now(UTC)
    for definition in (theme, minutes):
        stream = keys.stream_key(definition.name, definition.version)
        for when in arrivals(now):
            for j in range(40):
                value = rng.randrange(4) if definition.kind != "numeric" else rng.uniform(0, 120)
                payload = build_report(definition, value, rng)["payload"]
                r.xadd(stream, {"p": json.dumps(payload, separators=(",", ":"))}, id=f"{when}-{j}")
    reports = [build_report(theme, rng.randrange(4), rng) for _ in range(50)]
    reports += [build_report(minutes, rng.uniform(0, 120), rng) for _ in range(50)]
    assert web.post("/v1/reports", json={"reports": reports}).status_code == 202
    Worker(r, handle_signals=False, block_ms=10).run(once=True)
    return redis_db, web, theme, minutes, windows_of(now)


def export(*args: str) -> str:
    result = CliRunner().invoke(main, ["export", *args])
    assert result.exit_code == 0, result.output
    return result.output


def read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def read_parquet(path: Path) -> list[dict[str, Any]]:
    pq = pytest.importorskip("pyarrow.parquet")
    return [
        {k: ("" if v is None else str(v)) for k, v in row.items()}
        for row in pq.read_table(path).to_pylist()
    ]


def by_window(
    rows: list[dict[str, Any]], metric: str
) -> dict[tuple[int, str], list[dict[str, Any]]]:
    found: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        if row["metric"] == metric:
            found.setdefault((int(row["version"]), row["window"]), []).append(row)
    return found


def check_categorical(web: Any, definition: MetricDefinition, rows: list[dict[str, Any]]) -> int:
    """Every window of the file: recomputed from its counts, equal to the API's answer."""
    windows = by_window(rows, definition.name)
    for (version, window), group in windows.items():
        api = web.get(f"/v1/estimates/{definition.name}?window={window}&version={version}").json
        n = int(group[0]["n"])
        support = np.array([int(row["support_count"]) for row in group], dtype=np.int64)
        assert [row["value"] for row in group] == list(definition.domain)
        est = estimate_from_counts(
            definition.oracle,
            Counts(n, support),
            confidence=float(group[0]["confidence"]),
            labels=definition.domain,
            reports_per_device=int(group[0]["reports_per_device"]),
        )
        assert api["n"] == n
        for i, expected in enumerate(api["estimates"]):
            assert expected["support_count"] == support[i]
            assert expected["frequency"] == est.frequencies[i] == float(group[i]["estimate"])
            assert expected["std_error"] == est.std_errors[i] == float(group[i]["std_error"])
            assert expected["ci_low"] == est.ci_low[i] == float(group[i]["ci_low"])
            assert expected["ci_high"] == est.ci_high[i] == float(group[i]["ci_high"])
            assert expected["norm_sub"] == float(group[i]["norm_sub"])
            assert expected["cs_low"] == _float(group[i]["cs_low"])
    return len(windows)


def _float(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def check_numeric(web: Any, definition: MetricDefinition, rows: list[dict[str, Any]]) -> int:
    windows = by_window(rows, definition.name)
    for (version, window), (row,) in windows.items():
        api = web.get(f"/v1/estimates/{definition.name}?window={window}&version={version}").json
        stats = NumericStats(int(row["n"]), int(row["sum_units"]), int(row["sum_sq_units"]))
        est = estimate_mean(definition, stats, float(row["confidence"]))
        assert api["n"] == stats.n
        assert api["mean"] == est.mean == float(row["estimate"])
        assert api["ci_low"] == est.ci_low == float(row["ci_low"])
        assert api["ci_high"] == est.ci_high == float(row["ci_high"])
        assert api["std_error"] == float(row["std_error"])
    return len(windows)


def test_export_round_trips_every_window_as_csv(filled: Any, tmp_path: Path) -> None:
    redis_db, web, theme, minutes, windows = filled
    out = tmp_path / "all.csv"
    export("--all", "--out", str(out), "--redis-url", redis_db.url)
    rows = read_csv(out)
    assert {r["window"] for r in rows} == windows and len(windows) >= 8
    assert check_categorical(web, theme, rows) == len(windows)
    assert check_numeric(web, minutes, rows) == len(windows)
    total = [r for r in rows if r["metric"] == "app.theme" and r["window"] == "all"]
    assert int(total[0]["n"]) == 50 + 40 * len(DAYS_BACK)


def test_export_of_one_metric_by_window_and_since(filled: Any, tmp_path: Path) -> None:
    redis_db, web, theme, _, every = filled
    out = tmp_path / "theme-days.csv"
    since = (datetime.now(UTC) - timedelta(days=2)).date().isoformat()
    export("app.theme", "--window", "day", "--since", since, "--out", str(out),
           "--redis-url", redis_db.url)  # fmt: skip
    rows = read_csv(out)
    windows = {r["window"] for r in rows}
    assert windows == {w for w in every if w.startswith("day:") and w[4:] >= since}
    assert len(windows) >= 2 and len(windows) < len([w for w in every if w.startswith("day:")])
    assert {r["metric"] for r in rows} == {"app.theme"}
    check_categorical(web, theme, rows)


def test_export_as_parquet_round_trips(filled: Any, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    redis_db, web, theme, minutes, windows = filled
    out = tmp_path / "all.parquet"
    export("--all", "--out", str(out), "--redis-url", redis_db.url)
    rows = read_parquet(out)
    assert check_categorical(web, theme, rows) == len(windows)
    assert check_numeric(web, minutes, rows) == len(windows)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--out", "x.csv"], "name one metric, or pass --all"),
        (["a", "--all", "--out", "x.csv"], "not both"),
        (["Bad Name", "--out", "x.csv"], "NAME"),
        (["app.nothing", "--out", "x.csv"], "unknown metric 'app.nothing'"),
        (["app.theme", "--window", "all", "--since", "2024-01-01", "--out", "x.csv"], "--since"),
    ],
)
def test_export_refuses_bad_input_with_a_message(
    redis_db: Any, tmp_path: Path, args: list[str], says: str
) -> None:
    result = CliRunner().invoke(main, ["export", *args, "--redis-url", redis_db.url])
    assert result.exit_code != 0
    assert says in result.output
    assert "Traceback" not in result.output


def closed_url() -> str:
    """A local URL nothing listens at (a port just freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_export_finds_a_running_ldp_serve_by_its_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New-user finding: after `ldp serve`, `ldp export` said 'pass --redis-url' although
    the embedded Redis's port is random; the serve's data dir now says where it is. With
    neither, it tries the API at the default address, and says all it tried."""
    monkeypatch.setattr(source, "DEFAULT_URL", closed_url())

    data = tmp_path / "ldp-data"
    with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as server:
        assert (data / REDIS_URL_FILE).read_text().strip() == server.redis_url
        Registry(connect(server.redis_url or "")).put("app.theme", THEME)
        out = tmp_path / "theme.csv"
        args = ["export", "app.theme", "--out", str(out), "--data-dir", str(data)]
        result = CliRunner().invoke(
            main, args, env={"REDIS_URL": "", "LDP_REDIS_URL": "", "LDP_URL": ""}
        )
        assert result.exit_code == 0, result.output
        assert read_csv(out) == []  # no reports yet: the header only
        assert "wrote" in result.output or out.read_text().splitlines()[0].startswith("metric")
    assert not (data / REDIS_URL_FILE).exists()  # stopped: nothing stale to point at
    result = CliRunner().invoke(
        main, ["export", "--all", "--out", str(tmp_path / "x.csv"), "--data-dir", str(data)],
        env={"REDIS_URL": "", "LDP_REDIS_URL": "", "LDP_URL": ""},
    )  # fmt: skip
    assert result.exit_code == 2 and "no ldp serve is running on" in result.output
    assert f"no ldp serve answered at {source.DEFAULT_URL} (connection refused)" in " ".join(
        result.output.split()
    )


def test_ldp_estimates_answers_the_apis_numbers_for_a_window(
    filled: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ldp estimates` reads what `ldp export` writes: one window, the API's numbers."""
    monkeypatch.setattr(console.out, "width", 160)  # no folded labels
    redis_db, web, theme, minutes, windows = filled
    day = sorted(w for w in windows if w.startswith("day:"))[0]
    url = ("--redis-url", redis_db.url)
    result = CliRunner().invoke(
        main, ["estimates", "app.minutes", "--window", day, "--format", "json", *url]
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    api = web.get(f"/v1/estimates/app.minutes?window={day}").json
    assert (row["n"], row["estimate"], row["ci_low"], row["ci_high"]) == (
        api["n"], api["mean"], api["ci_low"], api["ci_high"],
    )  # fmt: skip
    result = CliRunner().invoke(main, ["estimates", "app.minutes", "--window", day, *url])
    assert result.exit_code == 0, result.output
    assert f"n = {api['n']}" in result.output and "mean" in result.output
    result = CliRunner().invoke(main, ["estimates", "app.theme", "--window", day, *url])
    assert result.exit_code == 0, result.output
    assert all(label in result.output for label in theme.domain)
