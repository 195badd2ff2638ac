"""The OpenAPI document in sync with the apps that serve it, and with their answers.

Both apps are checked: the collector alone (``collector:create_app``) and ``ldp serve``'s
(``aggregator.service.app:create_server_app``, the collector plus the read APIs and the
dashboard). Every URL rule must be documented with its methods and nothing else may be,
except the dashboard blueprint's: its HTML pages (``/``, ``/ui/…``), its static files
and the vendored plotly.js are pages, not API. The read APIs' real answers are then
checked against their documented schemas with a small validator (the project has no
JSON-schema dependency): the keywords the document uses, nothing more.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest
from collector_helpers import ADMIN, THEME_SPEC, define, make_app, reports
from flask import Flask
from flask.testing import FlaskClient

from aggregator.service.app import create_server_app
from aggregator.stream.worker import Worker
from aggregator.web import estimates as web
from aggregator.web import plan as web_plan
from client_sdk.wire import build_report
from collector.openapi import OPENAPI, READ_LIMITS, app_paths, document
from ldp_store import schema

VERBS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
PAGES_BLUEPRINT = "dashboard"
"""Not described: HTML pages and their assets, under ``/`` and ``/ui/``."""

NUMERIC_SPEC = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}
BUDGET_SPEC = {
    "domain": ["a", "b", "c", "d"],
    "epsilon": 0.5,
    "mechanism": "oue",
    "budget": {"reports_per_period": 4, "period": "day"},
}


@pytest.fixture(params=["collector", "ldp serve"])
def any_app(request: pytest.FixtureRequest, redis_db: Any) -> Flask:
    """The collector alone, then the app ``ldp serve`` runs."""
    if request.param == "collector":
        return make_app(redis_db.url)
    return server_app(redis_db.url)


def server_app(redis_url: str, **config: Any) -> Flask:
    """``ldp serve``'s app on the test's Redis, with the test admin token."""
    token = ADMIN["Authorization"].removeprefix("Bearer ")
    return create_server_app(
        {"REDIS_URL": redis_url, "ADMIN_TOKEN": token, "TESTING": True, **config}
    )


def api_routes(app: Flask) -> dict[str, set[str]]:
    """The app's routes that the document must describe: all but the dashboard's."""
    pages = {
        re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith(PAGES_BLUEPRINT + ".")
    }
    assert all(p == "/" or p.startswith("/ui/") for p in pages), pages
    return {path: m for path, m in app_paths(app).items() if path not in pages}


def documented(doc: dict[str, Any]) -> dict[str, set[str]]:
    return {path: set(item) & VERBS for path, item in doc["paths"].items()}


def test_openapi_documents_every_route_with_its_methods_and_no_other(any_app: Flask) -> None:
    served = any_app.test_client().get("/openapi.json").json
    assert documented(served) == api_routes(any_app)


def test_ldp_serve_serves_the_whole_catalogue_and_the_collector_its_part(
    redis_db: Any,
) -> None:
    assert server_app(redis_db.url).test_client().get("/openapi.json").json == OPENAPI
    collector = make_app(redis_db.url)
    served = collector.test_client().get("/openapi.json").json
    assert served == document(collector)
    assert not any(
        path.startswith(("/v1/estimates", "/v1/overview", "/v1/plan")) for path in served["paths"]
    )
    assert set(served["components"]["securitySchemes"]) == {"adminToken"}


def test_openapi_is_well_formed(any_app: Flask) -> None:
    doc = any_app.test_client().get("/openapi.json").json
    assert doc["openapi"].startswith("3.1")
    refs = re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', str(doc).replace("'", '"'))
    assert refs and set(refs) <= set(doc["components"]["schemas"])
    schemes = doc["components"]["securitySchemes"]
    for path, item in doc["paths"].items():
        params = {p["name"] for p in item.get("parameters", [])}
        assert set(re.findall(r"{([^}]+)}", path)) <= params, path
        for verb, operation in item.items():
            if verb == "parameters":
                continue
            assert operation["responses"], (path, verb)
            for status in operation["responses"]:
                assert re.fullmatch(r"[1-5]\d\d", status), (path, verb, status)
            for requirement in operation.get("security", []):
                assert set(requirement) <= set(schemes), (path, verb)


def test_every_documented_path_exists(any_app: Flask) -> None:
    client = any_app.test_client()
    doc = client.get("/openapi.json").json
    for path, verbs in documented(doc).items():
        concrete = path.replace("{name}", "app.none")
        for verb in verbs:
            response = client.open(concrete, method=verb.upper())
            assert response.status_code not in (404, 405) or response.json.get(
                "error", ""
            ).startswith("unknown metric"), (path, verb, response.status_code)


def test_read_limits_are_the_aggregators() -> None:
    assert READ_LIMITS == {
        "window_pattern": schema.WINDOW_PATTERN.pattern,
        "max_trend_windows": web.MAX_TREND_WINDOWS,
        "max_points": web_plan.MAX_POINTS,
        "min_n": web_plan.MIN_N,
        "max_n": web_plan.MAX_N,
        "default_grid": web_plan.DEFAULT_GRID,
    }


# -- answers against the documented schemas -----------------------------------------------

_TYPES: dict[str, Any] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
    "null": lambda x: x is None,
}


def problems(value: Any, schema: dict[str, Any], doc: dict[str, Any], at: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema`` (resolving ``$ref`` in ``doc``); [] if nowhere."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        return problems(value, doc["components"]["schemas"][name], doc, at)
    found: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_TYPES[k](value) for k in kinds):
            return [f"{at}: {value!r} is not {'/'.join(kinds)}"]
    if "const" in schema and value != schema["const"]:
        found.append(f"{at}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{at}: {value!r} not in {schema['enum']}")
    for sub in schema.get("allOf", []):
        found += problems(value, sub, doc, at)
    if "anyOf" in schema and all(problems(value, s, doc, at) for s in schema["anyOf"]):
        found.append(f"{at}: matches none of anyOf")
    if "oneOf" in schema:
        matches = sum(not problems(value, s, doc, at) for s in schema["oneOf"])
        if matches != 1:
            found.append(f"{at}: matches {matches} of oneOf, not one")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{at}: {key} is missing")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                found += problems(item, properties[key], doc, f"{at}.{key}")
            elif schema.get("additionalProperties") is False:
                found.append(f"{at}: {key} is not allowed")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            found.append(f"{at}: fewer than {schema['minItems']} items")
        if len(value) > schema.get("maxItems", math.inf):
            found.append(f"{at}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                found += problems(item, schema["items"], doc, f"{at}[{i}]")
    if _TYPES["number"](value):
        if value < schema.get("minimum", -math.inf) or value > schema.get("maximum", math.inf):
            found.append(f"{at}: {value} out of bounds")
        low, high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if (low is not None and value <= low) or (high is not None and value >= high):
            found.append(f"{at}: {value} out of bounds")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        found.append(f"{at}: {value!r} does not match {schema['pattern']}")
    return found


def test_the_validator_catches_what_it_should() -> None:
    row = {"$ref": "#/components/schemas/PlanRow"}
    good = {
        "mechanism": "grr",
        "variance_star": 1.0,
        "wire_bytes": None,
        "half_width": 0.1,
        "users": 3,
        "auto": False,
    }
    assert problems(good, row, OPENAPI) == []
    assert problems({**good, "users": True}, row, OPENAPI)
    assert problems({**good, "users": 0}, row, OPENAPI)
    assert problems({k: v for k, v in good.items() if k != "auto"}, row, OPENAPI)
    assert problems({**good, "wire_bytes": "8"}, row, OPENAPI)


def operation_for(doc: dict[str, Any], url: str) -> tuple[str, dict[str, Any]]:
    """The documented path and GET operation that ``url`` (with a query) falls under."""
    route = url.split("?")[0]
    for path, item in doc["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", path), route):
            return path, item["get"]
    raise AssertionError(f"{url} is not documented")


@pytest.fixture
def server(redis_db: Any) -> FlaskClient:
    """``ldp serve``'s app with a categorical, a numeric, a budgeted and an empty metric,
    reports counted for the first three."""
    client = server_app(redis_db.url).test_client()
    rng = random.Random(7)
    batch: list[dict[str, Any]] = []
    theme = define(client, "app.theme", THEME_SPEC)
    batch += reports(theme, 50)
    minutes = define(client, "session.minutes", NUMERIC_SPEC)
    batch += [build_report(minutes, rng.uniform(0, 120), rng) for _ in range(50)]
    budgeted = define(client, "app.tier", BUDGET_SPEC)
    batch += reports(budgeted, 30, value=2)
    define(client, "app.empty", {**THEME_SPEC, "epsilon": 2.0})
    assert client.post("/v1/reports", json={"reports": batch}).status_code == 202
    Worker(redis_db.client(), handle_signals=False).run(once=True)
    return client


def read_urls(client: FlaskClient) -> list[str]:
    rows = {row["name"]: row for row in client.get("/v1/overview").json["metrics"]}
    hour = rows["app.theme"]["last_window"]
    assert hour and hour.startswith("hour:")
    day = "day:" + hour[5:15]
    urls = ["/v1/overview"]
    for name in ("app.theme", "session.minutes", "app.tier", "app.empty"):
        urls += [
            f"/v1/estimates/{name}",
            f"/v1/estimates/{name}?version=1&window={hour}&confidence=0.9",
            f"/v1/estimates/{name}?window={day}&simultaneous=true",
            f"/v1/estimates/{name}/trend",
            f"/v1/estimates/{name}/trend?granularity=day&confidence=0.99&simultaneous=1",
        ]
    return urls + [
        "/v1/plan?epsilon=1&k=3&users=1000",
        "/v1/plan?epsilon=0.5&k=64&width=0.01&confidence=0.9",
        "/v1/plan/curve?epsilon=1&k=3",
        "/v1/plan/curve?epsilon=2&k=16&mechanism=blh&points=31&n_min=10&n_max=1e6",
    ]


def test_read_api_answers_match_their_documented_schemas(server: FlaskClient) -> None:
    doc = server.get("/openapi.json").json
    urls = read_urls(server)
    kinds: set[str] = set()
    for url in urls:
        response = server.get(url)
        assert response.status_code == 200, (url, response.json)
        path, operation = operation_for(doc, url)
        schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert problems(response.json, schema, doc) == [], url
        kinds.add(response.json.get("kind", "categorical") if "estimates/" in url else "")
    assert {"categorical", "numeric"} <= kinds
    # Every read path was exercised; the document's nulls were met (the empty metric).
    exercised = {operation_for(doc, url)[0] for url in urls}
    assert exercised == {
        p for p in doc["paths"] if p.startswith(("/v1/estimates", "/v1/overview", "/v1/plan"))
    }
    empty = server.get("/v1/estimates/app.empty").json
    assert empty["n"] == 0 and empty["estimates"][0]["frequency"] is None


@pytest.mark.parametrize("name", ["app.theme", "session.minutes"])
def test_csv_is_documented(server: FlaskClient, name: str) -> None:
    doc = server.get("/openapi.json").json
    url = f"/v1/estimates/{name}?format=csv"
    response = server.get(url)
    _, operation = operation_for(doc, url)
    ok = operation["responses"]["200"]
    assert response.mimetype in ok["content"]
    assert set(ok["headers"]) <= set(response.headers.keys())
    columns = response.text.splitlines()[0].split(",")
    assert all(column in ok["content"]["text/csv"]["description"] for column in columns)


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/v1/estimates/app.theme?version=0", 400),
        ("/v1/estimates/app.theme?window=week:1", 400),
        ("/v1/estimates/app.theme?confidence=1", 400),
        ("/v1/estimates/app.theme?format=xml", 400),
        ("/v1/estimates/app.nope", 404),
        ("/v1/estimates/app.theme?version=9", 404),
        ("/v1/estimates/app.theme/trend?granularity=week", 400),
        ("/v1/estimates/app.nope/trend", 404),
        ("/v1/plan?epsilon=1&k=3", 400),
        ("/v1/plan/curve?epsilon=1&k=3&points=1", 400),
    ],
)
def test_read_api_errors_are_documented(server: FlaskClient, url: str, status: int) -> None:
    doc = server.get("/openapi.json").json
    response = server.get(url)
    assert response.status_code == status
    _, operation = operation_for(doc, url)
    schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
    assert problems(response.json, schema, doc) == []


def test_the_read_token_is_documented(redis_db: Any) -> None:
    client = server_app(redis_db.url, READ_TOKEN="read-77").test_client()
    define(client, "app.theme", THEME_SPEC)
    doc = client.get("/openapi.json").json  # the document itself stays open
    for url in ["/v1/estimates/app.theme", "/v1/overview", "/v1/plan?epsilon=1&k=3&users=9"]:
        response = client.get(url)
        assert response.status_code == 401
        _, operation = operation_for(doc, url)
        assert {"readToken", "readTokenBasic"} <= {n for r in operation["security"] for n in r}
        refused = operation["responses"]["401"]
        assert set(refused["headers"]) <= set(response.headers.keys())
        assert problems(response.json, refused["content"]["application/json"]["schema"], doc) == []
        authorized = client.get(url, headers={"Authorization": "Bearer read-77"})
        assert authorized.status_code == 200
    schemes = doc["components"]["securitySchemes"]
    assert schemes["readToken"] == {**schemes["readToken"], "type": "http", "scheme": "bearer"}
    assert doc["paths"]["/v1/metrics/{name}"]["put"]["security"] == [{"adminToken": []}]
