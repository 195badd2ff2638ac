"""The OpenAPI document in sync with the apps that serve it, and with their answers.

Both apps are checked: the collector alone (``collector:create_app``) and ``ldp serve``'s
(``ldp_server.app:create_server_app``, the collector plus the read APIs and the
dashboard). The document is generated from the routes' own models (:mod:`ldp_api.openapi`);
these tests hold it to what the apps do: every URL rule is documented with its methods and
nothing else is, except the dashboard blueprint's HTML pages and assets (``/``, ``/ui/…``);
it is a valid OpenAPI 3.1 document; its limits are the constants the code enforces, and
the code refuses what lies beyond them; and real answers of every API, errors included,
match their documented schemas (checked with ``jsonschema``, Draft 2020-12).
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from collector_helpers import ADMIN, THEME_SPEC, define, make_app, reports
from flask import Flask
from flask.testing import FlaskClient
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi

from aggregator.stream.worker import Worker
from aggregator.web import models as read_models
from client_sdk import mechanisms, wire
from client_sdk.mechanisms.joint import MAX_ATTRIBUTE_SIZE, MAX_ATTRIBUTES
from client_sdk.mechanisms.numeric import MAX_RANGE_MAGNITUDE
from client_sdk.mechanisms.strings import MAX_STRING_LENGTH
from client_sdk.wire import build_report
from collector import models as collector_models
from collector import settings
from ldp_server.app import create_server_app
from ldp_store import schema
from ldp_store.embedded import free_port

VERBS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
PAGES_BLUEPRINT = "dashboard"
"""Not described: HTML pages and their assets, under ``/`` and ``/ui/``."""

READ_PREFIXES = ("/v1/estimates", "/v1/export", "/v1/overview", "/v1/plan")

NUMERIC_SPEC = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}
STRING_SPEC = {"kind": "string", "max_length": 8, "epsilon": 4.0}
BUDGET_SPEC = {
    "domain": ["a", "b", "c", "d"],
    "epsilon": 0.5,
    "mechanism": "oue",
    "budget": {"reports_per_period": 4, "period": "day"},
}
LONGITUDINAL_SPEC = {
    "domain": ["a", "b", "c"],
    "epsilon": 1.0,
    "longitudinal": {"permanent_epsilon": 3.0},
    "budget": {"reports_per_period": 2, "period": "day"},
    "description": "memoized",
    "shards": 2,
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


def openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def api_routes(app: Flask) -> dict[str, set[str]]:
    """The app's routes that the document must describe, with their methods: all but the
    dashboard's (HEAD and OPTIONS, which Flask adds to every rule, left out)."""
    found: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        path = openapi_path(rule.rule)
        if rule.endpoint.startswith(PAGES_BLUEPRINT + "."):
            assert path == "/" or path.startswith("/ui/"), path
            continue
        found.setdefault(path, set()).update(m.lower() for m in rule.methods or ())
    return {path: methods - {"head", "options"} for path, methods in found.items()}


def documented(doc: dict[str, Any]) -> dict[str, set[str]]:
    return {path: set(item) & VERBS for path, item in doc["paths"].items()}


def test_openapi_documents_every_route_with_its_methods_and_no_other(any_app: Flask) -> None:
    served = any_app.test_client().get("/openapi.json").json
    assert documented(served) == api_routes(any_app)


def test_each_app_documents_what_it_mounts(redis_db: Any) -> None:
    whole = server_app(redis_db.url).test_client().get("/openapi.json").json
    collector = make_app(redis_db.url).test_client().get("/openapi.json").json
    # The collector's routes are documented alike alone and within ldp serve's app.
    assert collector["paths"] == {p: whole["paths"][p] for p in collector["paths"]}
    assert not any(path.startswith(READ_PREFIXES) for path in collector["paths"])
    assert {p for p in whole["paths"] if p.startswith(READ_PREFIXES)} == {
        "/v1/estimates/{name}",
        "/v1/estimates/{name}/trend",
        "/v1/export",
        "/v1/export/{name}",
        "/v1/overview",
        "/v1/plan",
        "/v1/plan/curve",
        "/v1/plan/strings",
        "/v1/plan/strings/curve",
    }
    assert set(collector["components"]["securitySchemes"]) == {"adminToken", "metricsToken"}
    assert set(whole["components"]["securitySchemes"]) == {
        "adminToken",
        "metricsToken",
        "readToken",
        "readTokenBasic",
    }
    # Only the schemas an app's routes use; the same schema wherever both have it.
    assert "Estimates" not in collector["components"]["schemas"]
    for name, component in collector["components"]["schemas"].items():
        assert whole["components"]["schemas"][name] == component, name


