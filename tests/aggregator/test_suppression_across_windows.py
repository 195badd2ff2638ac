"""Hidden dimension groups stay hidden across every served window (issue 35, item 6).

A seeded GRR metric with two public dimensions and small groups, counted by the real
worker on a real Redis over hours of two past days (entries appended with those arrival
times). Everything served is collected as an attacker would: the windows the trend
lists and all time, each window's estimates (n and support counts), each ``?by=`` of
each window as JSON and CSV, and every row of ``ldp export``. Then each hidden group's
n and support counts are solved for by linear programming over the unknown counts of
every segment in every hour (and whatever a day or all time holds beyond its hours):
none may be pinned, and a small group stays open by at least the minimum.

Before the fix, the day minus its other hour gave the first hour's web group exactly:
65 − 55 = 10 reports, all 'c'.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from disclosure_helpers import Unknowns

from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report, segment_labels
from ldp_server.app import create_server_app
from ldp_server.cli import main
from ldp_store import keys, schema

TOKEN = "test-admin-token-suppression"
NAME = "app.theme"
DOMAIN = ["a", "b", "c"]
SPEC = {
    "domain": DOMAIN,
    "epsilon": 2.0,
    "mechanism": "grr",
    "dimensions": [
        {"name": "platform", "values": ["ios", "android", "web"]},
        {"name": "app_version", "values": ["1", "2"]},
    ],
}
MINIMUM = 50
HOURS: list[tuple[int, int, dict[str, int]]] = [
    (2, 10, {"ios": 200, "android": 150, "web": 10}),  # web: 10 reports, all 'c'
    (2, 11, {"ios": 200, "android": 150, "web": 55}),  # the day shows web: 65
    (1, 9, {"ios": 300, "android": 120, "web": 30}),
    (1, 14, {"ios": 250, "android": 40, "web": 70}),
    (1, 15, {"ios": 20, "android": 8, "web": 3}),  # a quiet hour: nothing shown
]
"""(days back, UTC hour, reports per platform) of each past hour with reports."""


def _arrivals(now: datetime) -> Iterator[tuple[int, str, int]]:
    """(arrival ms, platform, index) of every report, oldest first."""
    for back, hour, sizes in HOURS:
        start = datetime.combine((now - timedelta(days=back)).date(), time(hour), UTC)
        ms = int(start.timestamp() * 1000)
        for platform, n in sizes.items():
            for i in range(n):
                yield ms + i, platform, i


@pytest.fixture
def served(redis_db: Any) -> Any:
    """The metric counted over five past hours of two days, the web app on it, and the
    true reports of each group in each window."""
    app = create_server_app({"REDIS_URL": redis_db.url, "ADMIN_TOKEN": TOKEN, "TESTING": True})
    web = app.test_client()
    created = web.put(
        f"/v1/metrics/{NAME}", json=SPEC, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    definition = MetricDefinition.from_dict(created.json)
    rng = random.Random(35)
    client = redis_db.client()
    stream = keys.stream_key(definition.name, definition.version)
    truth: Counter[tuple[str, str, str]] = Counter()  # reports per (window, dimension, group)
    for seq, (ms, platform, i) in enumerate(sorted(_arrivals(datetime.now(UTC)))):
        value = "c" if platform == "web" else rng.choice(DOMAIN)
        dims = {"platform": platform, "app_version": "1" if i % 6 == 0 else "2"}
        hour, _, day, _ = schema.window_names(ms)
        truth.update((w, d, g) for w in ("all", day, hour) for d, g in dims.items())
        payload = build_report(definition, value, rng, None, dims)["payload"]
        stored = {**payload, schema.SEGMENT_KEY: definition.segment(dims)}  # as the collector
        client.xadd(stream, {"p": json.dumps(stored, separators=(",", ":"))}, id=f"{ms}-{seq}")
    Worker(client, handle_signals=False, block_ms=10).run(once=True)
    assert web.get(f"/v1/estimates/{NAME}").json["n"] == sum(
        sum(sizes.values()) for _, _, sizes in HOURS
    )
    return redis_db, web, definition, truth


def _figures(web: Any, definition: MetricDefinition, url: str) -> Any:
    reply = web.get(url)
    assert reply.status_code == 200, reply.json
    return reply


def _collect(redis_db: Any, web: Any, definition: MetricDefinition) -> Any:
    """Everything served, as {(window, dimension, group): (n, support counts)} (dimension
    and group None for a window's total), the hidden groups, and the export's rows."""
    served: dict[tuple[str, str | None, str | None], tuple[int, list[int]]] = {}

    def serve(key: tuple[str, str | None, str | None], n: int, support: list[int]) -> None:
        assert served.setdefault(key, (n, support)) == (n, support), key  # one figure each

    windows = ["all"]
    for granularity in ("day", "hour"):
        trend = _figures(
            web, definition, f"/v1/estimates/{NAME}/trend?format=json&granularity={granularity}"
        )
        for point in trend.json["windows"]:
            windows.append(point["window"])
            serve(
                (point["window"], None, None),
                point["n"],
                [r["support_count"] for r in point["estimates"]],
            )
    hidden = set()
    for window in windows:
        body = _figures(web, definition, f"/v1/estimates/{NAME}?window={window}").json
        serve((window, None, None), body["n"], [r["support_count"] for r in body["estimates"]])
        for dimension, _ in definition.dimensions:
            url = f"/v1/estimates/{NAME}?window={window}&by={dimension}"
            body = _figures(web, definition, url).json
            text = _figures(web, definition, url + "&format=csv").text
            table = list(csv.DictReader(io.StringIO(text)))
            for group in body["groups"]:
                rows = [r for r in table if r["group"] == group["value"]]
                if not group["shown"]:
                    hidden.add((window, dimension, group["value"]))
                    assert all(r["n"] == "" and r["support_count"] == "" for r in rows)
                    continue
                est = group["estimates"]
                support = [r["support_count"] for r in est["estimates"]]
                assert [int(r["support_count"]) for r in rows] == support  # CSV: the same
                serve((window, dimension, group["value"]), est["n"], support)
    result = CliRunner().invoke(main, ["export", NAME, "--redis-url", redis_db.url, "--out", "-"])
    assert result.exit_code == 0, result.output
    exported = []
    for row in csv.DictReader(io.StringIO(result.stdout)):
        dimension, _, value = row["segment"].partition("=")
        key = (row["window"], dimension or None, value or None)
        exported.append((key, int(row["n"]), DOMAIN.index(row["value"]), int(row["support_count"])))
    return served, hidden, exported


def _leaves(windows: set[str]) -> dict[str, list[str]]:
    """The unknown cells each window sums: its hours, and its reports in none of them."""
    days = {w for w in windows if w.startswith("day:")}
    hours = {w for w in windows if w.startswith("hour:")}
    out: dict[str, list[str]] = {"all": ["rest:all"], **{d: [f"rest:{d}"] for d in days}}
    for hour in hours:
        day = "day:" + hour[len("hour:") : len("hour:") + 10]
        out[hour] = [hour]
        out["all"].append(hour)
        if day in out:
            out[day].append(hour)
    for day in days:
        out["all"].append(f"rest:{day}")
    return out


def test_no_hidden_group_is_solved_for_from_everything_served(served: Any) -> None:
    redis_db, web, definition, truth = served
    figures, hidden, exported = _collect(redis_db, web, definition)
    # the export releases what the API releases, no more: its rows are served figures
    for key, n, v, count in exported:
        assert key in figures and figures[key][0] == n and figures[key][1][v] == count, key
    assert any(key[1] for key, *_ in exported)  # breakdowns are exported
    leaves = _leaves({key[0] for key in figures})
    # the attack, plainly: the day shows web only if an hour other than the
    # first also hides it (else the day minus the second hour gives the first's web)
    first = next(w for w in leaves if w.endswith("T10"))
    day = "day:" + first[len("hour:") : len("hour:") + 10]
    others = [h for h in leaves[day] if h.startswith("hour:") and h != first]
    assert (first, "platform", "web") in hidden
    assert (day, "platform", "web") in hidden or any(
        (h, "platform", "web") in hidden for h in others
    )

    unknowns = Unknowns()
    for leaf in {leaf for each in leaves.values() for leaf in each}:
        for s in range(definition.segments):
            unknowns.relation([(s, leaf, v) for v in range(len(DOMAIN))], [(s, leaf, "n")])  # GRR
            for v in range(len(DOMAIN)):
                unknowns.at_most((s, leaf, v), (s, leaf, "n"))

    def cells(key: tuple[str, str | None, str | None], q: str | int) -> list[Any]:
        window, dimension, value = key
        labels = [segment_labels(definition.dimensions, s) for s in range(definition.segments)]
        chosen = [
            s for s, dims in enumerate(labels) if dimension is None or dims[dimension] == value
        ]
        return [(s, leaf, q) for s in chosen for leaf in leaves[window]]

    for key, (n, support) in figures.items():
        unknowns.known(cells(key, "n"), n)
        for v, count in enumerate(support):
            unknowns.known(cells(key, v), count)
    assert len(hidden) >= 10
    for key in sorted(hidden):
        window = key[0]
        for q in ["n", *range(len(DOMAIN))]:
            low, high = unknowns.span(cells(key, q))
            assert high - low >= 1, (key, q, low, high)  # never pinned
            if q == "n" and truth[key] < MINIMUM:  # a small group: open by the minimum
                total = figures[window, None, None][0]
                assert high - low >= min(MINIMUM, total) - 1e-6, (key, low, high)
