"""The sha256 of every read answer on the same reports: a refactor must change none.

    .venv/bin/python benchmarks/answer_digests.py                  # this tree
    .venv/bin/python benchmarks/answer_digests.py --tree ../old    # another checkout's code

One definition of every mechanism and kind (the conformance suite's ``WIRE_SPECS``), 400
seeded SDK reports each, posted to the server app's Flask test client over an embedded
Redis and counted by one worker pass; then each metric's answers as JSON, CSV and columns,
its trend, its export, and each kind's own queries (``?by=``, ``?marginal=``, ``?range=``,
``?quantiles=``, ``?top=``). Fields that say when the answer was made are blanked.
Run both trees in the same hour (windows are the server's clock's). How to use it:
[Performance](../docs/benchmarks/performance.md#how-to-read-these-figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

VOLATILE = frozenset(
    {"lag", "lag_seconds", "age_seconds", "computed_at", "generated_at", "now", "as_of"}
)
"""Keys whose value is the clock's, not the counts'."""

TREND_QUERIES = ("", "?format=json", "?format=columns")
"""A trend's forms: the default (compact for a categorical metric), every statistic as
rows, as columns."""

REPORTS = 400
SECRET = bytes(range(32))


def _values(definition: Any, example: Any, rng: random.Random) -> list[Any]:
    """``REPORTS`` true values for a definition: its example and seeded draws."""
    if definition.kind == "joint":
        return [example] + [
            {name: rng.choice(domain) for name, domain in definition.attributes}
            for _ in range(REPORTS - 1)
        ]
    if definition.kind == "string":
        words = ("alpha", "beta", "gamma", "café", "delta", "alpha", "alpha", "beta")
        length = definition.mechanism.max_length
        return [example] + [rng.choice(words)[:length] for _ in range(REPORTS - 1)]
    if definition.value_range is not None:
        low, high = definition.value_range
        return [example] + [low + (high - low) * rng.random() ** 2 for _ in range(REPORTS - 1)]
    return [example] + [rng.choice(definition.domain) for _ in range(REPORTS - 1)]


def _queries(definition: Any) -> list[str]:
    """Each kind's own queries beside the plain answer."""
    queries = ["", "?format=csv", "?format=columns", "?top=2", "?estimand=reporters"]
    if definition.dimensions:
        queries.append(f"?by={definition.dimensions[0][0]}")
    if definition.kind == "joint":
        first, second = (a[0] for a in definition.attributes[:2])
        queries.append(f"?marginal={first},{second}")
    if definition.value_range is not None:
        low, high = definition.value_range
        middle = (low + high) / 2
        queries += [f"?range={low},{middle}", "?quantiles=0.5,0.9"]
    return queries


def _blank(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: None if k in VOLATILE else _blank(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_blank(v) for v in value]
    return value


def _digest(response: Any) -> str:
    body = response.get_data()
    if response.is_json:
        body = json.dumps(_blank(response.get_json()), sort_keys=True).encode()
    return f"{response.status_code} {hashlib.sha256(body).hexdigest()[:16]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code runs")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    sys.path.insert(1, str(ROOT))

    from aggregator.stream.worker import Worker
    from client_sdk import wire
    from conformance.generate import WIRE_DIMENSIONS, WIRE_SPECS
    from ldp_server.app import create_server_app
    from ldp_store.embedded import EmbeddedRedis

    print(f"# code of {Path(sys.modules['aggregator'].__file__ or '').parents[1]}")
    token = "answer-digests-admin-token"
    admin = {"Authorization": f"Bearer {token}"}
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(Path(folder)).start()
        try:
            config: dict[str, Any] = {"REDIS_URL": server.url, "ADMIN_TOKEN": token}
            config |= {"TESTING": True, "SOURCE_REQUESTS_PER_SECOND": 10**6}
            app = create_server_app(config)
            web = app.test_client()
            rng = random.Random(args.seed)
            plan = []
            for name, spec, example in WIRE_SPECS:
                created = web.put(f"/v1/metrics/{name}", json=spec, headers=admin)
                if created.status_code != 201:
                    sys.exit(f"{name}: {created.status_code} {created.get_json()}")
                definition = wire.MetricDefinition.from_dict(created.get_json())
                dims = WIRE_DIMENSIONS.get(name)
                reports = [
                    wire.build_report(definition, value, rng, SECRET, dims)
                    for value in _values(definition, example, rng)
                ]
                posted = web.post("/v1/reports", json={"reports": reports})
                if posted.status_code != 202:
                    sys.exit(f"{name}: {posted.status_code} {posted.get_json()}")
                plan.append((name, definition))
            Worker(server.client(), handle_signals=False, block_ms=10).run(once=True)
            for name, definition in plan:
                paths = [f"/v1/estimates/{name}{q}" for q in _queries(definition)]
                paths += [f"/v1/estimates/{name}/trend{q}" for q in TREND_QUERIES]
                paths.append(f"/v1/export/{name}")
                for path in paths:
                    print(f"{_digest(web.get(path))}  {path}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
