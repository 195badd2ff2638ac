"""What a new user meets first: ``ldp metrics``, ``serve``'s token line, help, audit warnings."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from aggregator.analysis.audit import AuditResult
from aggregator.cli import metrics as cli_metrics
from aggregator.cli.audit import inconclusive
from ldp_server import commands as cli_server
from ldp_server.cli import main
from ldp_store.embedded import free_port
from ldp_store.registry import Registry
from loadtests import run as loadrun
from tests.cli_helpers import collector_serving
from tests.cli_helpers import ldp as invoke

TOKEN = "test-admin-token"


@pytest.fixture
def collector_url(redis_db: Any) -> Iterator[str]:
    """A real collector (PUT/GET /v1/metrics) on a free port, on the session's Redis."""
    yield from collector_serving(redis_db.url, TOKEN)


def create(url: str, name: str, *options: str) -> tuple[int, str]:
    return invoke("metrics", "create", name, "--url", url, "--token", TOKEN, *options)


# -- 1. metric names are checked with the server's rule, before any request ---------------


@pytest.mark.parametrize("name", ["bad name!", "bad name", "thé.me", "a/b", "Upper", "x" * 65])
def test_bad_metric_names_are_usage_errors_not_tracebacks(name: str) -> None:
    # an unreachable URL: the name must be refused before anything is sent
    url = "http://127.0.0.1:9"
    for args in (
        ("metrics", "create", name, "--url", url, "--token", TOKEN, "-d", "a,b", "-e", "1"),
        ("metrics", "show", name, "--url", url),
    ):
        code, out = invoke(*args)
        assert code == 2, out
        assert "Invalid value for 'NAME'" in out and "metric name" in out
        assert "Traceback" not in out and "cannot reach" not in out and "404" not in out


def test_metric_urls_quote_the_name() -> None:
    url = cli_metrics._metric_url("http://h:1/", "a/b c", "?version=2")
    assert url == "http://h:1/v1/metrics/a%2Fb%20c?version=2"


# -- 2. a new version is announced, with where the old estimates are ----------------------


def test_create_announces_a_new_version(collector_url: str) -> None:
    code, out = create(collector_url, "app.theme", "-d", "light,dark", "-e", "1", "-m", "grr")
    assert code == 0, out
    assert "app.theme v1: grr" in out and "note:" not in out and "unchanged" not in out

    code, out = create(collector_url, "app.theme", "-d", "light,dark", "-e", "1", "-m", "grr")
    assert code == 0, out
    assert "app.theme v1: grr" in out and "unchanged" in out and "note:" not in out

    code, out = create(collector_url, "app.theme", "-d", "light,dark,auto", "-e", "1")
    assert code == 0, out
    assert "app.theme v2:" in out
    assert "now has version 2" in out and "counts start at zero for v2" in out
    assert f"{collector_url}/v1/estimates/app.theme?version=1" in " ".join(out.split())


# -- 3. JSON shows ε as ε, and stays valid JSON on a stdout that cannot encode it ---------


def test_metrics_show_prints_unicode(collector_url: str) -> None:
    assert create(collector_url, "app.theme", "-d", "a,b", "-e", "1")[0] == 0
    code, out = invoke("metrics", "show", "app.theme", "--url", collector_url)
    assert code == 0, out
    assert "\\u03b5" not in out and "ε" in out
    assert json.loads(out)["name"] == "app.theme"
    code, out = invoke("metrics", "show", "app.theme", "--url", collector_url, charset="ascii")
    assert code == 0, out
    assert "\\u03b5" in out and json.loads(out)["name"] == "app.theme"


# -- 4. serve says where the admin token comes from ----------------------------------------


def test_admin_token_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any) -> None:
    server = SimpleNamespace(redis_url="redis://x", url="http://h:1", data_dir=str(tmp_path))
    monkeypatch.setenv("LDP_ADMIN_TOKEN", "chosen")
    cli_server.print_urls(server)
    assert "taken from LDP_ADMIN_TOKEN" in capsys.readouterr().out
    monkeypatch.delenv("LDP_ADMIN_TOKEN")
    cli_server.print_urls(server)
    assert "set LDP_ADMIN_TOKEN to choose your own" in capsys.readouterr().out


