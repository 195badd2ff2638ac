"""Answers sized to be read (issue 43 item 2): the default shows every row of a small
table as before and the top rows of a large one with the rest summed; ?top=, ?values=,
?offset=&limit=, ?values=all and ?format=columns choose others, with the same numbers."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from aggregator.query.paging import ANSWER_ROWS
from aggregator.query.segments import NOTES
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_store.registry import Registry

BIG = [f"v{i:03d}" for i in range(300)]
SPECS = {
    "rows.small": {"domain": ["a", "b", "c", "d"], "epsilon": 2.0},
    "rows.big": {"domain": BIG, "epsilon": 2.0, "mechanism": "grr"},
    "rows.joint": {
        "kind": "joint",
        "attributes": [{"name": n, "domain": [str(i) for i in range(20)]} for n in "xyz"],
        "epsilon": 4.0,
    },
    "rows.groups": {
        "domain": BIG,
        "epsilon": 2.0,
        "mechanism": "grr",
        "dimensions": [{"name": "region", "values": ["north", "south"]}],
    },
}
FIELDS = ("value", "frequency", "ci_low", "ci_high", "norm_sub", "distinguishable_from_zero")


@pytest.fixture(scope="module")
def web(request: pytest.FixtureRequest) -> Any:
    server = request.getfixturevalue("redis_server")
    server.client().flushall()
    registry = Registry(server.client())
    defs: dict[str, MetricDefinition] = {}
    for name, spec in SPECS.items():
        registry.put(name, spec)
        found = registry.get(name)
        assert found is not None
        defs[name] = found
    rng = random.Random(43)
    reports = []
    for _ in range(400):
        reports.append(build_report(defs["rows.small"], rng.choice("abcd"), rng=rng))
        value = BIG[min(int(rng.expovariate(0.05)), 299)]
        reports.append(build_report(defs["rows.big"], value, rng=rng))
        reports.append(build_report(defs["rows.joint"], [rng.randrange(20)] * 3, rng=rng))
        region = {"region": rng.choice(["north", "south"])}
        reports.append(build_report(defs["rows.groups"], value, rng=rng, dimensions=region))
    app = create_server_app({"REDIS_URL": server.url, "TESTING": True})
    client = app.test_client()
    for start in range(0, len(reports), 500):
        assert (
            client.post("/v1/reports", json={"reports": reports[start : start + 500]}).status_code
            == 202
        )
    Worker(server.client(), handle_signals=False).run(once=True)
    return client


def get(web: Any, path: str) -> Any:
    reply = web.get(path)
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


def test_a_small_table_is_answered_whole_as_before(web: Any) -> None:
    body = get(web, "/v1/estimates/rows.small")
    assert [r["value"] for r in body["estimates"]] == ["a", "b", "c", "d"]
    assert (body["shown"], body["values_total"], body["rest"]) == ("all", 4, None)
    assert "columns" not in body
    joint = get(web, "/v1/estimates/rows.joint")  # three 1-way marginals of 20 cells
    assert [len(m["cells"]) for m in joint["marginals"]] == [20, 20, 20]


def test_a_large_table_shows_its_top_values_and_sums_the_rest(web: Any) -> None:
    body = get(web, "/v1/estimates/rows.big")
    full = get(web, "/v1/estimates/rows.big?values=all")
    assert body["n"] == full["n"] == 400
    assert (body["shown"], len(body["estimates"])) == ("top", ANSWER_ROWS)
    assert (full["shown"], [r["value"] for r in full["estimates"]]) == ("all", BIG)
    ranked = sorted(full["estimates"], key=lambda r: -r["frequency"])  # stable: ties in order
    assert body["estimates"] == ranked[:ANSWER_ROWS]
    rest = ranked[ANSWER_ROWS:]
    assert body["rest"]["values"] == len(rest) == 300 - ANSWER_ROWS
    assert body["rest"]["frequency"] == pytest.approx(sum(r["frequency"] for r in rest))
    assert body["rest"]["norm_sub"] == pytest.approx(sum(r["norm_sub"] for r in rest))
    top = get(web, "/v1/estimates/rows.big?top=5")
    assert (top["estimates"], top["rest"]["values"]) == (ranked[:5], 295)


def test_values_and_pages_choose_rows_in_their_order(web: Any) -> None:
    full = get(web, "/v1/estimates/rows.big?values=all")["estimates"]
    picked = get(web, "/v1/estimates/rows.big?values=v007,v002")
    assert (picked["shown"], picked["estimates"]) == ("values", [full[7], full[2]])
    page = get(web, "/v1/estimates/rows.big?offset=298&limit=5")
    assert (page["shown"], page["estimates"], page["rest"]["values"]) == ("page", full[298:], 298)
    csv = web.get("/v1/estimates/rows.big?format=csv").get_data(as_text=True)
    assert len(csv.strip().splitlines()) == 1 + 300  # a CSV holds every row by default


@pytest.mark.parametrize(
    "query",
    [
        "top=0",
        "top=x",
        "limit=0",
        "offset=-1",
        "top=2&values=a",
        "values=zzz",
        "values=,",
        "format=xml",
    ],
)
def test_a_bad_choice_of_rows_is_a_400(web: Any, query: str) -> None:
    reply = web.get(f"/v1/estimates/rows.small?{query}")
    assert reply.status_code == 400 and reply.get_json()["error"]


def test_the_column_form_holds_the_same_numbers(web: Any) -> None:
    rows = get(web, "/v1/estimates/rows.big?values=all")
    cols = get(web, "/v1/estimates/rows.big?values=all&format=columns")
    assert cols["estimates"] == [] and cols["n"] == rows["n"]
    for field in FIELDS:
        assert cols["columns"][field] == [r[field] for r in rows["estimates"]], field
    marginal = get(web, "/v1/estimates/rows.joint?marginal=x,y&values=all")["marginals"][0]
    columns = get(web, "/v1/estimates/rows.joint?marginal=x,y&values=all&format=columns")
    assert columns["marginals"][0]["columns"]["cell"] == [c["cell"] for c in marginal["cells"]]
    assert columns["marginals"][0]["columns"]["frequency"] == [
        c["frequency"] for c in marginal["cells"]
    ]


def test_a_large_marginal_and_a_breakdown_share_the_default_budget(web: Any) -> None:
    joint = get(web, "/v1/estimates/rows.joint?marginal=x,y")["marginals"][0]  # 400 cells
    assert (joint["shown"], len(joint["cells"]), joint["cells_total"]) == ("top", 256, 400)
    assert joint["rest"]["values"] == 144
    assert web.get("/v1/estimates/rows.joint?values=0").status_code == 400
    groups = get(web, "/v1/estimates/rows.groups?by=region")["groups"]  # 2 groups × 300
    shown = [g["estimates"] for g in groups if g["shown"]]
    assert shown and all(len(e["estimates"]) == ANSWER_ROWS // 2 for e in shown)
    assert all(e["rest"]["values"] == 300 - ANSWER_ROWS // 2 for e in shown)
    every = get(web, "/v1/estimates/rows.groups?by=region&values=all")["groups"]
    assert all(len(g["estimates"]["estimates"]) == 300 for g in every if g["shown"])


def test_default_rows_of_a_breakdown_and_a_marginal_are_those_of_the_full_table(
    web: Any,
) -> None:
    groups = get(web, "/v1/estimates/rows.groups?by=region")["groups"]
    every = get(web, "/v1/estimates/rows.groups?by=region&values=all")["groups"]
    assert [g["value"] for g in groups] == [g["value"] for g in every]
    for part, full in zip(groups, every, strict=True):
        if not part["shown"]:
            continue
        ranked = sorted(full["estimates"]["estimates"], key=lambda r: -r["frequency"])
        assert part["estimates"]["estimates"] == ranked[: ANSWER_ROWS // 2]
        head = {k: v for k, v in part["estimates"].items() if k not in ("estimates", "rest")}
        assert head == {
            k: v for k, v in full["estimates"].items() if k not in ("estimates", "rest", "shown")
        } | {"shown": "top"}
    marginal = get(web, "/v1/estimates/rows.joint?marginal=x,y")["marginals"][0]
    cells = get(web, "/v1/estimates/rows.joint?marginal=x,y&values=all")["marginals"][0]["cells"]
    assert marginal["cells"] == sorted(cells, key=lambda c: -c["frequency"])[:ANSWER_ROWS]


def test_statistics_are_kept_until_the_counts_change(
    redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of counts already estimated reuses their statistics (the same answer,
    nothing recomputed); a batch counted since is estimated afresh."""
    import aggregator.query.estimators.frequency as frequency

    calls = []
    real = frequency.estimate_from_counts
    monkeypatch.setattr(
        frequency, "estimate_from_counts", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    redis_server.client().flushall()
    registry = Registry(redis_server.client())
    registry.put("rows.kept", {"domain": ["a", "b", "c"], "epsilon": 1.0})
    definition = registry.get("rows.kept")
    assert definition is not None
    app = create_server_app({"REDIS_URL": redis_server.url, "TESTING": True})
    client = app.test_client()
    rng = random.Random(7)

    def send(count: int) -> None:
        reports = [build_report(definition, rng.choice("abc"), rng=rng) for _ in range(count)]
        assert client.post("/v1/reports", json={"reports": reports}).status_code == 202
        Worker(redis_server.client(), handle_signals=False).run(once=True)

    send(200)
    first = get(client, "/v1/estimates/rows.kept")
    assert get(client, "/v1/estimates/rows.kept") == first
    assert len(calls) == 1
    send(50)
    later = get(client, "/v1/estimates/rows.kept")
    assert len(calls) == 2 and later["n"] == 250


def test_a_breakdown_of_64_groups_gives_its_notes_once_within_200_kB(redis_server: Any) -> None:
    redis_server.client().flushall()
    registry = Registry(redis_server.client())
    regions = [f"r{i:02d}" for i in range(64)]
    definition = registry.put(
        "rows.regions",
        {
            "domain": [f"v{i:04d}" for i in range(1000)],
            "epsilon": 2.0,
            "dimensions": [{"name": "region", "values": regions}],
        },
    ).definition
    rng = random.Random(43)
    reports = [
        build_report(
            definition, rng.randrange(1000), rng=rng, dimensions={"region": rng.choice(regions)}
        )
        for _ in range(5000)
    ]
    client = create_server_app({"REDIS_URL": redis_server.url, "TESTING": True}).test_client()
    for start in range(0, len(reports), 500):
        chunk = {"reports": reports[start : start + 500]}
        assert client.post("/v1/reports", json=chunk).status_code == 202
    Worker(redis_server.client(), handle_signals=False).run(once=True)
    reply = client.get("/v1/estimates/rows.regions?by=region")
    assert reply.status_code == 200
    assert len(reply.data) <= 200_000
    body = reply.get_json()
    shown = [g["estimates"] for g in body["groups"] if g["shown"]]
    assert len(shown) == 64  # each group's intervals_note names its n: it stays in each
    assert set(body["notes"]) == set(NOTES) - {"intervals_note"}
    for path, text in body["notes"].items():
        assert text and reply.data.decode().count(json.dumps(text)) == 1
        for group in shown:
            field = group
            for name in path.split("."):
                field = field[name]
            assert field == ""
