"""Device- and admin-written text reaching people: formula-safe and visible in CSV and the
CLI, raw in JSON and Parquet (``aggregator.safe_text``, ``ldp export``, ``ldp estimates``,
``GET /v1/estimates?format=csv``).

A real Redis, reports counted by the real worker: a categorical metric whose labels an
admin wrote as formulas and with invisible characters, and a string metric whose devices
reported them.
"""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aggregator.cli import console
from aggregator.safe_text import comma_list, csv_text, not_among, visible, visible_parts
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_server.cli import main
from tests.ingest_helpers import post_and_count

TOKEN = "test-admin-token"
HOSTILE = [
    '=HYPERLINK("http://x")',
    "=cmd|' /C calc'!A0",
    "+1+cmd",
    "-2+3",
    "@SUM(A1)",
    "\tTAB",
    "pay\u200bpal\u200d.com",
    "abc\u202etxt.exe",
    "plain",
]
"""Labels (and device values) a spreadsheet would run, or a reader would misread."""

NEUTRALISED = [
    '\'=HYPERLINK("http://x")',
    "'=cmd|' /C calc'!A0",
    "'+1+cmd",
    "'-2+3",
    "'@SUM(A1)",
    "\\u0009TAB",  # the tab is made visible: no longer a first character to fear
    "pay\\u200bpal\\u200d.com",
    "abc\\u202etxt.exe",
    "plain",
]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("paypal.com", "paypal.com"),
        ("pay\u200bpal\u200d.com", "pay\\u200bpal\\u200d.com"),
        ("\u202egnp.exe", "\\u202egnp.exe"),  # RIGHT-TO-LEFT OVERRIDE
        ("a\u2066b\u2069", "a\\u2066b\\u2069"),  # isolates
        ("\ufeffbom", "\\ufeffbom"),
        ("nul\x00x\x1b[31m", "nul\\u0000x\\u001b[31m"),
        ("line\u2028sep", "line\\u2028sep"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("\u3164filler", "\\u3164filler"),
        ("crêpe 寿司 ÿ", "crêpe 寿司 ÿ"),  # printable text stays as it is
        ("tab\tand\nnewline", "tab\\u0009and\\u000anewline"),
    ],
)
def test_visible_escapes_what_does_not_print(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert "".join(part for part, _ in visible_parts(raw)) == shown
    escapes = [part for part, escaped in visible_parts(raw) if escaped]
    assert all(p.startswith("\\") for p in escapes) and len(escapes) == shown.count("\\")


def test_csv_text_neutralises_formulas() -> None:
    assert [csv_text(v) for v in HOSTILE] == NEUTRALISED
    assert csv_text("\r=1") == "\\u000d=1"
    assert csv_text("1-2") == "1-2" and csv_text("a=b") == "a=b"


@pytest.fixture
def counted(redis_db: Any) -> Any:
    """A categorical metric with hostile labels and a string metric whose devices report
    hostile values, counted by the real worker; the web app reading them."""
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    web = app.test_client()
    admin = {"Authorization": f"Bearer {TOKEN}"}
    spec = {"domain": HOSTILE, "epsilon": 2.0, "mechanism": "oue"}
    labels = MetricDefinition.from_dict(
        web.put("/v1/metrics/app.labels", json=spec, headers=admin).json
    )
    spec = {"kind": "string", "max_length": 16, "epsilon": 8.0}
    terms = MetricDefinition.from_dict(
        web.put("/v1/metrics/app.terms", json=spec, headers=admin).json
    )
    rng = random.Random(5)
    values = ['=HYPERLINK("x")', "pay\u200bpal\u200d.com", "-1+1"]
    reports = [build_report(labels, rng.choice([0, 6, 8]), rng) for _ in range(400)]
    reports += [build_report(terms, values[i % 3], rng) for i in range(3000)]
    post_and_count(web, redis_db.client(), reports)
    return redis_db, web, labels, terms


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_csv_exports_neutralise_text_and_keep_numbers(counted: Any, tmp_path: Path) -> None:
    redis_db, web, labels, terms = counted
    out = tmp_path / "all.csv"
    invoke("export", "--all", "--window", "all", "--out", str(out), "--redis-url", redis_db.url)
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_metric = {m: [r for r in rows if r["metric"] == m] for m in ("app.labels", "app.terms")}
    assert [r["value"] for r in by_metric["app.labels"]] == NEUTRALISED
    found = {r["value"] for r in by_metric["app.terms"]}
    assert found == {'\'=HYPERLINK("x")', "pay\\u200bpal\\u200d.com", "'-1+1"}, found
    # Numbers stay numbers: a negative estimate keeps its minus sign, unquoted.
    estimates = [r["estimate"] for r in by_metric["app.labels"]]
    assert any(e.startswith("-") for e in estimates), estimates
    assert all(float(e) == float(e) for e in estimates)
    for r in rows:
        for column, cell in r.items():
            if column != "value":
                assert not cell.startswith("'"), (column, cell)

    # The API's CSV: the same rule for its value column.
    body = web.get("/v1/estimates/app.labels?format=csv").get_data(as_text=True)
    api_rows = list(csv.DictReader(io.StringIO(body)))
    assert [r["value"] for r in api_rows] == NEUTRALISED
    assert any(r["frequency"].startswith("-") for r in api_rows)

    # JSON keeps the raw values.
    api = web.get("/v1/estimates/app.labels").json
    assert [r["value"] for r in api["estimates"]] == HOSTILE
    strings = web.get("/v1/estimates/app.terms").json
    assert {r["value"] for r in strings["estimates"]} == {
        '=HYPERLINK("x")',
        "pay\u200bpal\u200d.com",
        "-1+1",
    }


def test_parquet_keeps_the_raw_values(counted: Any, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    redis_db, _, _, _ = counted
    out = tmp_path / "labels.parquet"
    invoke(
        "export", "app.labels", "--window", "all", "--out", str(out), "--redis-url", redis_db.url
    )
    assert [r["value"] for r in pq.read_table(out).to_pylist()] == HOSTILE


def test_export_out_dash_writes_standard_output(
    counted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_db, _, _, _ = counted
    monkeypatch.chdir(tmp_path)
    text = invoke(
        "export", "app.labels", "--window", "all", "--out", "-", "--redis-url", redis_db.url
    )
    assert not (tmp_path / "-").exists()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["value"] for r in rows] == NEUTRALISED
    with (tmp_path / "file.csv").open("w") as f:  # the file export writes the same rows
        f.write("")
    invoke(
        "export", "app.labels", "--window", "all", "--out", "file.csv", "--redis-url", redis_db.url
    )
    assert (tmp_path / "file.csv").read_text(encoding="utf-8").replace(
        "\r\n", "\n"
    ) == text.replace("\r\n", "\n")


def test_ldp_estimates_prints_the_exports_rows_in_three_formats(
    counted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_db, web, labels, terms = counted
    url = ("--redis-url", redis_db.url)
    api = web.get("/v1/estimates/app.labels").json
    rows = json.loads(invoke("estimates", "app.labels", "--format", "json", *url))
    assert [r["value"] for r in rows] == HOSTILE  # raw in JSON
    assert [r["estimate"] for r in rows] == [r["frequency"] for r in api["estimates"]]
    assert [r["ci_low"] for r in rows] == [r["ci_low"] for r in api["estimates"]]
    assert all(r["n"] == api["n"] == 400 for r in rows)
    table = list(
        csv.DictReader(io.StringIO(invoke("estimates", "app.labels", "--format", "csv", *url)))
    )
    assert [r["value"] for r in table] == NEUTRALISED
    monkeypatch.setattr(console.out, "width", 160)  # no folded values
    shown = invoke("estimates", "app.labels", *url)
    assert "pay\\u200bpal\\u200d.com" in shown and "\u200b" not in shown and "\u202e" not in shown
    assert "n = 400" in shown and "± (pp)" in shown
    strings = web.get("/v1/estimates/app.terms").json
    rows = json.loads(invoke("estimates", "app.terms", "--format", "json", *url))
    assert {r["value"]: r["estimate"] for r in rows} == {
        r["value"]: r["frequency"] for r in strings["estimates"]
    }
    assert "pay\\u200bpal\\u200d.com" in invoke("estimates", "app.terms", *url)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["Bad Name"], "NAME"),
        (["app.nothing"], "unknown metric 'app.nothing'"),
        (["app.labels", "--window", "week:1"], "--window"),
        (["app.labels", "--version", "9"], "version 9"),
        (["app.labels", "--format", "xml"], "--format"),
        (["app.labels", "--window", "hour:2000-01-01T00"], "expired on 2000-01-15"),
    ],
)
def test_ldp_estimates_refuses_bad_input_with_a_message(
    counted: Any, args: list[str], says: str
) -> None:
    redis_db, _, _, _ = counted
    result = CliRunner().invoke(main, ["estimates", *args, "--redis-url", redis_db.url])
    assert result.exit_code != 0
    assert says in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("raw", "items"),
    [("a", ("a",)), (" a, ,b,", ("a", "b")), ("", ()), (" , ", ()), ("x y ,z", ("x y", "z"))],
)
def test_comma_list_strips_each_item_and_leaves_out_the_empty_ones(
    raw: str, items: tuple[str, ...]
) -> None:
    assert comma_list(raw) == items


def test_not_among_quotes_the_refused_items_shortened() -> None:
    assert not_among(["a", "b" * 50, "c"], {"a"}) == ["b" * 40, "c"]
    assert not_among(("a",), ["a"]) == []
