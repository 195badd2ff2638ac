"""``ldp lint``: each rule with a failing and a passing registry; the composition
arithmetic against hand-computed cases and against the ε audit of a two-metric registry."""

from __future__ import annotations

import json
import math
import random
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from aggregator.analysis.audit import audit
from aggregator.catalog.composition import MetricLoad, account, advanced_epsilon, periods_in
from aggregator.catalog.lint import RULES, lint_file
from client_sdk.device import DeviceCaps
from ldp_server.cli import main
from ldp_server.demo import DEMO_REGISTRY

TODAY = date(2026, 12, 2)

APP = """[app]
name = "notes"
[app.budget]
epsilon_per_day = 4.0
epsilon_per_period = 10.0
period = "week"
epsilon_lifetime = 1000.0
"""

METRIC = """[metrics."app.theme"]
domain = ["light", "dark"]
epsilon = 1.0
budget = { reports_per_period = 1, period = "day" }
description = "The colour theme."
owners = ["ana@example.org"]
data_review = "https://example.org/reviews/1"
expires = 2027-06-30
"""


def write(tmp_path: Path, text: str, name: str = "metrics.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def rules_of(path: str) -> set[str]:
    return {f.rule for f in lint_file(path, TODAY).findings}


def test_a_clean_registry_has_no_finding(tmp_path: Path) -> None:
    assert rules_of(write(tmp_path, APP + METRIC)) == set()


FAILING = {
    "spec": METRIC.replace("epsilon = 1.0", "epsilon = -1.0"),
    "unknown-field": METRIC + "owner = 'typo'\n",
    "missing-owner": METRIC.replace('owners = ["ana@example.org"]\n', ""),
    "missing-description": METRIC.replace('description = "The colour theme."\n', ""),
    "missing-review": METRIC.replace("https://example.org/reviews/1", "http://x"),
    "missing-expiry": METRIC.replace("expires = 2027-06-30\n", ""),
    "expired": METRIC.replace("2027-06-30", "2026-12-01"),
    "expiry-too-far": METRIC.replace("2027-06-30", "2028-12-03"),
    "no-budget": METRIC.replace('budget = { reports_per_period = 1, period = "day" }\n', ""),
    "over-budget": METRIC.replace("reports_per_period = 1", "reports_per_period = 5"),
}
"""A registry breaking each metric rule (with the passing :data:`APP` table)."""


@pytest.mark.parametrize("rule", sorted(FAILING))
def test_each_rule_fails_its_registry_and_passes_the_clean_one(tmp_path: Path, rule: str) -> None:
    failing = write(tmp_path, APP + FAILING[rule])
    assert rule in rules_of(failing)
    assert rule not in rules_of(write(tmp_path, APP + METRIC, "ok.toml"))


def test_an_empty_registry_is_clean_and_needs_its_metrics_table(tmp_path: Path) -> None:
    assert rules_of(write(tmp_path, APP + "[metrics]\n")) == set()
    with pytest.raises(ValueError, match="an empty \\[metrics\\] table"):
        lint_file(write(tmp_path, APP), TODAY)


def test_app_rules(tmp_path: Path) -> None:
    assert "no-app-budget" in rules_of(write(tmp_path, METRIC))
    assert "unknown-field" in rules_of(write(tmp_path, APP + "epsilon_per_yr = 3\n" + METRIC))
    assert "app" in rules_of(write(tmp_path, APP.replace('"week"', '"fortnight"') + METRIC))
    capped = APP + "[app.device_caps]\nepsilon_per_day = 0.5\n" + METRIC
    result = lint_file(write(tmp_path, capped), TODAY)
    assert [f.rule for f in result.findings] == ["caps-refuse"]
    assert not result.failed() and result.failed(strict=True)
    assert result.account.windows["day"].total == 0.5  # the cap applied


def test_an_expiry_exactly_two_years_out_and_today_pass(tmp_path: Path) -> None:
    for day in ("2028-12-02", "2026-12-02"):
        assert rules_of(write(tmp_path, APP + METRIC.replace("2027-06-30", day))) == set()


def test_findings_name_file_line_and_rule_and_exit_non_zero(tmp_path: Path) -> None:
    path = write(tmp_path, APP + FAILING["unknown-field"])
    result = CliRunner().invoke(main, ["lint", path, "--today", TODAY.isoformat(), "-q"])
    assert result.exit_code == 1
    line = next(i for i, t in enumerate(Path(path).read_text().splitlines(), 1) if "owner =" in t)
    assert result.output.splitlines() == [
        f"{path}:{line}: unknown-field: app.theme: owner is not a field of this kind of metric; "
        "allowed: budget, data_review, description, dimensions, domain, epsilon, expires, "
        "kind, longitudinal, mechanism, options, owners, retention, shards, version"
    ]
    as_json = CliRunner().invoke(main, ["lint", path, "--today", "2026-12-02", "--format", "json"])
    assert as_json.exit_code == 1
    data = json.loads(as_json.output)
    assert data["findings"][0]["line"] == line and data["ok"] is False
    assert data["windows"]["day"]["metrics"]["app.theme"] == {"epsilon": 1.0, "share": 0.25}


def test_a_json_registry_is_linted_with_lines(tmp_path: Path) -> None:
    spec = {
        "app": {
            "budget": {"epsilon_per_day": 4, "epsilon_per_period": 10, "epsilon_lifetime": 200}
        },
        "metrics": {"app.theme": {"domain": ["a", "b"], "epsilon": 1.0, "colour": 1}},
    }
    path = write(tmp_path, json.dumps(spec, indent=2), "metrics.json")
    found = {f.rule: f.line for f in lint_file(path, TODAY).findings}
    assert found["unknown-field"] == 16  # the "colour" key's line
    assert {"missing-owner", "no-budget", "missing-expiry"} <= set(found)


def test_a_bad_file_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "[metrics\n")
    result = CliRunner().invoke(main, ["lint", path])
    assert result.exit_code == 1 and "cannot read metrics file" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_every_rule_is_documented() -> None:
    guide = Path(__file__).parents[2] / "docs" / "guides" / "metrics-as-code.md"
    text = guide.read_text()
    assert [r for r in RULES if f"`{r}`" not in text] == []


