"""A string metric through the whole system as `ldp serve` runs it.

gunicorn, two aggregator workers and an embedded redis-server as real processes; the
SDK's own ``Client`` reports search terms over real HTTP. The sketch's counters on the
server are compared with those computed offline from exactly the reports the client
sent; the estimates API must discover the frequent terms and estimate candidates.
"""

from __future__ import annotations

import csv
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from click.testing import CliRunner
from test_pipeline_e2e import get, pipeline, recorded_client

from aggregator.query.window import read_counts
from aggregator.stats.kinds import codec_for
from ldp_server.cli import main
from ldp_server.serve import Server
from ldp_store.registry import Registry

SPEC = {"kind": "string", "max_length": 8, "epsilon": 6.0, "description": "search terms"}
TERMS = {"pizza": 0.30, "sushi": 0.20, "crêpe": 0.12, "ramen": 0.08}
"""Four terms (one with a two-byte character) and a tail of 2,000 rare ones."""
USERS = 6000


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("LDP_SOURCE_REQUESTS_PER_SECOND", "0")
    monkeypatch.setenv("LDP_SOURCE_REPORTS_PER_MINUTE", "0")
    with pipeline(tmp_path / "data", {"search.term": SPEC}) as s:
        yield s


def test_search_terms_end_to_end(server: Server, tmp_path: Path) -> None:
    server_tmp = tmp_path
    recorder, client = recorded_client(server.url, 21)
    picker = random.Random(22)
    tail = [f"t{i:04d}" for i in range(2000)]
    for _ in range(USERS):
        x = picker.random()
        for term, share in TERMS.items():
            if x < share:
                value = term
                break
            x -= share
        else:
            value = picker.choice(tail)
        assert client.report("search.term", value)
    assert not client.report("search.term", "nul\x00inside")  # dropped on the device
    assert not client.report("search.term", 42)
    # flush() says the two device-side drops happened since the last flush, ...
    assert not client.flush(timeout=120)
    # ... and, with nothing dropped since, that everything queued was delivered.
    assert client.flush(timeout=120)
    r = redis.Redis.from_url(server.redis_url or "")
    definition = Registry(r).get("search.term")
    assert definition is not None and definition.kind == "string"
    reports = list(recorder.sent.values())
    assert len(reports) == USERS
    deadline = time.monotonic() + 120
    while read_counts(r, definition).n < USERS and time.monotonic() < deadline:
        time.sleep(0.2)
    counts = read_counts(r, definition)
    offline = codec_for(definition.sketch).decode([x["payload"] for x in reports])
    assert counts.n == offline.n == USERS
    np.testing.assert_array_equal(counts.support, offline.support)

    body = get(server, "/v1/estimates/search.term?candidates=pizza,ramen,absent", 60)
    assert body["kind"] == "string" and body["n"] == USERS
    found = {row["value"]: row for row in body["estimates"]}
    assert {"pizza", "sushi", "crêpe"} <= set(found)
    assert not {v for v in found if v not in TERMS}, found.keys()
    for term in ("pizza", "sushi", "crêpe"):
        row = found[term]
        # 5 standard errors: a wrong estimator, not bad luck, fails this.
        assert abs(row["frequency"] - TERMS[term]) < 5 * row["std_error"]
    cand = {row["value"]: row for row in body["candidates"]}
    assert list(cand) == ["pizza", "ramen", "absent"]
    # Discovered rows carry the selection-adjusted estimate and interval, asked-for ones
    # the plain f̂ ± z·σ. pizza is found far above its cutoff: the same f̂ and σ underneath,
    # its median-unbiased estimate is f̂, and its interval moves by less than σ/2 (only
    # σ(μ) changing along the interval, not the selection, moves it).
    assert all(row["selection_adjusted"] for row in body["estimates"])
    assert not any(row["selection_adjusted"] for row in body["candidates"])
    assert all(0 <= row["ci_low"] <= row["frequency"] <= row["ci_high"] for row in found.values())
    plain, adjusted = cand["pizza"], found["pizza"]
    assert plain["std_error"] == adjusted["std_error"]
    assert plain["frequency"] == pytest.approx(adjusted["frequency"], rel=1e-9)
    for key in ("ci_low", "ci_high"):
        assert abs(plain[key] - adjusted[key]) < plain["std_error"] / 2
    assert cand["absent"]["discovered"] is False
    assert abs(cand["absent"]["frequency"]) < 5 * cand["absent"]["std_error"]
    assert 0 < body["detection_threshold"] < 0.3

    # ldp export writes the discovered values with the API's numbers.
    out = server_tmp / "terms.csv"
    result = CliRunner().invoke(
        main, ["export", "search.term", "--out", str(out), "--redis-url", server.redis_url]
    )
    assert result.exit_code == 0, result.output
    with out.open() as f:
        rows = [r for r in csv.DictReader(f) if r["window"] == "all"]
    assert {r["value"]: float(r["estimate"]) for r in rows} == {
        row["value"]: row["frequency"] for row in body["estimates"]
    }

    # A bad query is a 400 with a message, never a 500.
    many = ",".join("v" for _ in range(101))
    with pytest.raises(urllib.error.HTTPError) as err:
        get(server, "/v1/estimates/search.term?candidates=" + urllib.parse.quote(many), 60)
    assert err.value.code == 400
    assert "at most 100 candidates" in json.loads(err.value.read())["error"]
