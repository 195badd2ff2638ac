"""The metrics file (``ldp serve --metrics``, ``Client(definitions=…)``): TOML's dotted keys.

New-user finding (issue 36, item 10): ``[metrics.app.x]`` is, to TOML, a table ``x``
inside a metric ``app``; the server then said "metric 'app': unknown fields ['x']",
which names neither the cause nor the cure. Both readers now say to quote the name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from client_sdk import Client
from client_sdk.bundle import load_bundle, load_metrics_file
from ldp_server.cli import main

SPEC = 'domain = ["light", "dark"]\nepsilon = 1.0\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "metrics.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("header", "dotted", "inner"),
    [
        ("[metrics.app.theme]", "app.theme", "theme"),
        ("[metrics.app.ui.theme]", "app.ui.theme", "ui.theme"),
        ("[app.theme]", "app.theme", "theme"),  # no metrics table: the top level is it
    ],
)
def test_a_dotted_name_split_by_toml_gets_the_quoting_hint(
    tmp_path: Path, header: str, dotted: str, inner: str
) -> None:
    path = write(tmp_path, f"{header}\n{SPEC}")
    with pytest.raises(ValueError) as caught:
        load_metrics_file(path)
    message = str(caught.value)
    assert f"metric 'app' holds a table '{inner}'" in message
    assert f'quote a dotted name: [metrics."{dotted}"]' in message
    with pytest.raises(ValueError, match="quote a dotted name"):
        Client("http://127.0.0.1:9", definitions=path)


def test_ldp_serve_says_it_before_starting(tmp_path: Path) -> None:
    path = write(tmp_path, f"[metrics.app.theme]\n{SPEC}")
    data = tmp_path / "data"
    result = CliRunner().invoke(main, ["serve", "--metrics", str(path), "--data-dir", str(data)])
    assert result.exit_code != 0
    assert '[metrics."app.theme"]' in result.output
    assert "unknown fields" not in result.output
    assert not data.exists()  # nothing started


def test_quoted_names_and_a_specs_own_tables_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f'[metrics."app.theme"]\n{SPEC}\n'
        '[metrics."app.screen"]\ndomain = ["a", "b", "c"]\nepsilon = 1.0\nmechanism = "memo-grr"\n'
        '[metrics."app.screen".longitudinal]\npermanent_epsilon = 4.0\n'
        '[metrics."app.screen".budget]\nreports_per_period = 1\nperiod = "day"\n',
    )
    bundle = load_bundle(path)
    assert sorted(bundle) == ["app.screen", "app.theme"]
    assert bundle["app.screen"].budget is not None


def test_a_json_file_is_taken_as_written(tmp_path: Path) -> None:
    """JSON has no dotted keys: a nested object is what its author wrote (the spec's own
    check names the unknown field)."""
    path = tmp_path / "metrics.json"
    path.write_text('{"metrics": {"app": {"theme": {"domain": ["a"], "epsilon": 1}}}}')
    assert load_metrics_file(path) == {"app": {"theme": {"domain": ["a"], "epsilon": 1}}}


def test_a_distribution_metric_with_its_distribution_table_loads(tmp_path: Path) -> None:
    """A distribution metric's own ``distribution`` table is not a dotted name split by TOML
    (the test fails on the old code, which did not know the key)."""
    path = write(
        tmp_path,
        '[metrics."load.ms"]\nkind = "numeric"\nrange = [0, 1000]\nepsilon = 2.0\n'
        "distribution = { bins = 256 }\n",
    )
    assert load_bundle(path)["load.ms"].kind == "distribution"
