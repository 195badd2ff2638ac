"""The collector's Oblivious HTTP gateway (RFC 9458), on a real Redis.

An inner ``POST /v1/reports`` goes through the same view, validation and append as a
direct one; an unknown key id gets RFC 9458 §5.3's problem; a replayed or altered
encapsulated request appends nothing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from collector_helpers import make_app, reports
from flask import Flask
from flask.testing import FlaskClient
from relay_helpers import key_config, opened, post, seal

from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import encapsulate_request
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    PROBLEM_KEY,
    KeyConfig,
)
from client_sdk.wire import MetricDefinition
from collector.context import services
from collector.ohttp_gateway import ObliviousGateway
from ldp_store import keys, streams
from ldp_store.ohttp_keys import KEYS_KEY, GatewayKeys
from ldp_store.tokens import KINDS, TokenStore


@pytest.fixture
def app(redis_db: Any) -> Flask:
    """A collector whose relayed reports go straight to the streams (B = 1: the shuffle
    pools are tested in test_ohttp_shuffle.py)."""
    return make_app(redis_db.url, SHUFFLE_MIN_BATCH=1)


def stream_length(app: Flask, definition: MetricDefinition) -> int:
    redis = services(app).redis
    return int(streams.length(redis, keys.stream_key(definition.name, definition.version)))


def batch(definition: MetricDefinition, n: int, seed: int = 1) -> bytes:
    return json.dumps({"reports": reports(definition, n, seed)}).encode()


def test_an_encapsulated_batch_is_appended_like_a_direct_one(
    app: Flask, client: FlaskClient, theme: MetricDefinition
) -> None:
    sealed, context = seal(key_config(client), batch(theme, 5))
    inner = opened(post(client, sealed), context)
    assert inner.status == 202
    assert inner.header("content-type") == "application/json"
    assert json.loads(inner.content) == {"accepted": 5, "duplicates": 0, "rejected": []}
    assert stream_length(app, theme) == 5


def test_the_inner_request_gets_the_direct_validation(
    client: FlaskClient, theme: MetricDefinition
) -> None:
    bad = reports(theme, 1)[0] | {"version": 99}
    sealed, context = seal(key_config(client), json.dumps({"reports": [bad]}).encode())
    inner = opened(post(client, sealed), context)
    assert inner.status == 400
    assert "unknown metric" in json.loads(inner.content)["rejected"][0]["error"]
    sealed, context = seal(key_config(client), b'{"reports": [1], "reports": [2]}')
    inner = opened(post(client, sealed), context)
    assert inner.status == 400 and "duplicate key" in inner.content.decode()


def test_a_replayed_encapsulated_request_appends_nothing(
    app: Flask, client: FlaskClient, theme: MetricDefinition
) -> None:
    """RFC 9458 §6.5: the gateway keeps no state of its own; the reports' ids do."""
    sealed, context = seal(key_config(client), batch(theme, 4))
    assert json.loads(opened(post(client, sealed), context).content)["accepted"] == 4
    again = opened(post(client, sealed), context)
    assert again.status == 202
    assert json.loads(again.content) == {"accepted": 0, "duplicates": 4, "rejected": []}
    assert stream_length(app, theme) == 4


@pytest.mark.parametrize("where", [3, 20, 60, -1])
def test_an_altered_ciphertext_is_a_400_and_appends_nothing(
    app: Flask, client: FlaskClient, theme: MetricDefinition, where: int
) -> None:
    sealed, _ = seal(key_config(client), batch(theme, 3))
    altered = bytearray(sealed)
    altered[where] ^= 0x80
    answer = post(client, bytes(altered))
    assert answer.status_code == 400
    assert answer.json["error"] == "the encapsulated request cannot be opened"
    assert stream_length(app, theme) == 0


def test_an_unknown_key_id_gets_the_rfc_problem(
    client: FlaskClient, theme: MetricDefinition
) -> None:
    config = key_config(client)
    stale = KeyConfig(
        (config.key_id + 1) % 256, config.kem_id, config.public_key, config.algorithms
    )
    sealed, _ = seal(stale, batch(theme, 1))
    answer = post(client, sealed)
    assert answer.status_code == 400
    assert answer.mimetype == "application/problem+json"
    assert answer.json["type"] == PROBLEM_KEY
    assert answer.json["title"] == "key identifier unknown"
    assert GATEWAY_PATH in answer.json["detail"]


