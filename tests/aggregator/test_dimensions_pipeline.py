"""Public dimensions end to end: PUT a spec with dimensions, POST SDK reports with their
segments, the real worker on a real Redis, then the counts per segment (exactly the
codec's counts of each segment's payloads) beside the unchanged totals."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

from aggregator.query.window import read_counts, read_numeric, read_segments
from aggregator.stats.kinds import codec_for
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_store import keys

TOKEN = "test-admin-token-dimensions"
PLATFORMS = ["ios", "android", "web"]
SPEC = {
    "domain": ["light", "dark", "auto"],
    "epsilon": 2.0,
    "dimensions": [
        {"name": "platform", "values": PLATFORMS},
        {"name": "app_version", "values": ["1", "2"]},
    ],
}
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def web(redis_db: Any) -> Any:
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    return app.test_client()


def _post(web: Any, reports: list[dict[str, Any]]) -> None:
    for start in range(0, len(reports), 500):
        reply = web.post("/v1/reports", json={"reports": reports[start : start + 500]})
        assert reply.status_code == 202, reply.json
        assert reply.json["accepted"] == len(reports[start : start + 500])


def test_counts_per_segment_beside_the_totals(redis_db: Any, web: Any) -> None:
    created = web.put("/v1/metrics/app.theme", json=SPEC, headers=ADMIN)
    assert created.status_code == 201, created.json
    definition = MetricDefinition.from_dict(created.json)
    assert definition.segments == 6
    rng = random.Random(7)
    sent: dict[int, list[Any]] = {}
    reports = []
    for i in range(3000):
        dims = {"platform": PLATFORMS[i % 3], "app_version": "1" if i % 7 else "2"}
        report = build_report(definition, rng.choice(["light", "dark", "auto"]), rng, None, dims)
        assert report["dimensions"] == dims
        sent.setdefault(definition.segment(dims), []).append(report["payload"])
        reports.append(report)
    _post(web, reports)
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)

    codec = codec_for(definition.mechanism)
    everything = [p for payloads in sent.values() for p in payloads]
    total = read_counts(redis_db.client(), definition)
    assert total.n == 3000
    assert np.array_equal(total.support, codec.decode(everything).support)
    segments = read_segments(redis_db.client(), definition)
    assert sorted(segments) == sorted(sent)
    for segment, payloads in sent.items():
        counts = segments[segment]
        assert counts.n == len(payloads)
        assert np.array_equal(counts.support, codec.decode(payloads).support)  # type: ignore[union-attr]


def test_a_numeric_metric_sums_per_segment(redis_db: Any, web: Any) -> None:
    spec = {
        "kind": "numeric",
        "range": [0, 100],
        "epsilon": 1.0,
        "dimensions": [{"name": "platform", "values": PLATFORMS}],
    }
    created = web.put("/v1/metrics/app.load_ms", json=spec, headers=ADMIN)
    assert created.status_code == 201, created.json
    definition = MetricDefinition.from_dict(created.json)
    rng = random.Random(2)
    reports = [
        build_report(definition, rng.uniform(0, 100), rng, None, {"platform": PLATFORMS[i % 3]})
        for i in range(900)
    ]
    _post(web, reports)
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)
    segments = read_segments(redis_db.client(), definition)
    total = read_numeric(redis_db.client(), definition)
    assert total.n == 900 and sorted(segments) == [0, 1, 2]
    assert sum(s.n for s in segments.values()) == 900
    assert sum(s.total for s in segments.values()) == total.total  # type: ignore[union-attr]


def test_an_entry_without_dimensions_is_stored_and_drains_as_before(
    redis_db: Any, web: Any
) -> None:
    """The storage format is pinned: a metric without dimensions keeps ``p`` = exactly
    the canonical payload, and its counts hash holds ``n`` and nothing per segment."""
    spec = {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "grr"}
    created = web.put("/v1/metrics/plain", json=spec, headers=ADMIN)
    definition = MetricDefinition.from_dict(created.json)
    assert "dimensions" not in created.json
    report = build_report(definition, "a", random.Random(1))
    assert set(report) == {"metric", "version", "id", "payload"}
    _post(web, [report])
    client = redis_db.client()
    [(_, fields)] = client.xrange(keys.stream_key("plain", 1))
    assert fields == {b"p": json.dumps(report["payload"], separators=(",", ":")).encode()}
    Worker(client, handle_signals=False, block_ms=10).run(once=True)
    assert client.hkeys(keys.counts_key("plain", 1)) == [b"n"]
    assert read_counts(client, definition).n == 1
    assert read_segments(client, definition) == {}


@pytest.mark.parametrize(
    ("dimensions", "words"),
    [
        ({"platform": "symbian", "app_version": "1"}, "has no value 'symbian'"),
        ({"platform": "ios"}, "missing ['app_version']"),
        ({"platform": "ios", "app_version": "1", "device": "x"}, "unknown ['device']"),
        (None, "declares the dimensions"),
    ],
)
def test_the_collector_refuses_bad_dimensions_with_a_message(
    web: Any, dimensions: Any, words: str
) -> None:
    created = web.put("/v1/metrics/app.theme", json=SPEC, headers=ADMIN)
    definition = MetricDefinition.from_dict(created.json)
    report = build_report(
        definition, "dark", random.Random(1), None, {"platform": "ios", "app_version": "1"}
    )
    if dimensions is None:
        del report["dimensions"]
    else:
        report["dimensions"] = dimensions
    reply = web.post("/v1/reports", json={"reports": [report]})
    assert 400 <= reply.status_code < 500
    assert words in json.dumps(reply.json)


def test_dimensions_on_a_metric_that_declares_none_are_refused(web: Any) -> None:
    created = web.put(
        "/v1/metrics/plain", json={"domain": ["a", "b"], "epsilon": 1.0}, headers=ADMIN
    )
    report = build_report(MetricDefinition.from_dict(created.json), "a")
    report["dimensions"] = {"platform": "ios"}
    reply = web.post("/v1/reports", json={"reports": [report]})
    assert 400 <= reply.status_code < 500
    assert "declares no dimensions" in json.dumps(reply.json)


def test_a_spec_past_the_segment_bound_is_refused(web: Any) -> None:
    spec = {
        "domain": ["a", "b"],
        "epsilon": 1.0,
        "dimensions": [
            {"name": "country", "values": [f"c{i}" for i in range(20)]},
            {"name": "platform", "values": PLATFORMS + ["tv"]},
        ],
    }
    reply = web.put("/v1/metrics/too.fine", json=spec, headers=ADMIN)
    assert reply.status_code == 400
    assert "80 segments" in json.dumps(reply.json)
    assert "device identifier" in json.dumps(reply.json)


# -- the read side: ?by=<dimension> --------------------------------------------------------


def _by_platform(web: Any, redis_db: Any, sizes: dict[str, int]) -> MetricDefinition:
    spec = {**SPEC, "dimensions": [{"name": "platform", "values": PLATFORMS}]}
    created = web.put("/v1/metrics/app.theme", json=spec, headers=ADMIN)
    definition = MetricDefinition.from_dict(created.json)
    rng = random.Random(11)
    reports = [
        build_report(definition, rng.choice(["light", "dark"]), rng, None, {"platform": p})
        for p, n in sizes.items()
        for _ in range(n)
    ]
    _post(web, reports)
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)
    return definition


def test_by_dimension_estimates_each_group_as_a_whole_metric(redis_db: Any, web: Any) -> None:
    _by_platform(web, redis_db, {"ios": 400, "android": 300, "web": 200})
    body = web.get("/v1/estimates/app.theme?by=platform").json
    assert body["kind"] == "segments" and body["by"] == "platform"
    assert "NOT protected by ε" in body["not_protected"]
    groups = {g["value"]: g for g in body["groups"]}
    assert [g["value"] for g in body["groups"]] == PLATFORMS
    assert all(g["shown"] for g in groups.values())
    assert [groups[p]["estimates"]["n"] for p in PLATFORMS] == [400, 300, 200]
    whole = web.get("/v1/estimates/app.theme").json
    assert whole["n"] == 900
    # each group's support counts add up to the whole metric's
    for i in range(3):
        assert (
            sum(groups[p]["estimates"]["estimates"][i]["support_count"] for p in PLATFORMS)
            == (whole["estimates"][i]["support_count"])
        )
    csv_text = web.get("/v1/estimates/app.theme?by=platform&format=csv").get_data(as_text=True)
    assert csv_text.count("\n") == 1 + 3 * 3


def test_a_small_group_is_not_shown_nor_recoverable_by_subtraction(redis_db: Any, web: Any) -> None:
    _by_platform(web, redis_db, {"ios": 400, "android": 300, "web": 10})
    body = web.get("/v1/estimates/app.theme?by=platform").json
    groups = {g["value"]: g for g in body["groups"]}
    assert not groups["web"]["shown"] and groups["web"]["estimates"] is None
    assert "fewer than 50 reports" in groups["web"]["reason"]
    # the total (900 − …) minus the shown groups must not give web's 10 alone: android,
    # the smallest other group, is held back too, and says why
    assert not groups["android"]["shown"] and "held back" in groups["android"]["reason"]
    assert groups["ios"]["shown"] and groups["ios"]["estimates"]["n"] == 400
    assert "10" not in json.dumps(groups["web"])


def test_by_an_unknown_dimension_is_a_400_with_the_declared_ones(redis_db: Any, web: Any) -> None:
    _by_platform(web, redis_db, {"ios": 5})
    reply = web.get("/v1/estimates/app.theme?by=country")
    assert reply.status_code == 400
    assert "platform" in json.dumps(reply.json)


def test_the_export_holds_the_shown_groups_as_the_api_answers_them(
    redis_db: Any, web: Any, tmp_path: Any
) -> None:
    import csv

    from click.testing import CliRunner

    from ldp_server.cli import main

    _by_platform(web, redis_db, {"ios": 400, "android": 300, "web": 10})
    out = tmp_path / "theme.csv"
    args = [
        "export",
        "app.theme",
        "--window",
        "all",
        "--out",
        str(out),
        "--redis-url",
        redis_db.url,
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert {r["segment"] for r in rows} == {"", "platform=ios"}  # web and android held back
    api = web.get("/v1/estimates/app.theme?by=platform").json
    ios = next(g for g in api["groups"] if g["value"] == "ios")["estimates"]
    mine = [r for r in rows if r["segment"] == "platform=ios"]
    assert [int(r["support_count"]) for r in mine] == [e["support_count"] for e in ios["estimates"]]
    assert [float(r["ci_low"]) for r in mine] == [e["ci_low"] for e in ios["estimates"]]


def test_an_entry_without_its_segment_is_dead_lettered_with_the_reason(
    redis_db: Any, web: Any
) -> None:
    """An entry of a metric with dimensions that lacks a valid segment (written by hand,
    or by a collector of another version) cannot be counted per segment: it goes to the
    dead-letter stream with the reason, and the others are counted."""
    created = web.put("/v1/metrics/app.theme", json=SPEC, headers=ADMIN)
    definition = MetricDefinition.from_dict(created.json)
    client = redis_db.client()
    stream = keys.stream_key("app.theme", definition.version)
    good = build_report(
        definition, "dark", random.Random(1), None, {"platform": "ios", "app_version": "1"}
    )
    client.xadd(stream, {"p": json.dumps({**good["payload"], "_g": 0})})
    client.xadd(stream, {"p": json.dumps(good["payload"])})
    client.xadd(stream, {"p": json.dumps({**good["payload"], "_g": 99})})
    Worker(client, handle_signals=False, block_ms=10).run(once=True)
    assert read_counts(client, definition).n == 1
    assert {s: c.n for s, c in read_segments(client, definition).items()} == {0: 1}
    dead = client.xrange(keys.dead_key("app.theme", definition.version))
    assert len(dead) == 2
    assert all(b"no segment" in b"".join(fields.values()) for _, fields in dead)


def test_the_export_suppresses_under_the_apis_configured_minimum(
    redis_db: Any, web: Any, tmp_path: Any
) -> None:
    """LDP_MIN_SEGMENT_REPORTS raised for the API holds for ``ldp export`` too: an export
    must not release a group the API hides (it used the default 50 whatever was set)."""
    import csv

    from click.testing import CliRunner

    from ldp_server.cli import main

    _by_platform(web, redis_db, {"ios": 400, "android": 300, "web": 10})
    out = tmp_path / "theme.csv"
    args = ["export", "app.theme", "--window", "all", "--out", str(out)]
    args += ["--redis-url", redis_db.url]
    result = CliRunner().invoke(main, args, env={"LDP_MIN_SEGMENT_REPORTS": "500"})
    assert result.exit_code == 0, result.output
    assert {r["segment"] for r in csv.DictReader(out.open())} == {""}
    result = CliRunner().invoke(main, [*args, "--min-segment-reports", "5"])
    assert result.exit_code == 0, result.output
    shown = {r["segment"] for r in csv.DictReader(out.open())}
    assert shown == {"", "platform=ios", "platform=android", "platform=web"}
    result = CliRunner().invoke(main, args, env={"LDP_MIN_SEGMENT_REPORTS": "0"})
    assert result.exit_code == 2
    assert "LDP_MIN_SEGMENT_REPORTS" in result.output or "min-segment-reports" in result.output


def test_ldp_estimates_by_a_dimension_shows_what_the_api_shows(redis_db: Any, web: Any) -> None:
    """``ldp estimates --by``: the groups ?by= shows, the others named as held back; the
    plain table is the whole metric only (it used to mix the groups' rows in unlabelled);
    JSON honours the API's LDP_MIN_SEGMENT_REPORTS (it released the groups at the default
    50 whatever was set: fails on the old code)."""
    from click.testing import CliRunner

    from ldp_server.cli import main

    _by_platform(web, redis_db, {"ios": 400, "android": 300, "web": 10})
    url = ["--redis-url", redis_db.url]

    def run(*args: str, env: dict[str, str] | None = None, code: int = 0) -> str:
        result = CliRunner().invoke(main, ["estimates", "app.theme", *args, *url], env=env)
        assert result.exit_code == code, result.output
        return result.output

    plain = run()
    assert plain.count("light") == 1 and "--by platform" in plain and "ios" not in plain
    table = run("--by", "platform")
    assert "NOT protected by ε" in table and "ios" in table
    assert "not shown: android, web" in table
    rows = json.loads(run("--by", "platform", "--format", "json"))
    assert {r["segment"] for r in rows} == {"platform=ios"}
    api = web.get("/v1/estimates/app.theme?by=platform").json
    ios = next(g for g in api["groups"] if g["value"] == "ios")["estimates"]["estimates"]
    assert [r["support_count"] for r in rows] == [e["support_count"] for e in ios]
    assert [r["ci_low"] for r in rows] == [e["ci_low"] for e in ios]
    raised = json.loads(run("--format", "json", env={"LDP_MIN_SEGMENT_REPORTS": "500"}))
    assert [r.get("segment") for r in raised] == [None] * 3  # the whole metric's rows only
    assert "platform=android" in run("--format", "csv", "--min-segment-reports", "5")
    assert "platform" in run("--by", "country", code=2)


def test_documented_limit_injected_reports_reveal_a_hidden_group(redis_db: Any, web: Any) -> None:
    """A DOCUMENTED LIMIT (docs/statistics/suppression.md, "Reports an attacker posts"):
    this test passes because the attack works. Anyone who can post reports can push a
    hidden group over the minimum with reports of their own, then subtract what they
    posted: the group's count and support counts come back exactly. Suppression counts
    reports, and the collector cannot tell an attacker's from a device's (it keeps no
    identity, by design). What stays protected is what ε protects: each hidden report's
    value is still ε-LDP. A defence (noise on the released group counts and on the
    threshold) would make this test fail; it must then be turned into a test of it."""
    honest = _by_platform(web, redis_db, {"ios": 400, "android": 300, "web": 10})
    before = {g["value"]: g for g in web.get("/v1/estimates/app.theme?by=platform").json["groups"]}
    assert not before["web"]["shown"] and not before["android"]["shown"]  # hidden as designed
    codec = codec_for(honest.mechanism)
    hidden = read_segments(redis_db.client(), honest)[honest.segment({"platform": "web"})]

    rng = random.Random(45)  # the attacker's 45 reports, payloads of their own choosing
    own = [build_report(honest, "light", rng, None, {"platform": "web"}) for _ in range(45)]
    _post(web, own)
    Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)

    after = {g["value"]: g for g in web.get("/v1/estimates/app.theme?by=platform").json["groups"]}
    assert after["web"]["shown"], after["web"]  # 10 + 45 ≥ 50
    served = after["web"]["estimates"]
    mine = codec.decode([r["payload"] for r in own]).support  # type: ignore[union-attr]
    recovered_n = served["n"] - len(own)
    recovered = [
        row["support_count"] - int(c) for row, c in zip(served["estimates"], mine, strict=True)
    ]
    assert recovered_n == hidden.n == 10
    assert recovered == [int(c) for c in hidden.support]  # type: ignore[union-attr]