# -- 5. memoized mechanisms take --permanent-epsilon in simulate, and audit points to it ---


def test_simulate_memoized_with_permanent_epsilon() -> None:
    base = ("simulate", "-m", "memo-grr", "-e", "1", "-k", "8", "-n", "20000", "--seed", "3")
    code, out = invoke(*base, "--permanent-epsilon", "4", "--json")
    assert code == 0, out
    assert json.loads(out)["mechanism"]["mechanism"] == "memo-grr"
    for command in (base, ("audit", "-m", "memo-oue", "-e", "1", "-k", "8", "-t", "100")):
        code, out = invoke(*command)
        assert code == 2 and "needs --permanent-epsilon" in out, out
    code, out = invoke("audit", "-m", "grr", "-e", "1", "-k", "8", "--permanent-epsilon", "4")
    assert code == 2 and "--permanent-epsilon is for the memoized" in out, out


# -- 6. too few audit trials: PASS, with a warning that it means nothing -------------------


def test_audit_with_too_few_trials_warns() -> None:
    # A bound of 0 says nothing, whatever the declared ε. (Checked on a result, not on a
    # run: with 100 trials of the real CSPRNG the bound is 0 most of the time, not always.)
    shown_nothing = AuditResult(
        mechanism={"mechanism": "grr"},
        declared_epsilon=1.0,
        epsilon_lower_bound=0.0,
        passed=True,
        event="",
        inputs=(0, 1),
        hits=(30, 28),
        trials=50,
        confidence=0.99,
    )
    warning = inconclusive(shown_nothing, 100)
    assert warning is not None and "inconclusive" in warning and "--trials" in warning
    # 50 evaluation trials at 99 %: no outcome can show ε above ≈ 2.19, so ε = 8 cannot fail
    code, out = invoke("audit", "-m", "grr", "-e", "8", "-k", "8", "-t", "100")
    assert code == 0 and "could not fail" in out
    code, out = invoke("audit", "-m", "grr", "-e", "1", "-k", "4", "-t", "20000", "--seed", "7")
    assert code == 0 and "PASS" in out and "inconclusive" not in out


# -- 7. help texts -------------------------------------------------------------------------


def test_help_texts() -> None:
    code, out = invoke("simulate", "--help")
    assert code == 0 and "4611686018427387904" not in out and "x>=1" in out
    assert "memoized" in out and "--permanent-epsilon" in out
    code, out = invoke("simulate", "-m", "oue", "-e", "1", "-k", "8", "-n", str(2**63))
    assert code == 2 and "more than" in out
    code, out = invoke("metrics", "create", "--help")
    for text in ("ε of one report", "auto (least variance", "oue"):
        assert text in out
    code, out = invoke("serve", "--help")
    flat = " ".join(out.split())
    for text in ("admin token", "logs", "Gunicorn worker processes", "Aggregator worker"):
        assert text in flat


# -- 8. the load test's help and wording -----------------------------------------------------


def test_loadtest_help_shows_defaults(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        loadrun.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 1000000)" in out and f"(default: {loadrun.DEFAULT_USERS})" in out
    assert loadrun._plural(1, "aggregator") == "1 aggregator"
    assert loadrun._plural(2, "web worker") == "2 web workers"


# -- retention -------------------------------------------------------------------------------


def test_create_sets_a_metrics_own_retention(collector_url: str, redis_db: Any) -> None:
    code, out = create(
        collector_url, "app.kept", "-d", "a,b", "-e", "1", "--retention-hour", "7200"
    )
    assert code == 0, out
    definition = Registry(redis_db.client()).get("app.kept")
    assert definition is not None
    assert definition.to_dict()["retention"] == {"hour": 7200, "day": None}
    code, out = create(collector_url, "app.kept2", "-d", "a,b", "-e", "1", "--retention-day", "0")
    assert code == 2 and "--retention-day" in out  # a usage error, no traceback


def test_an_unreachable_collector_is_one_line_with_the_way_out() -> None:
    """New-user finding: a server on another port gave a raw urllib3 error."""

    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(main, ["metrics", "list", "--url", url])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [
        f"Error: cannot reach the collector at {url} (connection refused); is ldp serve "
        "running there? Point at it with --url or LDP_URL"
    ]