def test_rotation_keeps_the_old_key_for_the_overlap_then_drops_it(
    app: Flask, client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    old = key_config(client)
    now = [1e9]
    store = GatewayKeys(redis_db.client(), lifetime=100, overlap=10, clock=lambda: now[0])
    store.rotate()
    live = store.live()
    assert [k.config.key_id for k in live] == [(old.key_id + 1) % 256, old.key_id]
    assert live[1].expires == now[0] + 10
    now[0] += 11
    assert [k.config.key_id for k in store.ensure()] == [live[0].config.key_id]
    assert len(redis_db.client().hkeys(KEYS_KEY)) == 1


def test_the_schedule_rotates_a_key_past_its_lifetime(redis_db: Any) -> None:
    now = [1e9]
    store = GatewayKeys(redis_db.client(), lifetime=100, overlap=10, clock=lambda: now[0])
    first = store.ensure()
    assert len(first) == 1 and store.ensure() == first
    now[0] += 100
    second = store.ensure()
    assert [k.config.key_id for k in second] == [first[0].config.key_id + 1, first[0].config.key_id]


def test_the_keys_are_outside_every_metric_keyspace(
    client: FlaskClient, theme: MetricDefinition, redis_db: Any
) -> None:
    key_config(client)
    assert "{" not in KEYS_KEY and redis_db.client().exists(KEYS_KEY)


@pytest.mark.parametrize(
    ("path", "method", "status"),
    [
        ("/v1/metrics", "GET", 404),
        ("/v1/metrics/app.theme", "PUT", 405),
        ("/v1/metrics/app.theme/keys", "GET", 404),
        ("/v1/metrics/app.theme%2Fkeys", "GET", 404),
        ("/v1/metrics/app.theme/retire", "POST", 404),
        ("/v1/metrics/app.nope", "GET", 404),  # the app's own answer: no such metric
        ("/v1/metrics/app.theme?version=x", "GET", 400),  # the app's validation
        ("/v1/reports", "GET", 405),
        ("/v1/reportsx", "POST", 404),
        ("v1/reports", "POST", 404),
        ("/ldp/v1/reports", "POST", 400),  # behind a path prefix: the ingest route ({} is bad)
    ],
)
def test_the_gateway_serves_only_the_sdk_routes(
    client: FlaskClient, theme: MetricDefinition, path: str, method: str, status: int
) -> None:
    sealed, context = seal(key_config(client), b"{}", path, method)
    assert opened(post(client, sealed), context).status == status


@pytest.mark.parametrize("path", ["/v1/metrics/app.theme", "/ldp/v1/metrics/app.theme?version=1"])
def test_an_encapsulated_definition_fetch_gets_the_direct_answer(
    client: FlaskClient, theme: MetricDefinition, path: str
) -> None:
    """A device behind a relay fetches definitions sealed too: the same JSON as a direct
    ``GET`` (a path prefix is the collector URL's), read-only whatever it carries (an
    ``authorization`` that is no token grants nothing; a cookie is dropped)."""
    request = bhttp.BinaryRequest(
        "GET",
        "https",
        "collector.example",
        path,
        (("authorization", "Bearer not-forwarded-0123456789"), ("cookie", "a=b")),
        b"",
    )
    sealed, context = encapsulate_request(key_config(client), bhttp.encode_request(request))
    inner = opened(post(client, sealed), context)
    assert inner.status == 200 and inner.header("content-type") == "application/json"
    direct = client.get("/v1/metrics/app.theme" + path.partition("?")[1] + path.partition("?")[2])
    assert json.loads(inner.content) == direct.json


def test_the_ingest_key_inside_picks_the_project_and_admits_the_reports(
    redis_db: Any, theme: MetricDefinition
) -> None:
    """The app's ingest key rides inside the sealed request (the relay never reads it):
    the gateway passes the inner ``authorization`` on, so a relayed definition fetch reads
    the key's project's metric and a relayed upload counts there, in a project whose
    reports need a key (before, both acted in the default project: its definition, and
    its metric of the same name took what validated)."""
    app = make_app(redis_db.url, SHUFFLE_MIN_BATCH=1, INGEST_KEY_PROJECTS="shop")
    client = app.test_client()
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    admin, _ = store.create("shop admin", KINDS["admin"], "shop")
    key, _ = store.create("shop app", KINDS["ingest"], "shop")
    spec = {"domain": ["a", "b", "c", "d", "e"], "epsilon": 1.0, "mechanism": "grr"}
    made = client.put(
        "/v1/metrics/app.theme", json=spec, headers={"Authorization": f"Bearer {admin}"}
    )
    assert made.status_code == 201
    config = key_config(client)
    inside = (("authorization", f"Bearer {key}"),)

    def sealed(method: str, path: str, body: bytes, headers: tuple[tuple[str, str], ...]) -> Any:
        fields = headers + ((("content-type", "application/json"),) if body else ())
        request = bhttp.BinaryRequest(method, "https", "collector.example", path, fields, body)
        sealed, context = encapsulate_request(config, bhttp.encode_request(request))
        return opened(post(client, sealed), context)

    got = sealed("GET", "/v1/metrics/app.theme", b"", inside)
    assert got.status == 200 and json.loads(got.content)["domain"] == spec["domain"]
    shop = MetricDefinition.from_dict(json.loads(got.content))
    body = json.dumps({"reports": reports(shop, 4)}).encode()
    answered = sealed("POST", "/v1/reports", body, inside)
    assert answered.status == 202, answered.content
    redis = services(app).redis
    assert streams.length(redis, keys.stream_key("shop/app.theme", 1)) == 4
    assert stream_length(app, theme) == 0  # the default project's metric of that name
    assert json.loads(sealed("GET", "/v1/metrics/app.theme", b"", ()).content)["domain"] == list(
        theme.domain
    )


def test_wrong_type_and_method_get_clear_errors(client: FlaskClient) -> None:
    answer = client.post(GATEWAY_PATH, data=b"x", headers={"Content-Type": "application/json"})
    assert answer.status_code == 415 and "message/ohttp-req" in answer.json["error"]
    answer = client.put(GATEWAY_PATH, data=b"x")
    assert answer.status_code == 405 and answer.headers["Allow"] == "GET, HEAD, POST, OPTIONS"
    answer = post(client, b"\x01\x00")
    assert answer.status_code == 400 and "too short" in answer.json["details"][0]


def test_a_body_over_the_limit_is_a_413(redis_db: Any) -> None:
    client = make_app(redis_db.url, MAX_BODY_BYTES=1000, SHUFFLE_MIN_BATCH=1).test_client()
    answer = post(client, b"\0" * 3000)
    assert answer.status_code == 413


def test_the_relay_limit_answers_429(redis_db: Any, theme: MetricDefinition) -> None:
    """The clock stands still (issue 36: on the real one a loaded machine could take half
    a second between two requests, and the bucket of 2 a second refilled)."""
    app = make_app(redis_db.url, RELAY_REQUESTS_PER_SECOND=2)
    layer = app.wsgi_app
    while not isinstance(layer, ObliviousGateway):
        layer = layer.app  # the middlewares around the gateway
    limit = layer.relay_admission
    assert limit is not None
    now = [1000.0]
    limit.clock = lambda: now[0]
    limit.rotate()
    client = app.test_client()
    config = key_config(client)
    statuses = [post(client, seal(config, b"{}")[0]).status_code for _ in range(4)]
    assert statuses == [200, 200, 429, 429]
    now[0] += 0.5  # one token back
    assert [post(client, seal(config, b"{}")[0]).status_code for _ in range(2)] == [200, 429]


def test_an_allowed_origin_may_fetch_the_keys_and_post(redis_db: Any) -> None:
    """The web SDK fetches the keys and, without a relay, posts from a page."""
    page = "https://app.example"
    client = make_app(redis_db.url, CORS_ORIGINS=[page], SHUFFLE_MIN_BATCH=1).test_client()
    preflight = client.options(
        GATEWAY_PATH,
        headers={"Origin": page, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == page
    assert preflight.headers["Access-Control-Allow-Headers"] == "Content-Type, Authorization"
    keys_answer = client.get(GATEWAY_PATH, headers={"Origin": page})
    assert keys_answer.headers["Access-Control-Allow-Origin"] == page
    other = client.get(GATEWAY_PATH, headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    assert other.headers["Vary"] == "Origin"
