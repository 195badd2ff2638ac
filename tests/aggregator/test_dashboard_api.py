"""The dashboard's server side without a browser: read-token protection, the planning
API against :mod:`aggregator.stats.planning`, the overview API, and the offline plotly.js.

On a real Redis (the session's, emptied per test), through Flask's test client.
"""

from __future__ import annotations

import base64
import gzip
import math
import random
import time
from typing import Any

import numpy as np
import pytest
from flask import Flask
from flask.testing import FlaskClient

from aggregator import Counts, estimate_from_counts
from aggregator.stats.intervals import z_value
from aggregator.stats.planning import plan
from aggregator.stats.shuffling import amplification
from aggregator.stream.worker import Worker
from aggregator.web import dashboard
from aggregator.web.status import describe
from client_sdk import mechanisms
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_store import keys

ADMIN_TOKEN = "admin-token-5510"
READ_TOKEN = "read-token-22910"
THEME = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}

PAGES = ["/", "/ui/metric/app.theme", "/ui/metric/app.theme/explorer", "/ui/explorer?k=8"]
APIS = [
    "/v1/estimates/app.theme",
    "/v1/estimates/app.theme?format=csv",
    "/v1/estimates/app.theme/trend",
    "/v1/export",
    "/v1/export/app.theme",
    "/v1/overview",
    "/v1/plan?epsilon=1&k=3&users=1000",
    "/v1/plan/curve?epsilon=1&k=3",
]
OPEN = ["/v1/metrics", "/v1/metrics/app.theme", "/healthz", "/ui/static/dashboard.css"]


def make(redis_url: str, **config: Any) -> Flask:
    """The app ``ldp serve`` runs, on the test's Redis."""
    return create_server_app(
        {"REDIS_URL": redis_url, "ADMIN_TOKEN": ADMIN_TOKEN, "TESTING": True, **config}
    )


def basic(password: str, user: str = "operator") -> dict[str, str]:
    """An HTTP Basic header, as a browser sends it."""
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def bearer(token: str) -> dict[str, str]:
    """A bearer header, as API clients send it."""
    return {"Authorization": f"Bearer {token}"}


def define(client: FlaskClient, name: str = "app.theme", spec: Any = None) -> MetricDefinition:
    """Create a metric with the admin token."""
    response = client.put(f"/v1/metrics/{name}", json=spec or THEME, headers=bearer(ADMIN_TOKEN))
    assert response.status_code in (200, 201), response.json
    return MetricDefinition.from_dict(response.json)


@pytest.fixture
def guarded(redis_db: Any) -> FlaskClient:
    """The app with a read token, and app.theme defined."""
    client = make(redis_db.url, READ_TOKEN=READ_TOKEN).test_client()
    define(client)
    return client


# -- read token ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_pages_ask_for_the_read_token_as_a_basic_password(guarded: FlaskClient, path: str) -> None:
    refused = guarded.get(path)
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"].startswith('Basic realm="ldp-telemetry"')
    assert refused.mimetype == "text/html" and "Read token required" in refused.text
    assert guarded.get(path, headers=basic("wrong")).status_code == 401
    assert guarded.get(path, headers=basic(READ_TOKEN)).status_code == 200
    assert guarded.get(path, headers=basic(READ_TOKEN, user="")).status_code == 200
    assert guarded.get(path, headers=bearer(READ_TOKEN)).status_code == 200