def test_openapi_is_well_formed(any_app: Flask) -> None:
    doc = any_app.test_client().get("/openapi.json").json
    validate_openapi(doc)  # the OpenAPI 3.1 specification's own schema
    assert doc["openapi"] == "3.1.0"
    refs = set(re.findall(r"#/components/schemas/([^'\"]+)", str(doc)))
    assert refs and refs <= set(doc["components"]["schemas"])
    schemes = doc["components"]["securitySchemes"]
    for path, item in doc["paths"].items():
        for verb, operation in item.items():
            params = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert set(re.findall(r"{([^}]+)}", path)) == params, (path, verb)
            assert operation["summary"] and operation["responses"], (path, verb)
            for status in operation["responses"]:
                assert re.fullmatch(r"[1-5]\d\d", status), (path, verb, status)
            for requirement in operation.get("security", []):
                assert set(requirement) <= set(schemes), (path, verb)


def test_every_documented_path_exists(any_app: Flask) -> None:
    client = any_app.test_client()
    doc = client.get("/openapi.json").json
    for path, verbs in documented(doc).items():
        concrete = path.replace("{name}", "index.js" if path.startswith("/sdk/") else "app.none")
        for verb in verbs:
            response = client.open(concrete, method=verb.upper())
            assert response.status_code not in (404, 405) or response.json.get(
                "error", ""
            ).startswith(("unknown metric", "unknown alert rule")), (
                path,
                verb,
                response.status_code,
            )


# -- limits: the enforcing constants, and enforced ------------------------------------------


def parameter(doc: dict[str, Any], path: str, name: str, verb: str = "get") -> dict[str, Any]:
    """The schema of a documented query key: a parameter, or a property of an object
    parameter exploded into the query (``style: form, explode: true``)."""
    found = []
    for p in doc["paths"][path][verb].get("parameters", []):
        if p["name"] == name:
            found.append(p["schema"])
        elif p.get("explode") and name in p["schema"].get("properties", {}):
            assert p["style"] == "form" and p["in"] == "query", p
            found.append(p["schema"]["properties"][name])
    assert len(found) == 1, (path, name)
    return dict(found[0])


def component(doc: dict[str, Any], name: str, *fields: str) -> dict[str, Any]:
    """A component schema, or the schema of a property (of a property...) of it."""
    node = doc["components"]["schemas"][name]
    for field in fields:
        node = node["items"] if field == "[]" else node["properties"][field]
    return dict(node)


