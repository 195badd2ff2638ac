"""``ldp serve --metrics REGISTRY``: a registry is applied only if it lints clean, and the
server says which metrics changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from client_sdk.bundle import load_bundle, load_metrics_file, split_version
from ldp_server.cli import main
from ldp_server.commands import apply_metrics
from ldp_server.demo import DEMO_REGISTRY
from ldp_store.registry_source import load_source


def test_the_sdk_bundles_a_registry_leaving_the_governance_fields_out() -> None:
    bundle = load_bundle(DEMO_REGISTRY)
    assert sorted(bundle) == ["app.theme", "app.version", "feature.first_used", "user.country"]
    spec, version = split_version("a", {"domain": ["x", "y"], "owners": ["o"], "version": 2})
    assert spec == {"domain": ["x", "y"]} and version == 2


def test_serve_refuses_a_registry_that_does_not_lint_clean(tmp_path: Path) -> None:
    path = tmp_path / "metrics.toml"
    path.write_text(DEMO_REGISTRY.read_text().replace("growth@example.org", ""))
    data = tmp_path / "data"
    ran = CliRunner().invoke(main, ["serve", "--metrics", str(path), "--data-dir", str(data)])
    assert ran.exit_code == 1
    assert "missing-owner: user.country" in ran.output
    assert "does not lint clean (1 errors): nothing applied" in ran.output
    assert not data.exists()  # nothing started


def test_applying_says_which_metrics_changed(
    redis_db: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.toml"

    def apply(text: str) -> list[str]:
        path.write_text(text)
        specs = {n: split_version(n, t) for n, t in load_metrics_file(path).items()}
        apply_metrics(redis_db.client(), str(path), specs)
        return capsys.readouterr().out.splitlines()

    first = DEMO_REGISTRY.read_text()
    assert all(line.endswith("(new)") for line in apply(first))
    second = first.replace(
        'epsilon = 2.0\nbudget = { reports_per_period = 1, period = "week" }',
        'epsilon = 1.5\nbudget = { reports_per_period = 1, period = "week" }',
    )
    second = second.replace("Installed app version.", "The installed app version.")
    lines = dict(line.split(":", 1) for line in apply(second))
    assert lines["metric user.country v2"].endswith("(changed: new version (v1 before))")
    assert lines["metric app.version v1"].endswith(
        "(updated: description, budget or retention; same version)"
    )
    assert lines["metric app.theme v1"].endswith("(unchanged)")
    assert load_source(redis_db.client()) == ("metrics.toml", second)