@pytest.mark.parametrize("path", APIS)
def test_read_apis_want_a_bearer_token(guarded: FlaskClient, path: str) -> None:
    refused = guarded.get(path)
    assert refused.status_code == 401
    assert refused.json == {
        "error": "a read token is required",
        "details": ["send 'Authorization: Bearer <LDP_READ_TOKEN>'"],
    }
    challenges = refused.headers.getlist("WWW-Authenticate")
    assert challenges[0] == 'Bearer realm="ldp-telemetry"'
    wrong = guarded.get(path, headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401 and wrong.json["error"] == "the read token is not valid"
    assert challenges[1].startswith('Basic realm="ldp-telemetry"')  # a page's fetch retries
    for headers in (
        bearer("wrong"),
        bearer(READ_TOKEN + "x"),
        basic("wrong"),
        {"Authorization": "Basic !!"},
    ):
        assert guarded.get(path, headers=headers).status_code == 401
    for headers in (bearer(READ_TOKEN), basic(READ_TOKEN), bearer(ADMIN_TOKEN)):
        assert guarded.get(path, headers=headers).status_code == 200, headers


@pytest.mark.parametrize("path", [*OPEN, "/ui/vendor/plotly.min.js"])
def test_what_apps_and_browsers_need_stays_open(guarded: FlaskClient, path: str) -> None:
    assert guarded.get(path).status_code == 200


def test_reports_stay_open_and_changes_still_need_the_admin_token(guarded: FlaskClient) -> None:
    definition = MetricDefinition.from_dict(guarded.get("/v1/metrics/app.theme").json)
    body = {"reports": [build_report(definition, "dark", random.Random(1))]}
    assert guarded.post("/v1/reports", json=body).status_code == 202
    change = {**THEME, "epsilon": 2.0}
    for headers in ({}, bearer(READ_TOKEN), basic(READ_TOKEN)):
        response = guarded.put("/v1/metrics/app.theme", json=change, headers=headers)
        assert response.status_code in (401, 403)
    assert guarded.get("/v1/metrics/app.theme").json["version"] == 1


def test_without_a_read_token_everything_reads_openly(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    define(client)
    for path in PAGES + APIS:
        assert client.get(path).status_code == 200, path


def test_a_numeric_read_token_from_the_environment_works(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSON-looking (an int to from_prefixed_env): read as the text it is.
    monkeypatch.setenv("LDP_READ_TOKEN", "1234567890123456")
    monkeypatch.setenv("LDP_REDIS_URL", redis_db.url)
    app = create_server_app()
    assert app.config["READ_TOKEN"] == "1234567890123456"
    client = app.test_client()
    assert client.get("/v1/overview").status_code == 401
    assert client.get("/v1/overview", headers=bearer("1234567890123456")).status_code == 200


# -- planning API -------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "k"), [(1.0, 3), (0.5, 32), (4.0, 1024)])
def test_plan_api_answers_what_the_planner_computes(redis_db: Any, epsilon: float, k: int) -> None:
    client = make(redis_db.url).test_client()
    body = client.get(f"/v1/plan?epsilon={epsilon}&k={k}&users=12345").json
    rows = plan(epsilon, k, users=12345)
    assert [r["mechanism"] for r in body["rows"]] == [r.name for r in rows]
    assert [r["half_width"] for r in body["rows"]] == [r.half_width for r in rows]
    assert body["auto"] == mechanisms.choose(epsilon, k).mechanism.name
    need = client.get(f"/v1/plan?epsilon={epsilon}&k={k}&width=0.01").json
    assert [r["users"] for r in need["rows"]] == [r.users for r in plan(epsilon, k, width=0.01)]


@pytest.mark.parametrize(("query", "beta"), [("", 0.01), ("&fake_fraction=0.05", 0.05)])
def test_plan_api_gives_each_mechanisms_robustness(redis_db: Any, query: str, beta: float) -> None:
    """The fourth axis: the maximal gain attack's shift of one value, β(1 − q*)/(p* − q*)."""
    client = make(redis_db.url).test_client()
    body = client.get(f"/v1/plan?epsilon=1&k=64&users=1000{query}").json
    assert body["fake_fraction"] == beta
    gains = {r["mechanism"]: r["max_gain"] for r in body["rows"]}
    for name in ("grr", "oue", "olh", "hr"):
        m = mechanisms.create(name, epsilon=1.0, domain_size=64)
        assert gains[name] == pytest.approx(beta * (1 - m.q) / (m.p - m.q), rel=1e-12)
    assert gains["grr"] == pytest.approx(beta * (1 + 63 / (math.e - 1)), rel=1e-9)
    assert gains["central laplace"] == beta  # a fake raw value is one more user
    need = client.get(f"/v1/plan?epsilon=1&k=64&width=0.01{query}").json
    assert {r["mechanism"]: r["max_gain"] for r in need["rows"]} == gains


def test_curve_api_is_the_mechanisms_variance_on_a_log_grid(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    body = client.get("/v1/plan/curve?epsilon=2&k=16&mechanism=blh&points=31").json
    n = np.array(body["n"])
    assert len(n) == 31 and n[0] == pytest.approx(100) and n[-1] == pytest.approx(1e8)
    z = z_value(0.95)
    curves = {c["mechanism"]: c for c in body["curves"]}
    assert set(curves) == {"grr", "sue", "oue", "olh", "hr", "ss", "blh", "central laplace"}
    for name in ("grr", "oue", "blh"):
        m = mechanisms.create(name, epsilon=2.0, domain_size=16)
        np.testing.assert_allclose(curves[name]["half_width"], z * np.sqrt(m.variance(n)))
    assert curves["blh"]["current"] and not curves["oue"]["current"]
    np.testing.assert_allclose(
        curves["central laplace"]["half_width"], z * math.sqrt(2) / (n * 2.0)
    )
    # The curve at N and the planner at N agree.
    at = client.get("/v1/plan?epsilon=2&k=16&users=100").json
    for row in at["rows"]:
        assert curves[row["mechanism"]]["half_width"][0] == pytest.approx(row["half_width"])


@pytest.mark.parametrize(
    "query",
    [
        "epsilon=1&k=3",  # neither users nor width
        "epsilon=1&k=3&users=10&width=0.1",
        "k=3&users=10",
        "epsilon=0&k=3&users=10",
        "epsilon=nan&k=3&users=10",
        "epsilon=1&k=1&users=10",
        "epsilon=1&k=2.5&users=10",
        "epsilon=1&k=3&users=0",
        "epsilon=1&k=3&width=1",
        "epsilon=1&k=3&users=10&confidence=1",
        "epsilon=1&k=3&users=10&fake_fraction=0",
        "epsilon=1&k=3&users=10&fake_fraction=1",
        "epsilon=1&k=3&users=10&fake_fraction=x",
    ],
)
def test_plan_api_rejects_bad_parameters_with_json(redis_db: Any, query: str) -> None:
    response = make(redis_db.url).test_client().get(f"/v1/plan?{query}")
    assert response.status_code == 400 and response.json["error"]


@pytest.mark.parametrize(
    "query",
    ["epsilon=1&k=3&points=1", "epsilon=1&k=3&n_min=10&n_max=5", "epsilon=1&k=3&mechanism=x"],
)
def test_curve_api_rejects_bad_parameters_with_json(redis_db: Any, query: str) -> None:
    response = make(redis_db.url).test_client().get(f"/v1/plan/curve?{query}")
    assert response.status_code == 400 and response.json["error"]


# -- overview API and pages ---------------------------------------------------------------


def test_overview_has_n_last_window_and_lag(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    definition = define(client)
    rng = random.Random(3)
    body = {"reports": [build_report(definition, rng.randrange(3), rng) for _ in range(40)]}
    assert client.post("/v1/reports", json=body).status_code == 202
    (row,) = client.get("/v1/overview").json["metrics"]
    assert (row["name"], row["version"], row["mechanism"], row["epsilon"], row["k"]) == (
        "app.theme", 1, "grr", 1.0, 3,
    )  # fmt: skip
    assert row["n"] == 0 and row["last_window"] is None
    assert row["lag"]["length"] == 40
    Worker(redis_db.client(), handle_signals=False).run(once=True)
    (row,) = client.get("/v1/overview").json["metrics"]
    assert row["n"] == 40 and row["lag"] == {"length": 0, "pending": 0}
    assert row["last_window"].startswith("hour:")
    page = client.get("/").text
    assert "app.theme" in page and ">40<" in page


def test_describe_shows_budget_and_memoization_when_a_definition_has_them() -> None:
    base = {
        "name": "app.theme",
        "version": 2,
        "kind": "categorical",
        "domain": ["a", "b"],
        "mechanism": {"mechanism": "grr", "epsilon": 0.5, "domain_size": 2},
    }
    plain = describe(MetricDefinition.from_dict(base))
    assert plain["epsilon_per_period"] is None and plain["budget"] is None
    memoized = {"mechanism": "memo-grr", "epsilon": 0.5, "domain_size": 2, "permanent_epsilon": 3.0}
    rich = describe(
        MetricDefinition.from_dict(
            {**base, "budget": {"reports_per_period": 4, "period": "day"}, "mechanism": memoized}
        )
    )
    assert rich["epsilon_per_period"] == 2.0 and rich["period"] == "day"
    assert rich["permanent_epsilon"] == 3.0 and rich["longitudinal"]
    numeric = describe(
        MetricDefinition.from_dict(
            {
                "name": "session.minutes",
                "version": 1,
                "kind": "numeric",
                "range": [0.0, 120.0],
                "mechanism": {"mechanism": "duchi", "epsilon": 1.0},
            }
        )
    )
    assert numeric["kind"] == "numeric" and numeric["k"] is None
    assert numeric["range"] == [0.0, 120.0]


def test_pages_are_html_with_a_strict_content_security_policy(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    define(client)
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 200 and response.mimetype == "text/html"
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "<script>" not in response.text  # no inline code: CSP would refuse it
    missing = client.get("/ui/metric/nope")
    assert missing.status_code == 404 and "No metric nope" in missing.text


def test_plotly_is_served_from_the_installed_wheel(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    path = dashboard.plotly_js_path()
    assert path is not None, "the plotly wheel is part of the server extra"
    plain = client.get("/ui/vendor/plotly.min.js")
    assert plain.data == path.read_bytes() and plain.mimetype == "text/javascript"
    assert plain.data.startswith(b"/**\n* plotly.js v")
    zipped = client.get("/ui/vendor/plotly.min.js", headers={"Accept-Encoding": "gzip, br"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.data) == plain.data
    again = client.get(
        "/ui/vendor/plotly.min.js",
        headers={"Accept-Encoding": "gzip", "If-None-Match": zipped.headers["ETag"]},
    )
    assert again.status_code == 304


MEMO = {
    "domain": ["a", "b", "c", "d"],
    "epsilon": 1.0,
    "longitudinal": {"permanent_epsilon": 3.0},
    "budget": {"reports_per_period": 4, "period": "day"},
}


def test_a_memoized_metric_needs_a_budget(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    spec = {k: v for k, v in MEMO.items() if k != "budget"}
    response = client.put("/v1/metrics/app.memo", json=spec, headers=bearer(ADMIN_TOKEN))
    assert response.status_code == 400
    assert "needs a budget" in " ".join([response.json["error"], *response.json["details"]])


def counted_memo(redis_db: Any, seed: int) -> tuple[FlaskClient, MetricDefinition]:
    """The memoized metric ``app.memo`` defined, with 400 reports posted and counted."""
    client = make(redis_db.url).test_client()
    d = define(client, "app.memo", MEMO)
    rng = random.Random(seed)
    reports = [build_report(d, rng.choice(d.domain), rng, secret=bytes(32)) for _ in range(400)]
    assert client.post("/v1/reports", json={"reports": reports}).status_code == 202
    Worker(redis_db.client(), name="w", handle_signals=False).run(once=True)
    return client, d


def test_memoized_estimates_assume_the_budgets_reports_per_device(redis_db: Any) -> None:
    client, d = counted_memo(redis_db, 3)
    body = client.get("/v1/estimates/app.memo").json
    # Created today: today plus one day for clock skew, 4 reports a day.
    assert body["reports_per_device"] == 8 and "4 per day" in body["reports_per_device_note"]
    counts = Counts(body["n"], np.array([r["support_count"] for r in body["estimates"]]))
    assumed = estimate_from_counts(d.oracle, counts, reports_per_device=8)
    naive = estimate_from_counts(d.oracle, counts)
    low = [r["ci_low"] for r in body["estimates"]]
    np.testing.assert_allclose(low, assumed.ci_low)
    assert np.all(assumed.ci_low < naive.ci_low)  # wider than one report per device
    csv_head = client.get("/v1/estimates/app.memo?format=csv").text.splitlines()[0]
    assert "reports_per_device" in csv_head and "p_value" in csv_head
    trend = client.get("/v1/estimates/app.memo/trend?granularity=day&format=json").json
    assert trend["windows"][0]["reports_per_device"] == 8
    plain = define(client)
    assert client.get(f"/v1/estimates/{plain.name}").json["reports_per_device"] == 1
    # Review finding of issue 12: this server's clock behind Redis's (or set back) must not
    # shrink the bound. Reports that arrived in an hour three days ahead of this clock:
    ahead = (int(time.time()) // 3600 + 72) * 3600
    hour = "hour:" + time.strftime("%Y-%m-%dT%H", time.gmtime(ahead))
    redis_db.client().zadd(keys.windows_key(d.name, d.version), {hour: ahead})
    body = client.get("/v1/estimates/app.memo").json
    assert body["reports_per_device"] == 4 * (3 + 2)  # 3 more days, 4 a day


def test_estimates_state_the_shuffled_epsilon_with_its_condition(redis_db: Any) -> None:
    """Viewers of the estimates see a shuffled view: ε_c of the n reports, composed over
    the memoized metric's 8 reports per device, with the condition it rests on."""
    client, d = counted_memo(redis_db, 4)
    shuffled = client.get("/v1/estimates/app.memo").json["shuffled_epsilon"]
    assert shuffled["reports_per_device"] == 8 and shuffled["devices"] == 50  # ⌈400/8⌉
    expected = amplification(d.mechanism.epsilon, 400, 8)
    assert shuffled["epsilon"] == pytest.approx(expected.epsilon, abs=1e-4)
    assert shuffled["epsilon"] >= expected.epsilon  # rounded up, never down
    assert shuffled["delta"] == pytest.approx(1 / 50**2)
    assert "Redis" in shuffled["condition"] and "at most 8" in shuffled["condition"]
    plain = define(client)
    assert client.get(f"/v1/estimates/{plain.name}").json["shuffled_epsilon"] is None  # n = 0


def test_the_shuffled_epsilon_composes_a_fresh_noise_metrics_budget_too(redis_db: Any) -> None:
    """Each fresh-noise report still reveals up to ε: with a budget of 3 a day, the bound
    composes 3·(1 + 1 skew day)=6 reports per device, like a memoized metric's; without a
    budget the condition says nothing enforces one report per device."""
    client = make(redis_db.url).test_client()
    spec = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}
    budgeted = define(
        client, "app.budgeted", {**spec, "budget": {"reports_per_period": 3, "period": "day"}}
    )
    free = define(client, "app.free", spec)
    rng = random.Random(5)
    for d in (budgeted, free):
        reports = [build_report(d, rng.choice(d.domain), rng) for _ in range(300)]
        assert client.post("/v1/reports", json={"reports": reports}).status_code == 202
    Worker(redis_db.client(), name="w", handle_signals=False).run(once=True)
    body = client.get("/v1/estimates/app.budgeted").json
    assert body["reports_per_device"] == 1  # the intervals: independent reports
    shuffled = body["shuffled_epsilon"]
    assert shuffled["reports_per_device"] == 6 and shuffled["devices"] == 50
    assert "no budget" not in shuffled["condition"]
    loose = client.get("/v1/estimates/app.free").json["shuffled_epsilon"]
    assert loose["reports_per_device"] == 1 and "no budget" in loose["condition"]


def test_overview_says_report_or_reports_per_period(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    for name, per_period in (("app.once", 1), ("app.thrice", 3)):
        budget = {"reports_per_period": per_period, "period": "day"}
        define(client, name, {"domain": ["a", "b"], "epsilon": 1.0, "budget": budget})
    page = " ".join(client.get("/").text.split())
    assert "1 report × ε" in page and "3 reports × ε" in page and "1 reports" not in page


def test_estimates_say_whose_share_and_give_the_population_share_on_request(
    redis_db: Any,
) -> None:
    """Issue 28 (3b): the intervals are for the devices that reported; the answer names its
    estimand, and ?estimand=population adds the sampling variance, as the Python API does."""
    client = make(redis_db.url).test_client()
    d = define(
        client, "app.coin", {"domain": ["heads", "tails"], "epsilon": 4.0, "mechanism": "grr"}
    )
    rng = random.Random(28)
    for _ in range(4):  # 2,000 reports, in requests the collector accepts
        reports = [build_report(d, rng.choice(d.domain), rng) for _ in range(500)]
        assert client.post("/v1/reports", json={"reports": reports}).status_code == 202
    Worker(redis_db.client(), name="w", handle_signals=False).run(once=True)
    plain = client.get("/v1/estimates/app.coin").json
    assert plain["estimand"] == "reporters"
    assert "devices that reported" in plain["intervals_note"]
    wide = client.get("/v1/estimates/app.coin?estimand=population").json
    assert wide["estimand"] == "population" and "population" in wide["intervals_note"]
    counts = Counts(wide["n"], np.array([r["support_count"] for r in wide["estimates"]]))
    expected = estimate_from_counts(d.oracle, counts, estimand="population")
    np.testing.assert_allclose([r["ci_low"] for r in wide["estimates"]], expected.ci_low)
    np.testing.assert_allclose([r["std_error"] for r in wide["estimates"]], expected.std_errors)
    for mine, theirs in zip(wide["estimates"], plain["estimates"], strict=True):
        assert mine["ci_high"] - mine["ci_low"] > theirs["ci_high"] - theirs["ci_low"]
        assert mine["cs_low"] == theirs["cs_low"]  # the sequence already is the population's
    both = client.get("/v1/estimates/app.coin?estimand=population&simultaneous=true").json
    assert both["estimand"] == "population" and both["simultaneous"] is True
    csv = client.get("/v1/estimates/app.coin?estimand=population&format=csv").text.splitlines()
    assert ",interval,estimand," in csv[0] and ",population," in csv[1]
    trend = client.get("/v1/estimates/app.coin/trend?estimand=population").json
    assert trend["estimand"] == "population"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/estimates/app.theme?estimand=everyone",
        "/v1/estimates/app.theme?estimand=",
        "/v1/estimates/app.theme?estimand=Population&format=csv",
        "/v1/estimates/app.theme/trend?estimand=devices",
    ],
)
def test_a_bad_estimand_is_a_400_that_names_the_choices(redis_db: Any, path: str) -> None:
    client = make(redis_db.url).test_client()
    define(client)
    response = client.get(path)
    assert response.status_code == 400
    assert "estimand must be reporters or population" in response.json["error"]