def test_the_documents_limits_are_the_enforcing_constants(redis_db: Any) -> None:
    doc = server_app(redis_db.url).test_client().get("/openapi.json").json
    name = parameter(doc, "/v1/estimates/{name}", "name")
    assert name["maxLength"] == wire.MAX_NAME_LENGTH
    assert name["pattern"] == f"^(?:{wire.NAME_PATTERN.pattern})$"
    for path in ("/v1/metrics/{name}", "/v1/estimates/{name}/trend"):
        assert parameter(doc, path, "name") == name
    assert parameter(doc, "/v1/metrics/{name}", "version")["maximum"] == (
        10**collector_models.MAX_VERSION_DIGITS - 1
    )
    window = parameter(doc, "/v1/estimates/{name}", "window")
    assert window["pattern"] == f"^(?:{schema.WINDOW_REGEX})$"
    assert window["default"] == schema.ALL
    assert component(doc, "Trend", "windows")["maxItems"] == read_models.MAX_TREND_WINDOWS
    assert component(doc, "Curves", "n")["maxItems"] == read_models.MAX_POINTS
    lo, hi, points = read_models.DEFAULT_GRID
    curve = "/v1/plan/curve"
    assert parameter(doc, curve, "points")["maximum"] == read_models.MAX_POINTS
    assert parameter(doc, curve, "points")["default"] == points
    assert parameter(doc, curve, "n_min") == {"type": "number", "minimum": 1.0, "default": lo}
    assert parameter(doc, curve, "n_max")["maximum"] == read_models.MAX_N
    assert parameter(doc, curve, "n_max")["default"] == hi
    users = parameter(doc, "/v1/plan", "users")
    assert (users["minimum"], users["maximum"]) == (read_models.MIN_N, read_models.MAX_N)
    for path in ("/v1/plan", curve):
        epsilon = parameter(doc, path, "epsilon")
        assert (epsilon["minimum"], epsilon["maximum"]) == (
            mechanisms.MIN_EPSILON,
            mechanisms.MAX_EPSILON,
        )
        assert parameter(doc, path, "k")["maximum"] == mechanisms.MAX_DOMAIN_SIZE
        assert parameter(doc, path, "confidence")["default"] == read_models.DEFAULT_CONFIDENCE
        assert parameter(doc, path, "confidence")["minimum"] == read_models.MIN_CONFIDENCE
    assert parameter(doc, "/v1/plan", "width")["minimum"] == read_models.MIN_WIDTH
    target = next(p for p in doc["paths"]["/v1/plan"]["get"]["parameters"] if p.get("explode"))
    assert target["schema"]["oneOf"] == [{"required": ["users"]}, {"required": ["width"]}]
    assert parameter(doc, curve, "mechanism")["enum"] == list(read_models.CURVE_MECHANISMS)
    assert not any(m.startswith("memo-") for m in read_models.CURVE_MECHANISMS)
    assert component(doc, "ReportBatch", "reports")["maxItems"] == settings.MAX_REPORTS
    assert component(doc, "Report", "id")["pattern"] == f"^{wire.REPORT_ID_PATTERN.pattern}$"
    assert component(doc, "MetricSpec")["anyOf"] == [
        {"$ref": "#/components/schemas/CategoricalSpec"},
        {"$ref": "#/components/schemas/NumericSpec"},
        {"$ref": "#/components/schemas/StringSpec"},
        {"$ref": "#/components/schemas/JointSpec"},
        {"$ref": "#/components/schemas/DistributionSpec"},
    ]
    joint = component(doc, "JointSpec")
    assert joint["properties"]["kind"]["const"] == wire.KINDS[3]
    assert set(joint["required"]) == {"kind", "attributes", "epsilon"}
    assert joint["properties"]["attributes"]["maxItems"] == MAX_ATTRIBUTES
    assert component(doc, "Attribute", "domain")["maxItems"] == MAX_ATTRIBUTE_SIZE
    strings = component(doc, "StringSpec")
    assert strings["properties"]["kind"]["const"] == wire.KINDS[2]
    assert set(strings["required"]) == {"kind", "max_length", "epsilon"}
    assert strings["properties"]["max_length"]["maximum"] == MAX_STRING_LENGTH
    spec = component(doc, "CategoricalSpec")
    assert spec["dependentRequired"] == {"longitudinal": ["budget"]}
    assert spec["properties"]["domain"]["maxItems"] == mechanisms.MAX_DOMAIN_SIZE
    assert spec["properties"]["domain"]["items"]["maxLength"] == wire.MAX_LABEL_LENGTH
    assert spec["properties"]["description"]["maxLength"] == wire.MAX_DESCRIPTION_LENGTH
    assert spec["properties"]["shards"]["anyOf"][0]["maximum"] == wire.MAX_SHARDS
    assert spec["properties"]["kind"]["const"] == wire.KINDS[0]
    permanent = component(doc, "Longitudinal", "permanent_epsilon")
    assert permanent["maximum"] == mechanisms.MAX_EPSILON
    numeric = component(doc, "NumericSpec")
    assert numeric["properties"]["kind"]["const"] == wire.KINDS[1]
    assert set(numeric["required"]) == {"kind", "range", "epsilon"}
    assert numeric["properties"]["shards"]["anyOf"][0]["maximum"] == wire.MAX_SHARDS
    assert numeric["properties"]["range"]["items"]["maximum"] == MAX_RANGE_MAGNITUDE
    budget = component(doc, "DeviceBudget", "reports_per_period")
    assert budget["maximum"] == wire.MAX_REPORTS_PER_PERIOD
    assert component(doc, "DeviceBudget", "period")["enum"] == list(wire.BUDGET_PERIODS)


