"""The shipped Prometheus rules and Grafana dashboards (deploy/), against promtool and a
real ``ldp serve``.

* ``promtool check rules`` and ``promtool test rules`` on deploy/prometheus/ (Debian's
  ``prometheus`` package; ``tasks.py test`` installs it as root, else these skip);
* the dashboards' JSON is deploy/grafana/dashboards.py's output (grafanalib);
* every PromQL expression of the rules and dashboards parses (promtool, as recording
  rules) and names only series a real ``ldp serve``, started here and exercised (reports
  accepted and rejected, a 503, a relayed request refused), exports on ``/metrics``.

Guide: docs/guides/alerts.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is missing: Debian's prometheus package (tasks.py test installs it as root)",
)


def _promtool(*args: str, cwd: Path = PROMETHEUS) -> str:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def expressions() -> dict[str, str]:
    """Every PromQL expression shipped: the rules' and the dashboards' panels'."""
    out = {}
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            out[f"rule {rule['alert']}"] = rule["expr"]
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                out[f"{path.name}: {panel['title']} {target['refId']}"] = target["expr"]
    return out


@needs_promtool
def test_the_alerting_rules_pass_their_promtool_unit_tests() -> None:
    assert "SUCCESS: 12 rules found" in _promtool("check", "rules", "alerts.yml")
    assert "SUCCESS" in _promtool("test", "rules", "alerts_test.yml")


def test_the_dashboards_are_what_their_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "dashboards", ROOT / "deploy" / "grafana" / "dashboards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = {p.stem: p.read_text() for p in DASHBOARDS.glob("*.json")}
    assert written == module.rendered(), "run python deploy/grafana/dashboards.py"


@needs_promtool
def test_every_expression_parses(tmp_path: Path) -> None:
    shipped = expressions()
    rules = {
        "groups": [
            {
                "name": "shipped",
                "rules": [
                    {"record": f"ldp_check_{i}", "expr": expr}
                    for i, expr in enumerate(shipped.values())
                ],
            }
        ]
    }
    (tmp_path / "all.yml").write_text(yaml.safe_dump(rules))
    assert f"SUCCESS: {len(shipped)} rules found" in _promtool(
        "check", "rules", "all.yml", cwd=tmp_path
    )


def _call(url: str, method: str = "GET", body: Any = None, **headers: str) -> int:
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def exported(text: str) -> set[str]:
    """The series names of a /metrics page (a histogram's _bucket, _sum and _count)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_expression_names_a_series_ldp_serve_exports(tmp_path: Path) -> None:
    from client_sdk.wire import MetricDefinition, build_report
    from ldp_server.serve import Server

    os.environ["LDP_MAX_BACKLOG"] = "6"  # no aggregator below: the 2nd batch is a 503
    try:
        server = Server(
            port=0, data_dir=tmp_path / "data", web_workers=1, aggregators=0, quiet=True
        ).start()
    finally:
        del os.environ["LDP_MAX_BACKLOG"]
    try:
        admin = {"Authorization": f"Bearer {server.admin_token}"}
        spec = {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "grr"}
        body = urllib.request.urlopen(  # noqa: S310
            urllib.request.Request(
                f"{server.url}/v1/metrics/ops.check",
                data=json.dumps(spec).encode(),
                method="PUT",
                headers={"Content-Type": "application/json", **admin},
            ),
            timeout=30,
        ).read()
        d = MetricDefinition.from_dict(json.loads(body))
        rng = random.Random(40)
        good = [build_report(d, "a", rng) for _ in range(8)]
        assert _call(f"{server.url}/v1/reports", "POST", {"reports": good[:4]}) == 202
        bad = {**good[0], "payload": {"nope": 1}}
        assert _call(f"{server.url}/v1/reports", "POST", {"reports": [bad]}) in (400, 422)
        assert _call(f"{server.url}/v1/reports", "POST", {"reports": good[4:]}) == 503
        gateway = f"{server.url}/.well-known/ohttp-gateway"
        _call(gateway, "POST", b"x", **{"Content-Type": "text/plain"})
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as response:
            names = exported(response.read().decode())
    finally:
        server.stop()
    missing = {
        where: sorted(set(re.findall(r"\bldp_[a-z0-9_]+", expr)) - names)
        for where, expr in expressions().items()
    }
    assert {where: gone for where, gone in missing.items() if gone} == {}
