"""An app's ingest key at the seam: over real HTTP (Werkzeug on a loopback port), with a
real Redis and a real stream worker, the key of project ``shop`` fetches shop's
definitions and its reports count in shop's metric, with reads closed and keys required
for shop; it grants nothing more; and a key that is no longer valid is refused, never
taken for the default project's (ldp_api/projects.py, docs/guides/teams.md).
"""

from __future__ import annotations

from typing import Any

import requests

from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_store.tokens import KINDS, TokenStore
from tests.ingest_key_helpers import DEFAULT, NAME, READ, SHOP, bearer, define, n_of, shop_app
from tests.wsgi_helpers import serving


def test_an_ingest_key_reads_its_projects_definitions_and_its_reports_count_there(
    redis_db: Any,
) -> None:
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    key, _ = store.create("shop app", KINDS["ingest"], "shop")
    shop_reader, _ = store.create("shop reader", KINDS["read"], "shop")
    with serving(shop_app(redis_db.url)) as url:
        define(url, store, SHOP)
        got = requests.get(f"{url}/v1/metrics/{NAME}", headers=bearer(key))
        assert got.status_code == 200, got.text
        definition = MetricDefinition.from_dict(got.json())
        assert definition.domain == tuple(SHOP["domain"])  # shop's, not the default's
        listed = requests.get(f"{url}/v1/metrics", headers=bearer(key)).json()["metrics"]
        assert [(m["name"], m["domain"]) for m in listed] == [(NAME, SHOP["domain"])]
        reports = [build_report(definition, SHOP["domain"][i % 3]) for i in range(30)]
        sent = requests.post(f"{url}/v1/reports", json={"reports": reports}, headers=bearer(key))
        assert sent.status_code == 202 and sent.json()["accepted"] == 30, sent.text
        # Without the key, shop's reports are refused (the project requires one).
        keyless = requests.post(f"{url}/v1/reports?project=shop", json={"reports": reports[:1]})
        assert keyless.status_code == 401
        Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)
        assert n_of(url, shop_reader) == 30
        assert n_of(url, READ) == 0  # the default project's metric of the same name
        # The key grants definitions and ingest, nothing more.
        for method, path, body in (
            ("GET", f"/v1/estimates/{NAME}", None),
            ("PUT", f"/v1/metrics/{NAME}", DEFAULT),
            ("GET", "/v1/tokens", None),
            ("GET", "/v1/overview", None),
        ):
            refused = requests.request(method, url + path, json=body, headers=bearer(key))
            assert refused.status_code == 403, (method, path, refused.status_code)


def test_a_key_no_longer_valid_is_refused_not_taken_for_the_default_project(
    redis_db: Any,
) -> None:
    """A revoked (or expired) key names no project any more: its definition fetch and its
    reports are refused (401: the SDK drops them), even where the default project has a
    metric of the same name and shape, which took them before."""
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    key, token = store.create("shop app", KINDS["ingest"], "shop")
    store.revoke(token.id)  # before the app ever read it: no cache to wait out
    with serving(shop_app(redis_db.url)) as url:
        define(url, store, DEFAULT)  # the same shape in both projects
        got = requests.get(f"{url}/v1/metrics/{NAME}", headers=bearer(key))
        assert got.status_code == 401, got.text
        assert got.json()["error"] == "the ingest key is not valid"
        definition = MetricDefinition.from_dict(
            requests.get(f"{url}/v1/metrics/{NAME}?project=shop").json()
        )
        reports = [build_report(definition, "x") for _ in range(5)]
        sent = requests.post(f"{url}/v1/reports", json={"reports": reports}, headers=bearer(key))
        assert sent.status_code == 401, sent.text
        Worker(redis_db.client(), handle_signals=False, block_ms=10).run(once=True)
        assert n_of(url, READ) == 0