def beyond(limit: float, kind: str, up: bool) -> str:
    """The smallest step past ``limit`` that a query can express."""
    if kind == "integer":
        return str(int(limit) + (1 if up else -1))
    return repr(limit * (1 + 1e-9) if up else limit * (1 - 1e-9))


@pytest.mark.parametrize(
    ("path", "name", "base"),
    [
        ("/v1/plan", "epsilon", "k=3&users=100"),
        ("/v1/plan", "k", "epsilon=1&users=100"),
        ("/v1/plan", "users", "epsilon=1&k=3"),
        ("/v1/plan", "width", "epsilon=1&k=3"),
        ("/v1/plan", "confidence", "epsilon=1&k=3&users=100"),
        ("/v1/plan/curve", "points", "epsilon=1&k=3"),
        ("/v1/plan/curve", "n_min", "epsilon=1&k=3"),
        ("/v1/plan/curve", "n_max", "epsilon=1&k=3"),
        ("/v1/plan/strings/curve", "points", "epsilon=4"),
        ("/v1/plan/strings/curve", "max_length", "epsilon=4"),
        ("/v1/plan/strings/curve", "power", "epsilon=4"),
        ("/v1/estimates/{name}", "confidence", ""),
        ("/v1/estimates/{name}", "version", ""),
        ("/v1/metrics/{name}", "version", ""),
    ],
)
def test_documented_limits_are_enforced(redis_db: Any, path: str, name: str, base: str) -> None:
    """At each documented bound the API answers; one step beyond it refuses with a 400."""
    client = server_app(redis_db.url).test_client()
    define(client, "app.theme", THEME_SPEC)
    doc = client.get("/openapi.json").json
    limits = parameter(doc, path, name)
    url = path.replace("{name}", "app.theme") + "?" + (base + "&" if base else "")
    checked = 0
    for keyword, up, inclusive in [
        ("minimum", False, True),
        ("maximum", True, True),
        ("exclusiveMinimum", False, False),
        ("exclusiveMaximum", True, False),
    ]:
        if keyword not in limits:
            continue
        bound = limits[keyword]
        if inclusive and not (name == "version" and up):  # no version 10¹⁸ to find
            inside = bound if limits["type"] == "number" else int(bound)
            assert client.get(f"{url}{name}={inside}").status_code == 200, (keyword, bound)
        outside = beyond(bound, limits["type"], up) if inclusive else str(bound)
        response = client.get(f"{url}{name}={outside}")
        assert response.status_code == 400, (keyword, outside, response.json)
        checked += 1
    assert checked, limits


def test_the_request_models_have_the_wire_codes_fields() -> None:
    assert set(collector_models.CategoricalSpec.model_fields) == wire.SPEC_FIELDS
    assert set(collector_models.NumericSpec.model_fields) == wire.NUMERIC_SPEC_FIELDS
    assert set(collector_models.StringSpec.model_fields) == wire.STRING_SPEC_FIELDS
    assert set(collector_models.JointSpec.model_fields) == wire.JOINT_SPEC_FIELDS
    assert (
        tuple(collector_models.Report.model_fields)
        == wire.REPORT_FIELDS + wire.OPTIONAL_REPORT_FIELDS
    )


# -- answers against the documented schemas -----------------------------------------------


def problems(value: Any, schema: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    """Where ``value`` breaks ``schema`` (references resolved in ``doc``); [] if nowhere."""
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]