# -- the arithmetic --------------------------------------------------------------------------


def test_overlaps_by_hand() -> None:
    # A 31-day month from a Sunday touches 6 ISO weeks; a week straddles 2 months.
    assert periods_in("week", "month") == 6 and periods_in("month", "week") == 2
    assert periods_in("day", "year") == 366 and periods_in("week", "year") == 54


def test_sequential_composition_by_hand() -> None:
    theme = MetricLoad("a", 1.0, 2, "day", expires=date(2026, 12, 31))  # 30 days left
    country = MetricLoad("b", 0.5, 3, "week", expires=date(2026, 12, 31))  # weeks of 30 Nov…28 Dec
    memo = MetricLoad("c", 0.5, 1, "day", permanent_epsilon=3.0)  # never expires
    acct = account([theme, country, memo], TODAY)
    assert acct.windows["day"].per_metric == {"a": 2.0, "b": 1.5, "c": 0.5}
    assert acct.windows["week"].per_metric == {"a": 14.0, "b": 1.5, "c": 3.0}  # c: ε∞
    assert acct.windows["month"].uncapped == 62.0 + 9.0 + 3.0
    assert acct.windows["lifetime"].per_metric == {"a": 60.0, "b": 7.5, "c": 3.0}
    capped = account([theme, country, memo], TODAY, DeviceCaps(epsilon_per_day=3.0))
    assert capped.windows["day"].total == 3.0 and capped.windows["week"].total == 18.5
    assert math.isinf(account([MetricLoad("d", 1.0, None)], TODAY).windows["day"].total)


def test_advanced_composition_by_hand() -> None:
    # 1,000 reports at ε = 0.01, δ = 1e-6: √(2·ln 1e6·0.1) + 1000·0.01·(e^0.01 − 1).
    expected = math.sqrt(2 * math.log(1e6) * 1000 * 0.01**2) + 10 * math.expm1(0.01)
    assert advanced_epsilon([(0.01, 1000)], 1e-6) == pytest.approx(expected)
    assert expected < 10.0  # tighter than basic composition's 10 here
    assert advanced_epsilon([(2.0, 5)], 1e-6) > 10.0  # and looser for few large ε
    # Device caps do not enter it (a cap chooses reports adaptively: a filter's job).
    capped = account([MetricLoad("a", 0.01, 1000)], TODAY, DeviceCaps(0.5), delta=1e-6)
    assert capped.windows["day"].advanced == pytest.approx(expected)
    assert capped.windows["day"].total == 0.5


def test_a_two_metric_registry_is_above_the_audited_epsilon(tmp_path: Path) -> None:
    """Per report of each metric, the lint's worst case for the pair is ε₁ + ε₂; the audit
    lower-bounds each metric's realised ε, and a pair of independent reports realises the
    sum of their log-likelihood ratios: the audited sum stays below the lint's and close
    to it (GRR and OUE realise their ε)."""
    second = METRIC.replace("app.theme", "app.mode").replace("epsilon = 1.0", "epsilon = 2.0")
    second = second.replace(
        'domain = ["light", "dark"]', 'domain = ["a", "b", "c", "d"]\nmechanism = "oue"'
    )
    second = second.replace('period = "day"', 'period = "week"')
    result = lint_file(write(tmp_path, APP + METRIC + second), TODAY)
    assert result.findings == ()
    day = result.account.windows["day"]
    audited = 0.0
    for seed, entry in enumerate(result.registry.entries):
        assert entry.definition is not None
        found = audit(entry.definition.oracle, trials=20_000, rng=random.Random(seed))
        assert found.passed
        audited += found.epsilon_lower_bound
    assert day.total == 3.0
    assert 0.7 * day.total < audited <= day.total


def test_the_demo_registry_lints_clean() -> None:
    result = lint_file(str(DEMO_REGISTRY), TODAY)
    assert result.findings == ()
    assert result.account.windows["day"].total == 8.0  # 1 + 2 + 1 + 4, the app's daily cap