# -- privacy columns of `metrics list`, ε∞ of `metrics create` -------------------------------


def _rows(table: str) -> dict[str, list[str]]:
    """A rich table's rows (header included) by their first cell."""
    cells = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in table.splitlines()]
    return {row[0]: row for row in cells if row and row[0]}


def test_list_shows_permanent_epsilon_budget_and_retirement(collector_url: str) -> None:
    """An operator reads each metric's privacy from the list: ε, ε∞ where memoized, the
    device budget with the ε it allows per period, and which metrics are retired."""
    memo = ("-d", "a,b,c", "-e", "1", "--permanent-epsilon", "3")
    assert create(collector_url, "app.memo", *memo, "--budget-reports", "2",
                  "--budget-period", "day")[0] == 0  # fmt: skip
    assert create(collector_url, "app.plain", "-d", "a,b", "-e", "0.5", "-m", "grr")[0] == 0
    code, out = invoke("metrics", "retire", "app.plain", "--url", collector_url, "--token",
                       TOKEN, "-y")  # fmt: skip
    assert code == 0, out

    code, out = invoke("metrics", "list", "--url", collector_url)
    assert code == 0, out
    rows = _rows(out)
    header = rows["metric"]
    assert header == ["metric", "v", "mechanism", "ε", "ε∞", "budget", "values", "retired"]
    memo_row = dict(zip(header, rows["app.memo"], strict=True))
    plain_row = dict(zip(header, rows["app.plain"], strict=True))
    assert memo_row["ε"] == "1" and memo_row["ε∞"] == "3"
    assert memo_row["budget"] == "2/day ε≤2" and memo_row["retired"] == "no"
    assert plain_row["ε"] == "0.5" and plain_row["ε∞"] == "—" and plain_row["budget"] == "none"
    assert plain_row["retired"][:4].isdigit()  # the day it was retired

    code, out = invoke("metrics", "list", "--url", collector_url, "--json")
    assert code == 0, out
    listed = {m["name"]: m for m in json.loads(out)["metrics"]}
    assert listed["app.memo"]["mechanism"]["permanent_epsilon"] == 3
    assert listed["app.memo"]["budget"] == {"reports_per_period": 2, "period": "day"}
    assert "retired_at" not in listed["app.memo"]
    assert listed["app.plain"]["retired_at"].startswith(plain_row["retired"])


def test_create_of_a_memoized_metric_prints_both_bounds(collector_url: str) -> None:
    """ε of one report and ε∞ of any number of reports of one value, in the headline."""
    code, out = create(collector_url, "app.crash", "-d", "a,b,c", "-e", "1",
                       "--permanent-epsilon", "4", "--budget-reports", "1",
                       "--budget-period", "day")  # fmt: skip
    assert code == 0, out
    assert "app.crash v1: memo-" in out
    assert "ε=1 per report, ε∞=4 for an unchanged value, k=3" in out
    code, out = create(collector_url, "app.theme", "-d", "a,b", "-e", "1", "-m", "grr")
    assert code == 0, out
    assert "app.theme v1: grr ε=1, k=2" in out and "ε∞" not in out


def test_create_of_a_pram_metric_explains_its_epsilon(collector_url: str, tmp_path: Path) -> None:
    """The reason reaches the operator whole (rich must not eat "[x, y]" as markup)."""
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps([["0.7", "0.2", "0.1"], ["0.15", "0.7", "0.15"],
                                  ["0.1", "0.2", "0.7"]]))  # fmt: skip
    code, out = create(collector_url, "user.age", "-d", "young,mid,old", "-m", "pram",
                       "--option", f"matrix=@{matrix}")  # fmt: skip
    assert code == 0, out
    assert "user.age v1: pram ε=1.94591, k=3" in out
    assert "realises ε = 1.94591 (e^ε = 7, the largest ratio P[x, y]/P[x′, y]" in out
    code, out = invoke("metrics", "show", "user.age", "--url", collector_url)
    assert code == 0, out
    assert json.loads(out)["mechanism_reason"].startswith("pram: the given 3×3 transition matrix")