def test_the_validator_catches_what_it_should(redis_db: Any) -> None:
    doc = server_app(redis_db.url).test_client().get("/openapi.json").json
    row = {"$ref": "#/components/schemas/PlannedMechanism"}
    good = {
        "mechanism": "grr",
        "variance_star": 1.0,
        "wire_bytes": None,
        "half_width": 0.1,
        "users": 3,
        "auto": False,
        "max_gain": 0.3,
    }
    assert problems(good, row, doc) == []
    assert problems({**good, "users": True}, row, doc)
    assert problems({**good, "users": 0}, row, doc)
    assert problems({k: v for k, v in good.items() if k != "auto"}, row, doc)
    assert problems({**good, "wire_bytes": "8"}, row, doc)
    report = {"$ref": "#/components/schemas/Report"}
    sent = {"metric": "app.theme", "version": 1, "id": "0" * 32, "payload": {}}
    assert problems(sent, report, doc) == []
    assert problems({**sent, "device": "x"}, report, doc)  # requests are closed
    assert problems({**sent, "id": "0" * 31}, report, doc)


def operation_for(doc: dict[str, Any], url: str, verb: str = "get") -> tuple[str, dict[str, Any]]:
    """The documented path and operation that ``url`` (with a query) falls under."""
    route = url.split("?")[0]
    for path, item in doc["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", path), route):
            return path, item[verb]
    raise AssertionError(f"{url} is not documented")


def check_answer(doc: dict[str, Any], verb: str, url: str, response: Any) -> dict[str, Any]:
    """Assert that ``response`` is a documented answer of its operation; return that."""
    _, operation = operation_for(doc, url, verb)
    documented_reply = operation["responses"].get(str(response.status_code))
    assert documented_reply is not None, (verb, url, response.status_code)
    assert set(documented_reply.get("headers", {})) <= set(response.headers.keys()) or (
        "text/csv" in documented_reply["content"]  # Content-Disposition: CSV only
    )
    schema = documented_reply["content"]["application/json"]["schema"]
    assert problems(response.json, schema, doc) == [], (verb, url, response.json)
    return dict(documented_reply)


