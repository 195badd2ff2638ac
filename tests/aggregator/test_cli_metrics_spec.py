"""``ldp metrics create`` says all a spec can: every key has a flag (or ``--spec FILE``),
and what it stores is what a PUT of the same JSON stores; bad values get the collector's
own messages."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aggregator.cli.spec_flags import SPEC_FLAGS, build_spec
from client_sdk.wire import (
    JOINT_SPEC_FIELDS,
    NUMERIC_SPEC_FIELDS,
    SPEC_FIELDS,
    STRING_SPEC_FIELDS,
)
from ldp_server.cli import main
from tests.cli_helpers import collector_serving

TOKEN = "test-admin-token"


@pytest.fixture
def url(redis_db: Any) -> Iterator[str]:
    """A real collector on a free port, on the session's Redis."""
    yield from collector_serving(redis_db.url, TOKEN)


def create(url: str, name: str, *options: str) -> tuple[int, str]:
    args = ["metrics", "create", name, "--url", url, "--token", TOKEN, *options]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


def put(url: str, name: str, spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """PUT a JSON spec straight to the collector: its status and body."""
    req = urllib.request.Request(
        f"{url}/v1/metrics/{name}", data=json.dumps(spec).encode(), method="PUT"
    )
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {TOKEN}")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def stored(url: str, name: str) -> dict[str, Any]:
    """GET /v1/metrics/<name> without the name (to compare two metrics' definitions)."""
    with urllib.request.urlopen(f"{url}/v1/metrics/{name}") as r:
        body = json.loads(r.read())
    body.pop("name")
    return body


def test_every_spec_key_has_a_flag() -> None:
    keys = {row.path[0] for row in SPEC_FLAGS}
    assert keys == SPEC_FIELDS | NUMERIC_SPEC_FIELDS | STRING_SPEC_FIELDS | JOINT_SPEC_FIELDS


def test_a_string_metric_by_flags_stores_what_the_json_spec_stores(url: str) -> None:
    spec = {"kind": "string", "max_length": 12, "epsilon": 4.0, "options": {"rows": 16}}
    assert put(url, "by.json", spec)[0] == 201
    code, out = create(url, "by.flags", "--kind", "string", "--max-length", "12", "-e", "4",
                       "--option", "rows=16")  # fmt: skip
    assert code == 0, out
    by_flags, by_json = stored(url, "by.flags"), stored(url, "by.json")
    for body in (by_flags, by_json):
        body["mechanism"].pop("salt")  # each string metric draws its own hash salt
    assert by_flags == by_json and by_flags["max_length"] == 12


def stored_alike(url: str, name: str, spec: dict[str, Any], *flags: str) -> None:
    """``NAME.json`` put as ``spec`` and ``NAME.flags`` made by ``ldp metrics create`` with
    ``flags``: the collector stores the same definition."""
    assert put(url, f"{name}.json", spec)[0] == 201
    code, out = create(url, f"{name}.flags", *flags)
    assert code == 0, out
    assert stored(url, f"{name}.flags") == stored(url, f"{name}.json")


def test_a_joint_metric_by_flags_stores_what_the_json_spec_stores(url: str) -> None:
    spec = {
        "kind": "joint",
        "epsilon": 2.0,
        "attributes": [
            {"name": "os", "domain": ["android", "ios"]},
            {"name": "crash", "domain": ["none", "oom", "anr"]},
        ],
    }
    flags = ("--attribute", "os=android,ios", "--attribute", "crash=none,oom,anr")
    stored_alike(url, "joint", spec, "--kind", "joint", "-e", "2", *flags)
    code, out = create(url, "joint.bad", "--kind", "joint", "-e", "2", "--attribute", "os")
    assert code != 0 and "--attribute takes NAME=a,b,c" in out


# Each case: the flags, and the JSON spec a person would PUT for the same metric.
ROUND_TRIPS = [
    (
        [
            *("-d", "a,b,c", "-e", "1", "-m", "grr", "--permanent-epsilon", "4"),
            *("--budget-reports", "2", "--budget-period", "week", "--shards", "3"),
            *("--description", "a memoized one", "--retention-hour", "7200"),
            *("--retention-day", "86400"),
        ],
        {
            "domain": ["a", "b", "c"],
            "epsilon": 1,
            "mechanism": "grr",
            "longitudinal": {"permanent_epsilon": 4},
            "budget": {"reports_per_period": 2, "period": "week"},
            "shards": 3,
            "description": "a memoized one",
            "retention": {"hour": 7200, "day": 86400},
        },
    ),
    (  # the case: a memo-* mechanism named outright
        ["-d", "x,y", "-e", "0.5", "-m", "memo-grr", "--permanent-epsilon", "2"]
        + ["--budget-reports", "1", "--budget-period", "day"],
        {
            "domain": ["x", "y"],
            "epsilon": 0.5,
            "mechanism": "memo-grr",
            "longitudinal": {"permanent_epsilon": 2},
            "budget": {"reports_per_period": 1, "period": "day"},
        },
    ),
    (
        ["-d", "a,b,c,d,e", "-e", "2", "-m", "olh", "--option", "g=3"],
        {
            "domain": ["a", "b", "c", "d", "e"],
            "epsilon": 2,
            "mechanism": "olh",
            "options": {"g": 3},
        },
    ),
    (
        ["--kind", "numeric", "--range", "-5,12.5", "-e", "2", "-m", "pm", "--shards", "2"],
        {"kind": "numeric", "range": [-5, 12.5], "epsilon": 2, "mechanism": "pm", "shards": 2},
    ),
    (
        ["--kind", "numeric", "--range=0,100", "-e", "1", "--budget-reports", "3"]
        + ["--budget-period", "month"],
        {
            "kind": "numeric",
            "range": [0, 100],
            "epsilon": 1,
            "budget": {"reports_per_period": 3, "period": "month"},
        },
    ),
]


@pytest.mark.parametrize(("flags", "spec"), ROUND_TRIPS)
def test_flags_store_what_the_json_spec_stores(
    url: str, flags: list[str], spec: dict[str, Any]
) -> None:
    code, out = create(url, "by.flags", *flags)
    assert code == 0, out
    status, _ = put(url, "by.json", spec)
    assert status == 201
    from_flags, from_json = stored(url, "by.flags"), stored(url, "by.json")
    assert from_flags == from_json
    # and the values really arrived (not two empty defaults agreeing)
    for key, value in spec.items():
        if key in ("budget", "shards", "description", "retention", "range", "kind"):
            assert from_flags[key] == value
    if "longitudinal" in spec:
        assert from_flags["mechanism"]["mechanism"] == "memo-grr"
        permanent = spec["longitudinal"]["permanent_epsilon"]
        assert from_flags["mechanism"]["permanent_epsilon"] == permanent
    if "options" in spec:
        assert from_flags["mechanism"]["g"] == 3


def test_a_pram_matrix_goes_in_an_option_as_json_or_a_file(url: str, tmp_path: Path) -> None:
    matrix = [[0.7, 0.2, 0.1], [0.15, 0.7, 0.15], [0.1, 0.2, 0.7]]
    spec = {
        "domain": ["young", "middle", "old"],
        "mechanism": "pram",
        "options": {"matrix": matrix},
    }
    assert put(url, "by.json", spec)[0] == 201
    code, out = create(url, "by.flags", "-d", "young,middle,old", "-m", "pram",
                       "--option", "matrix=" + json.dumps(matrix))  # fmt: skip
    assert code == 0, out
    (tmp_path / "m.json").write_text(json.dumps(matrix))
    code, out = create(url, "by.file", "-d", "young,middle,old", "-m", "pram",
                       "--option", f"matrix=@{tmp_path / 'm.json'}")  # fmt: skip
    assert code == 0, out
    assert stored(url, "by.flags") == stored(url, "by.json") == stored(url, "by.file")


def test_a_spec_file_with_flags_over_it(url: str, tmp_path: Path) -> None:
    toml = tmp_path / "theme.toml"
    toml.write_text(
        'domain = ["light", "dark"]\nepsilon = 1.0\nmechanism = "grr"\n'
        'description = "from the file"\n'
        '[budget]\nreports_per_period = 1\nperiod = "day"\n'
        "[retention]\nhour = 3600\n"
    )
    code, out = create(url, "from.toml", "--spec", str(toml), "-e", "2", "--retention-day", "7")
    assert code == 0, out
    body = stored(url, "from.toml")
    assert body["mechanism"]["mechanism"] == "grr" and body["mechanism"]["epsilon"] == 2
    assert body["description"] == "from the file"
    assert body["budget"] == {"reports_per_period": 1, "period": "day"}
    assert body["retention"] == {"hour": 3600, "day": 7}  # the flag adds to the file's table

    as_json = tmp_path / "theme.json"
    as_json.write_text(json.dumps({"kind": "numeric", "range": [0, 10], "epsilon": 1}))
    code, out = create(url, "from.json", "--spec", str(as_json))
    assert code == 0, out
    assert stored(url, "from.json")["range"] == [0, 10]

    for bad, says in (("[1, 2]", "one metric's spec"), ("{nope", "cannot read --spec")):
        as_json.write_text(bad)
        code, out = create(url, "from.json", "--spec", str(as_json))
        assert code == 2 and says in out and "Traceback" not in out, out


def test_build_spec_places_flags_over_a_file() -> None:
    base = {"options": {"g": 2}, "budget": 5}
    spec = build_spec(
        base, {"spec_option": ("s=1",), "spec_budget_period": "day", "spec_epsilon": "1e-1"}
    )
    assert spec == {"options": {"g": 2, "s": 1}, "budget": {"period": "day"}, "epsilon": 0.1}
    assert base == {"options": {"g": 2}, "budget": 5}  # the file's spec is not changed


# Each case: bad flags, and the same bad spec as JSON.
BAD = [
    (
        ["-d", "a,b", "-e", "1", "--shards", "65"],
        {"domain": ["a", "b"], "epsilon": 1, "shards": 65},
    ),
    (
        ["-d", "a,b", "-e", "abc", "--retention-day", "0"],
        {"domain": ["a", "b"], "epsilon": "abc", "retention": {"day": 0}},
    ),
    (
        ["-d", "a,a", "-e", "1", "--budget-reports", "2", "--budget-period", "year"],
        {"domain": ["a", "a"], "epsilon": 1, "budget": {"reports_per_period": 2, "period": "year"}},
    ),
    (  # a memoized metric without a budget: what `-m memo-grr` alone used to run into
        ["-d", "a,b", "-e", "1", "-m", "memo-grr", "--permanent-epsilon", "3"],
        {
            "domain": ["a", "b"],
            "epsilon": 1,
            "mechanism": "memo-grr",
            "longitudinal": {"permanent_epsilon": 3},
        },
    ),
    (
        ["--kind", "numeric", "--range", "5,1", "-e", "1", "-m", "grr"],
        {"kind": "numeric", "range": [5, 1], "epsilon": 1, "mechanism": "grr"},
    ),
    (
        ["--kind", "numeric", "--range", "1,2,3", "-e", "1"],
        {"kind": "numeric", "range": [1, 2, 3], "epsilon": 1},
    ),
    (
        ["-d", "a,b", "-e", "1", "--budget-reports", "1"],
        {"domain": ["a", "b"], "epsilon": 1, "budget": {"reports_per_period": 1}},
    ),
    (
        ["-d", "a,b", "-e", "1", "-m", "sue", "--option", "g=2"],
        {"domain": ["a", "b"], "epsilon": 1, "mechanism": "sue", "options": {"g": 2}},
    ),
]


@pytest.mark.parametrize(("flags", "spec"), BAD)
def test_errors_are_the_collectors(url: str, flags: list[str], spec: dict[str, Any]) -> None:
    status, body = put(url, "bad.one", spec)
    assert status == 400 and body["details"]
    code, out = create(url, "bad.one", *flags)
    assert code == 2 and "Traceback" not in out, out
    assert "invalid metric definition" in out
    flat = " ".join(out.split())
    for problem in body["details"]:
        assert " ".join(problem.split()) in flat, (problem, out)
    assert stored_or_none(url, "bad.one") is None  # nothing was created


def stored_or_none(url: str, name: str) -> dict[str, Any] | None:
    try:
        return stored(url, name)
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return None


def test_a_problem_names_its_flag(url: str) -> None:
    code, out = create(url, "bad.two", "-d", "a,b", "-e", "1", "--budget-period", "year")
    assert code == 2
    assert "(--budget-reports, --budget-period)" in " ".join(out.split())
    code, out = create(url, "bad.two", "-d", "a,b", "-e", "1", "--retention-hour", "-1")
    assert code == 2 and "retention.hour must be" in out and "(--retention-hour)" in out
    code, out = create(url, "bad.two", "-d", "a,b", "-e", "1", "--option", "g")
    assert code == 2 and "KEY=VALUE" in out


def test_a_nested_or_option_problem_names_its_own_flag(url: str) -> None:
    """New-user finding: ε∞ and matrix problems were blamed on --mechanism."""
    code, out = create(url, "bad.memo", "-d", "a,b", "-e", "1", "-m", "memo-grr",
                       "--permanent-epsilon", "0.5", "--budget-reports", "1",
                       "--budget-period", "day")  # fmt: skip
    assert code == 2 and "(--permanent-epsilon)" in out and "(--mechanism)" not in out
    code, out = create(url, "bad.pram", "-d", "a,b", "-m", "pram",
                       "--option", "matrix=[[0.5, 0.5], [0.5, 0.5]]")  # fmt: skip
    assert code == 2 and "(--option matrix=…)" in out and "(--mechanism)" not in out


def test_dimensions_by_flags_store_what_the_json_spec_stores(url: str) -> None:
    spec = {
        "domain": ["light", "dark"],
        "epsilon": 1.0,
        "dimensions": [
            {"name": "platform", "values": ["ios", "android", "web"]},
            {"name": "app_version", "values": ["1.0", "2.0"]},
        ],
    }
    flags = ("--dimension", "platform=ios,android,web", "--dimension", "app_version=1.0,2.0")
    stored_alike(url, "dims", spec, "-d", "light,dark", "-e", "1", *flags)
    code, out = create(url, "dims.bad", "-d", "a,b", "-e", "1", "--dimension", "platform")
    assert code != 0 and "--dimension takes NAME=a,b,c" in out
    many = (
        "--dimension",
        "a=" + ",".join(f"v{i}" for i in range(9)),
        "--dimension",
        "b=" + ",".join(f"w{i}" for i in range(9)),
    )
    code, out = create(url, "dims.fine", "-d", "a,b", "-e", "1", *many)
    assert code != 0 and "81 segments" in out and "--dimension" in out
