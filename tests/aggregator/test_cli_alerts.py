"""``ldp alerts``: the commands on one rule take --url, RULE_ID, their own option, then
--token, and refuse to change a rule without an admin token before any request."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from aggregator.cli.alerts import alerts

ON_RULE = {
    "ack": ["url", "rule_id", "note", "token"],
    "resolve": ["url", "rule_id", "note", "token"],
    "silence": ["url", "rule_id", "seconds", "token"],
    "delete": ["url", "rule_id", "token"],
}


@pytest.mark.parametrize("name", sorted(ON_RULE))
def test_a_rule_command_lists_its_parameters_in_order(name: str) -> None:
    command = alerts.commands[name]
    assert [p.name for p in command.params] == ON_RULE[name]
    url = next(p for p in command.params if p.name == "url")
    assert url.envvar == "LDP_URL" and url.default == "http://127.0.0.1:8000"
    token = next(p for p in command.params if p.name == "token")
    assert token.envvar == "LDP_ADMIN_TOKEN"


@pytest.mark.parametrize("name", sorted(ON_RULE))
def test_a_rule_change_without_an_admin_token_is_a_usage_error(name: str) -> None:
    # a closed port: the token is asked for before any request is made
    args = [name, "rule-1", "--url", "http://127.0.0.1:9"]
    result = CliRunner().invoke(alerts, args, env={"LDP_ADMIN_TOKEN": ""})
    assert result.exit_code == 2, result.output
    assert "an admin token is needed" in result.output


def test_silence_seconds_are_not_negative() -> None:
    result = CliRunner().invoke(alerts, ["silence", "rule-1", "--seconds", "-1"])
    assert result.exit_code == 2 and "-1" in result.output