def test_collector_answers_match_their_documented_schemas(redis_db: Any) -> None:
    app = make_app(redis_db.url)
    client = app.test_client()
    doc = client.get("/openapi.json").json
    statuses: set[tuple[str, str, int]] = set()

    def call(verb: str, url: str, **kwargs: Any) -> Any:
        response = client.open(url, method=verb.upper(), **kwargs)
        check_answer(doc, verb, url, response)
        statuses.add((operation_for(doc, url, verb)[0], verb, response.status_code))
        return response

    # The specs are valid MetricSpecs; the definitions they make are valid Metrics.
    for name, spec in [
        ("app.theme", THEME_SPEC),
        ("session.minutes", NUMERIC_SPEC),
        ("app.tier", BUDGET_SPEC),
        ("app.seen", LONGITUDINAL_SPEC),
    ]:
        assert problems(spec, {"$ref": "#/components/schemas/MetricSpec"}, doc) == []
        assert call("put", f"/v1/metrics/{name}", json=spec, headers=ADMIN).status_code == 201
    assert call("put", "/v1/metrics/app.tier", json=BUDGET_SPEC, headers=ADMIN).status_code == 200
    call("put", "/v1/metrics/app.bad", json={"domain": ["a"], "epsilon": 99}, headers=ADMIN)
    call("put", "/v1/metrics/app.bad", json=THEME_SPEC)
    call("put", "/v1/metrics/app.bad", json=THEME_SPEC, headers={"Authorization": "Bearer x"})
    call("put", "/v1/metrics/app.bad", data="{}", headers={**ADMIN, "Content-Type": "text/x"})
    too_big = "x" * (settings.MAX_BODY_BYTES + 1)
    call(
        "put",
        "/v1/metrics/app.bad",
        data=too_big,
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    for url in ["/v1/metrics", "/v1/metrics/app.theme", "/v1/metrics/session.minutes?version=1"]:
        assert call("get", url).status_code == 200
    call("get", "/v1/metrics/app.theme?version=0")
    call("get", "/v1/metrics/app.nope")
    for url in ["/healthz", "/readyz"]:
        call("get", url)

    theme = define(client, "app.theme", THEME_SPEC)
    minutes = define(client, "session.minutes", NUMERIC_SPEC)
    rng = random.Random(3)
    batch = reports(theme, 20) + [build_report(minutes, rng.uniform(0, 120), rng) for _ in range(5)]
    assert problems({"reports": batch}, {"$ref": "#/components/schemas/ReportBatch"}, doc) == []
    assert call("post", "/v1/reports", json={"reports": batch}).json["accepted"] == 25
    mixed = call("post", "/v1/reports", json={"reports": [*batch[:2], {"metric": "x"}]})
    assert mixed.json["duplicates"] == 2 and mixed.json["rejected"][0]["index"] == 2
    refused = call("post", "/v1/reports", json={"reports": [{"metric": "x"}, 7]})
    assert len(refused.json["rejected"]) == 2
    call("post", "/v1/reports", data="{oops", headers={"Content-Type": "application/json"})
    call("post", "/v1/reports", data="{}", headers={"Content-Type": "text/plain"})
    call("post", "/v1/reports", json={"reports": batch[:1] * (settings.MAX_REPORTS + 1)})

    # Storage down: 503 with Retry-After, as documented.
    down = make_app(f"redis://127.0.0.1:{free_port()}/0").test_client()
    for verb, url, kwargs in [
        ("get", "/v1/metrics", {}),
        ("get", "/readyz", {}),
        ("post", "/v1/reports", {"json": {"reports": batch[:1]}}),
    ]:
        response = down.open(url, method=verb.upper(), **kwargs)
        assert response.status_code == 503
        check_answer(doc, verb, url, response)
        statuses.add((url, verb, 503))

    assert statuses >= {
        ("/v1/metrics/{name}", "put", status) for status in (200, 201, 400, 401, 403, 413, 415)
    } | {("/v1/metrics/{name}", "get", status) for status in (200, 400, 404)} | {
        ("/v1/reports", "post", status) for status in (202, 400, 413, 415, 503)
    }


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
    terms = define(client, "search.term", STRING_SPEC)
    batch += [build_report(terms, rng.choice(["pizza", "sushi"]), rng) for _ in range(40)]
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
            f"/v1/estimates/{name}?multiplicity=fdr&estimand=population",
            f"/v1/export/{name}",
            f"/v1/export/{name}?version=1&window={day}&confidence=0.9",
        ]
    urls += [
        "/v1/estimates/search.term",
        f"/v1/estimates/search.term?window={hour}&candidates=pizza,ramen&confidence=0.9",
        "/v1/export/search.term",
        "/v1/export",
        "/v1/export?metric=app.theme&granularity=day",
        f"/v1/export?metric=app.theme&version=1&since={hour[5:15]}",
    ]
    return urls + [
        "/v1/plan?epsilon=1&k=3&users=1000",
        "/v1/plan?epsilon=0.5&k=64&width=0.01&confidence=0.9",
        "/v1/plan/curve?epsilon=1&k=3",
        "/v1/plan/curve?epsilon=2&k=16&mechanism=blh&points=31&n_min=10&n_max=1e6",
        "/v1/plan/strings?epsilon=4&users=1000000",
        "/v1/plan/strings?epsilon=1&max_length=8&frequency=0.001&concentration=0.2",
        "/v1/plan/strings/curve?epsilon=4",
        "/v1/plan/strings/curve?epsilon=2&max_length=8&concentration=0.01&power=0.8&points=9",
    ]


def test_read_api_answers_match_their_documented_schemas(server: FlaskClient) -> None:
    doc = server.get("/openapi.json").json
    urls = read_urls(server)
    kinds: set[str] = set()
    for url in urls:
        response = server.get(url)
        assert response.status_code == 200, (url, response.json)
        check_answer(doc, "get", url, response)
        kinds.add(response.json.get("kind", "categorical") if "estimates/" in url else "")
    assert {"categorical", "numeric", "string"} <= kinds
    # Every read path was exercised; the document's nulls were met (the empty metric).
    exercised = {operation_for(doc, url)[0] for url in urls}
    assert exercised == {p for p in doc["paths"] if p.startswith(READ_PREFIXES)}
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
    description = ok["content"]["text/csv"]["schema"]["description"]
    assert all(column in description for column in columns)


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
        ("/v1/plan/strings?epsilon=4", 400),
        ("/v1/estimates/search.term/trend", 400),
        ("/v1/estimates/search.term?candidates=" + ",".join(["x"] * 101), 400),
        ("/v1/plan/strings?epsilon=4&users=10&frequency=0.1", 400),
        ("/v1/plan/strings?epsilon=4&max_length=65&users=10", 400),
        ("/v1/plan/strings?epsilon=x&users=10", 400),
        ("/v1/plan/strings/curve?max_length=8", 400),
        ("/v1/plan/strings/curve?epsilon=4&n_min=10&n_max=5", 400),
        ("/v1/estimates/app.theme?multiplicity=bonferroni", 400),
        ("/v1/estimates/app.theme?multiplicity=fdr&simultaneous=true", 400),
        ("/v1/estimates/search.term?estimand=population", 400),
        ("/v1/export?granularity=week", 400),
        ("/v1/export?version=1", 400),
        ("/v1/export?metric=app.theme&since=yesterday", 400),
        ("/v1/export?metric=app.theme&granularity=all&since=2025-01-01", 400),
        ("/v1/export?metric=app.nope", 404),
        ("/v1/export/app.theme?window=week:1", 400),
        ("/v1/export/app.theme?confidence=2", 400),
        ("/v1/export/app.nope", 404),
        # Found by tests/test_schema_fuzz.py: each answered 500 before.
        ("/v1/plan?epsilon=0.0001&k=2&confidence=0.9999999999999999&users=1", 400),
        ("/v1/plan?epsilon=0.0001&k=2&confidence=0.999999&users=1", 200),
        ("/v1/plan?epsilon=1&k=3&width=5e-324", 400),
        ("/v1/plan?epsilon=1&k=3&width=0.5&confidence=1e-300", 400),
        ("/v1/estimates/app.theme?confidence=2.2e-311", 400),
        ("/v1/estimates/app.theme/trend?confidence=2.2e-311", 400),
        ("/v1/estimates/app.theme?confidence=0.9999999999999999&simultaneous=1", 400),
        ("/v1/estimates/app.theme?confidence=0.999999&simultaneous=1", 200),
        # A memoized mechanism's curve needs ε∞: not in the documented enum, refused.
        ("/v1/plan/curve?epsilon=1&k=3&mechanism=memo-oue", 400),
    ],
)
def test_read_api_answers_are_documented(server: FlaskClient, url: str, status: int) -> None:
    doc = server.get("/openapi.json").json
    response = server.get(url)
    assert response.status_code == status, response.json
    check_answer(doc, "get", url, response)


def test_the_read_token_is_documented(redis_db: Any) -> None:
    client = server_app(redis_db.url, READ_TOKEN="read-token-770077").test_client()
    define(client, "app.theme", THEME_SPEC)
    doc = client.get("/openapi.json").json  # the document itself stays open
    read_operations = [
        (path, item["get"]) for path, item in doc["paths"].items() if path.startswith(READ_PREFIXES)
    ]
    assert len(read_operations) == 9
    for path, operation in read_operations:  # every read API says so
        assert operation["security"] == [{"readToken": []}, {"readTokenBasic": []}], path
        assert "401" in operation["responses"], path
    reads = ["/v1/estimates/app.theme", "/v1/export/app.theme", "/v1/export", "/v1/overview"]
    for url in [*reads, "/v1/plan?epsilon=1&k=3&users=9"]:
        response = client.get(url)
        assert response.status_code == 401
        refused = check_answer(doc, "get", url, response)
        assert set(refused["headers"]) <= set(response.headers.keys())
        authorized = client.get(url, headers={"Authorization": "Bearer read-token-770077"})
        assert authorized.status_code == 200
    schemes = doc["components"]["securitySchemes"]
    assert schemes["readToken"] == {**schemes["readToken"], "type": "http", "scheme": "bearer"}
    assert schemes["readTokenBasic"]["scheme"] == "basic"
    assert doc["paths"]["/v1/metrics/{name}"]["put"]["security"] == [{"adminToken": []}]
    # Prometheus' per-metric counts are read data too (or LDP_METRICS_TOKEN's).
    assert doc["paths"]["/metrics"]["get"]["security"] == [{"metricsToken": []}]
    refused = client.get("/metrics")
    assert refused.status_code == 401
    check_answer(doc, "get", "/metrics", refused)
    assert (
        client.get("/metrics", headers={"Authorization": "Bearer read-token-770077"}).status_code
        == 200
    )
    admin = [{"adminToken": []}]  # PUT, retire, unretire, delete: operators
    for path, item in doc["paths"].items():  # alerts: reading reads, changes are admin's
        if path.startswith("/v1/alerts"):
            for verb, op in item.items():
                want = [{"readToken": []}, {"readTokenBasic": []}] if verb == "get" else admin
                assert op["security"] == want, (path, verb)
    for path, item in doc["paths"].items():  # the apps' own endpoints stay open
        if not path.startswith((*READ_PREFIXES, "/v1/alerts")) and path != "/metrics":
            assert all(op.get("security", admin) == admin for op in item.values()), path
            if path == "/v1/reports" or path == "/v1/metrics":
                assert all("security" not in op for op in item.values()), path


def test_security_follows_the_configuration(redis_db: Any) -> None:
    """Without LDP_READ_TOKEN the read APIs are open, and the document says so (their
    security is optional, no 401); without LDP_ADMIN_TOKEN metric changes are disabled
    (no credential asked for: 403)."""
    client = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True}).test_client()
    doc = client.get("/openapi.json").json
    for path, item in doc["paths"].items():
        if path.startswith(READ_PREFIXES):
            operation = item["get"]
            assert operation["security"] == [{"readToken": []}, {"readTokenBasic": []}, {}]
            assert "401" not in operation["responses"], path
    put = doc["paths"]["/v1/metrics/{name}"]["put"]
    assert "security" not in put and "401" not in put["responses"]
    assert put["description"].startswith("Disabled on this server (ADMIN_TOKEN is not set)")
    refused = client.put("/v1/metrics/app.theme", json=THEME_SPEC)
    assert refused.status_code == 403
    check_answer(doc, "put", "/v1/metrics/app.theme", refused)
    assert client.get("/v1/overview").status_code == 200


def test_json_integers_written_with_a_fraction_are_integers(redis_db: Any) -> None:
    """JSON Schema's integers include 2.0; so does the collector's reading of a spec."""
    client = make_app(redis_db.url).test_client()
    doc = client.get("/openapi.json").json
    spec = {**THEME_SPEC, "shards": 2.0, "budget": {"reports_per_period": 3.0, "period": "day"}}
    assert problems(spec, {"$ref": "#/components/schemas/MetricSpec"}, doc) == []
    created = client.put("/v1/metrics/app.theme", json=spec, headers=ADMIN)
    assert created.status_code == 201, created.json
    assert created.json["shards"] == 2 and created.json["budget"]["reports_per_period"] == 3
    for bad in (
        {"shards": 2.5},
        {"shards": True},
        {"budget": {"reports_per_period": 1.5, "period": "day"}},
    ):
        assert problems({**THEME_SPEC, **bad}, {"$ref": "#/components/schemas/MetricSpec"}, doc)
        assert (
            client.put("/v1/metrics/app.x", json={**THEME_SPEC, **bad}, headers=ADMIN).status_code
            == 400
        )


def test_the_spec_schema_tells_the_kinds_apart(redis_db: Any) -> None:
    client = make_app(redis_db.url).test_client()
    doc = client.get("/openapi.json").json
    spec = {"$ref": "#/components/schemas/MetricSpec"}
    numeric = {"kind": "numeric", "range": [0, 1], "epsilon": 1.0}
    assert problems(numeric, spec, doc) == []
    for wrong in (
        {**THEME_SPEC, "range": [0, 1]},  # a categorical metric has no range
        {**numeric, "domain": ["a", "b"]},  # a numeric one no domain
        {**THEME_SPEC, "longitudinal": {"permanent_epsilon": 3.0}},  # memoized: a budget
        {**THEME_SPEC, "kind": "numeric"},
    ):
        assert problems(wrong, spec, doc), wrong
        assert client.put("/v1/metrics/app.x", json=wrong, headers=ADMIN).status_code == 400
