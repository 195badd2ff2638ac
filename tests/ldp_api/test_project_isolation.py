"""Projects are isolated, fuzzed over every route: project ``alpha`` holds a metric, its
reports, its tokens; every route of the OpenAPI document (and every dashboard page) is
called with every kind of credential of another project (``beta``, the default project,
none), with and without ``?project=alpha``, and no answer holds anything of alpha's and
nothing changes (ldp_api/projects.py, docs/guides/teams.md).

The routes come from the document, as the authorization matrix's do
(tests/ldp_api/test_authorization_matrix.py), so a new route cannot skip this.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from test_authorization_matrix import (
    ADMIN,
    OPEN,
    VALUES,
    Credential,
    closed_app,
    routes,
    snapshot,
)

from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from collector import quotas
from ldp_api.oidc import ROLES
from ldp_api.sessions import SESSION_COOKIE
from ldp_server.app import create_server_app
from ldp_store import lifecycle
from ldp_store.sessions import SessionStore
from ldp_store.tokens import KINDS, SCOPES, TokenStore

SECRET_LABELS = ["alpha-label-one", "alpha-label-two", "alpha-label-three"]
SECRET_TEXT = "alpha-only-description"
TOKEN_NAMES = ("alpha-admin-token-name", "alpha-ingest-key-name")
ALPHA_SPEC = {
    "domain": SECRET_LABELS,
    "epsilon": 1.0,
    "mechanism": "grr",
    "description": SECRET_TEXT,
}
DEFAULT_SPEC = {"domain": ["x", "y"], "epsilon": 2.0, "mechanism": "grr"}
NAME = VALUES["name"]
"""Alpha's metric has the very name every route of the other projects is called with."""

DEFINITIONS = {
    ("get", "/v1/metrics"),
    ("get", "/v1/metrics/{name}"),
    ("get", "/sdk/ldp-telemetry/{name}"),
}
"""Open routes that serve a project's definitions to apps: public, as the default
project's are, to whoever names the project (``?project=``) without a token."""


ASSETS = OPEN - DEFINITIONS
"""The open routes that hold nothing of a project's."""


def state(client: Any) -> dict[bytes, bytes]:
    """Every key's dump but the audit log's and the replay guard's id counts (which a
    collector writes up to 0.1 s after alpha's own appends: ldp_store/guard.py)."""
    return {k: v for k, v in snapshot(client).items() if not k.startswith(b"ldp:guard-ids:")}


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


@dataclass(frozen=True)
class SignedIn(Credential):
    """A dashboard session (OpenID Connect sign-in) with its roles, sent as its cookie."""

    cookie: str = ""

    def headers(self) -> dict[str, str]:
        return {}  # the cookie is the test client's (set_cookie): see the matrix's loop


def signin_app(redis_url: str) -> Flask:
    """The closed app with sign-in on (the provider is never asked: sessions are made
    directly in the store, as a sign-in leaves them)."""
    config = closed_app(redis_url).config  # the same settings
    return create_server_app(
        {
            "REDIS_URL": redis_url,
            "TESTING": True,
            "ADMIN_TOKEN": config["ADMIN_TOKEN"],
            "READ_TOKEN": config["READ_TOKEN"],
            "METRICS_TOKEN": config["METRICS_TOKEN"],
            "REQUIRE_INGEST_KEY": True,
            "OIDC_ISSUER": "https://idp.example",
            "OIDC_CLIENT_ID": "ldp-dashboard",
        }
    )


def outsiders(store: TokenStore) -> list[Credential]:
    """Every kind of token of beta and of the default project, a session with every role
    in them, and none."""
    none: frozenset[str] = frozenset()
    made = [Credential("none", None, none), Credential("garbage", "not-a-token", none)]
    sessions = SessionStore(store.redis)
    for project in ("beta", "default"):
        for role, scopes in ROLES.items():
            cookie, _ = sessions.create(f"{role}@{project}", {project: role}, 3600)
            made.append(SignedIn(f"{project} {role} session", "session", scopes, cookie=cookie))
    for project in ("beta", "default"):
        for scope in SCOPES:
            text, token = store.create(f"only {scope}", {scope}, project)
            made.append(Credential(f"{project} {scope}", text, token.scopes))
        for kind, scopes in KINDS.items():
            text, _ = store.create(kind, scopes, project)
            made.append(Credential(f"{project} {kind}", text, scopes))
            made.append(Credential(f"{project} {kind} as Basic", text, scopes, basic=True))
    return made


def alpha(app: Flask, store: TokenStore) -> tuple[str, str]:
    """Alpha's metric (with reports) and tokens; its admin token's text and prefix."""
    admin, admin_token = store.create(TOKEN_NAMES[0], KINDS["admin"], "alpha")
    ingest, _ = store.create(TOKEN_NAMES[1], KINDS["ingest"], "alpha")
    client = app.test_client()
    assert (
        client.put(f"/v1/metrics/{NAME}", json=ALPHA_SPEC, headers=bearer(admin)).status_code == 201
    )
    got = client.get(f"/v1/metrics/{NAME}", headers=bearer(ingest))
    assert got.status_code == 200 and got.json["name"] == NAME
    definition = MetricDefinition.from_dict(got.json)
    reports = [build_report(definition, SECRET_LABELS[i % 3]) for i in range(12)]
    sent = client.post("/v1/reports", json={"reports": reports}, headers=bearer(ingest))
    assert sent.status_code == 202 and sent.json["accepted"] == 12, sent.json
    return admin, admin_token.prefix


def markers() -> Iterator[bytes]:
    """What only alpha's own answers hold (its tokens' prefixes are no secret: a caller
    who names one in a URL sees it echoed, and its refused try in its own audit log)."""
    yield SECRET_TEXT.encode()
    yield from (label.encode() for label in [*SECRET_LABELS, *TOKEN_NAMES])


def test_no_route_reaches_another_projects_data(redis_db: Any) -> None:
    app = signin_app(redis_db.url)
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha_admin, alpha_prefix = alpha(app, store)
    # The markers mean something: alpha's own token sees them where the others look.
    own = app.test_client()
    for url in (f"/v1/estimates/{NAME}", f"/ui/metric/{NAME}", "/v1/tokens", "/v1/overview"):
        seen = own.get(url, headers=bearer(alpha_admin)).get_data()
        assert any(m in seen for m in markers()), url
    creds = outsiders(store)
    table = list(routes(app))
    before = state(redis_db.client())
    client = app.test_client()
    values = {**VALUES, "prefix": alpha_prefix}
    wrong = []
    calls = 0
    live: set[str] = set()  # credentials let through somewhere (in their own project)
    for method, path, scope in table:
        url = re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)
        # A route of no project's data (health, the document, the dashboard's assets) is
        # asked with two credentials: its answer is slow and the same for all.
        for cred in creds if (method, path) not in ASSETS else creds[:2]:
            if isinstance(cred, SignedIn):
                client.set_cookie(SESSION_COOKIE, cred.cookie)
            else:
                client.delete_cookie(SESSION_COOKIE)
            for suffix in ("", "?project=alpha"):
                body = {} if method in ("post", "put") else None
                got = client.open(
                    url + suffix, method=method.upper(), json=body, headers=cred.headers()
                )
                calls += 1
                if scope is not None and got.status_code < 300:
                    live.add(cred.name)
                where = f"{method.upper()} {path}{suffix} [{scope}] {cred.name}: {got.status_code}"
                if got.status_code >= 500:
                    wrong.append(f"{where} (a 5xx)")
                # no token (or none valid), or a session: no project of its own there
                anonymous = not cred.scopes or isinstance(cred, SignedIn)
                public = anonymous and suffix and (method, path) in DEFINITIONS
                if public:
                    continue
                leaked = [m for m in markers() if m in got.get_data()]
                if leaked:
                    wrong.append(f"{where} shows {leaked}")
                # (a 303 is the dashboard sending a session without the role to sign-in)
                if suffix and cred.name.startswith("beta") and got.status_code < 300:
                    wrong.append(f"{where}: a beta token let into alpha")
    assert not wrong, "\n".join(wrong)
    # The sessions were live: the default project's let through in it, beta's in beta.
    assert {c.name for c in creds if isinstance(c, SignedIn) and "default" in c.name} <= live
    for cred in creds:
        if isinstance(cred, SignedIn) and cred.name.startswith("beta"):
            client.set_cookie(SESSION_COOKIE, cred.cookie)
            assert client.get("/v1/overview?project=beta").status_code == 200, cred.name
    assert state(redis_db.client()) == before  # no change anywhere
    print(f"isolation matrix: {len(table)} routes x {len(creds)} credentials x 2 = {calls} calls")
    assert {(m, p) for m, p, s in table if s is None} == OPEN


def test_same_name_in_two_projects_are_two_metrics(redis_db: Any) -> None:
    """Names are unique within a project: default's ``app.none`` and alpha's are two
    metrics, each fed by its own ingest key, and the default project is as before (the
    keys have no project in them)."""
    app = closed_app(redis_db.url)
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha(app, store)
    client = app.test_client()
    assert (
        client.put(f"/v1/metrics/{NAME}", json=DEFAULT_SPEC, headers=bearer(ADMIN)).status_code
        == 201
    )
    key, _ = store.create("default app", KINDS["ingest"])
    definition = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}").json)
    assert definition.domain == ("x", "y")
    sent = client.post(
        "/v1/reports", json={"reports": [build_report(definition, "x")]}, headers=bearer(key)
    )
    assert sent.status_code == 202 and sent.json["accepted"] == 1
    r = redis_db.client()
    assert r.xlen(f"ldp:{{m:{NAME}:1:0}}:reports") == 1  # today's key, unchanged
    assert r.xlen(f"ldp:{{m:alpha/{NAME}:1:0}}:reports") == 1  # alpha's (one batch entry)
    names = client.get("/v1/metrics", headers=bearer(ADMIN)).json["metrics"]
    assert [(m["name"], m["domain"]) for m in names] == [(NAME, ["x", "y"])]
    listed = client.get("/v1/metrics?project=alpha", headers=bearer(ADMIN)).json["metrics"]
    assert [(m["name"], m["domain"]) for m in listed] == [(NAME, SECRET_LABELS)]
    # A worker counts each project's reports into its own metric; reads stay apart.
    Worker(r, handle_signals=False, block_ms=10).run(once=True)
    alpha_reader, _ = store.create("alpha reader", KINDS["read"], "alpha")
    mine = client.get(f"/v1/estimates/{NAME}", headers=bearer(alpha_reader)).json
    theirs = client.get(f"/v1/estimates/{NAME}", headers=bearer(ADMIN)).json
    assert (mine["n"], [e["value"] for e in mine["estimates"]]) == (12, SECRET_LABELS)
    assert (theirs["n"], [e["value"] for e in theirs["estimates"]]) == (1, ["x", "y"])
    # /metrics is the deployment's (the platform team's): every project's pipeline.
    scrape = client.get("/metrics", headers=bearer(ADMIN)).get_data(as_text=True)
    counted = re.findall(r'^ldp_reports_counted\{metric="([^"]+)"\} (\S+)$', scrape, re.M)
    assert sorted(counted) == [(f"alpha/{NAME}", "12.0"), (NAME, "1.0")]
    # A report naming alpha's stored name from the default project reaches nothing.
    forged = {**build_report(definition, "x"), "metric": f"alpha/{NAME}"}
    sent = client.post("/v1/reports", json={"reports": [forged]}, headers=bearer(key))
    assert sent.status_code == 400
    Worker(r, handle_signals=False, block_ms=10).run(once=True)
    assert client.get(f"/v1/estimates/{NAME}", headers=bearer(alpha_reader)).json["n"] == 12


@pytest.mark.parametrize("bad", ["Alpha", "a/b", "", "x" * 41, "a.b"])
def test_a_bad_project_is_a_400(redis_db: Any, bad: str) -> None:
    app = closed_app(redis_db.url)
    got = app.test_client().get(f"/v1/metrics?project={bad}")
    assert got.status_code == 400 and "project" in got.json["details"][0]


def test_quotas_refuse_one_project_and_not_another(redis_db: Any) -> None:
    app = closed_app(redis_db.url)
    limits = quotas.parse_quotas(
        {"alpha": {"metrics": 1, "reports_per_minute": 12}, "beta": {"metrics": 5}}
    )
    quotas.QUOTAS.attach(app, quotas.ProjectQuotas(limits))
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha_admin, _ = alpha(app, store)  # its one metric, and 12 reports: the minute's quota
    client = app.test_client()
    second = client.put("/v1/metrics/app.two", json=DEFAULT_SPEC, headers=bearer(alpha_admin))
    assert (
        second.status_code == 409
        and "alpha" in second.json["error"]
        and "quota" in second.json["error"]
    )
    ingest, _ = store.create("alpha app", KINDS["ingest"], "alpha")
    definition = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}?project=alpha").json)
    one = {"reports": [build_report(definition, SECRET_LABELS[0])]}
    refused = client.post("/v1/reports", json=one, headers=bearer(ingest))
    assert refused.status_code == 429 and "quota of 12 reports a minute" in refused.json["error"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # beta, meanwhile: its own metrics and reports as if alpha were idle.
    beta_admin, _ = store.create("beta admin", KINDS["admin"], "beta")
    beta_ingest, _ = store.create("beta app", KINDS["ingest"], "beta")
    for name in ("app.two", NAME):
        assert (
            client.put(
                f"/v1/metrics/{name}", json=DEFAULT_SPEC, headers=bearer(beta_admin)
            ).status_code
            == 201
        )
    beta_def = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}?project=beta").json)
    many = {"reports": [build_report(beta_def, "y") for _ in range(50)]}
    assert client.post("/v1/reports", json=many, headers=bearer(beta_ingest)).status_code == 202
    # Deleting alpha's metric frees its place, and every key of it goes.
    assert client.post(f"/v1/metrics/{NAME}/retire", headers=bearer(alpha_admin)).status_code == 200
    assert client.delete(f"/v1/metrics/{NAME}", headers=bearer(alpha_admin)).status_code == 200
    assert not redis_db.client().keys("ldp:{m:alpha/*")
    again = client.put("/v1/metrics/app.two", json=DEFAULT_SPEC, headers=bearer(alpha_admin))
    assert again.status_code == 201
    # The default project has no quota here: unchanged.
    assert (
        client.put("/v1/metrics/app.two", json=DEFAULT_SPEC, headers=bearer(ADMIN)).status_code
        == 201
    )


def test_memory_quota_refuses_only_its_project(redis_db: Any) -> None:
    app = closed_app(redis_db.url)
    quotas.QUOTAS.attach(app, quotas.ProjectQuotas({"alpha": quotas.Quota(memory_bytes=4096)}))
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha(app, store)  # measured before its first reports: within the quota then
    client = app.test_client()
    ingest, _ = store.create("alpha app", KINDS["ingest"], "alpha")
    definition = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}?project=alpha").json)
    big = {"reports": [build_report(definition, SECRET_LABELS[1]) for _ in range(200)]}
    quota = quotas.QUOTAS.get(app)
    quota._memory.clear()  # measure now, not MEMORY_TTL later
    refused = client.post("/v1/reports", json=big, headers=bearer(ingest))
    used = quota.memory_of(redis_db.client(), "alpha")
    assert used > 4096
    assert refused.status_code == 429 and "MiB of Redis" in refused.json["error"], refused.json
    beta_admin, _ = store.create("beta admin", KINDS["admin"], "beta")
    beta_ingest, _ = store.create("beta app", KINDS["ingest"], "beta")
    assert (
        client.put(f"/v1/metrics/{NAME}", json=DEFAULT_SPEC, headers=bearer(beta_admin)).status_code
        == 201
    )
    beta_def = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}?project=beta").json)
    batch = {"reports": [build_report(beta_def, "x") for _ in range(200)]}
    assert client.post("/v1/reports", json=batch, headers=bearer(beta_ingest)).status_code == 202
    # Each project weighs its own keys only; the default project's are those without '/'.
    assert (
        client.put(f"/v1/metrics/{NAME}", json=DEFAULT_SPEC, headers=bearer(ADMIN)).status_code
        == 201
    )
    r = redis_db.client()
    mine, beta, default = (lifecycle.project_keys(r, p) for p in ("alpha", "beta", "default"))
    assert mine and all(k.startswith((b"ldp:{m:alpha/", b"ldp:metric:{alpha/")) for k in mine)
    assert beta and not set(beta) & set(mine)
    assert b"ldp:metric:{app.none}" in default and not set(default) & (set(mine) | set(beta))


def test_the_dashboard_links_stay_in_the_project(redis_db: Any) -> None:
    """Pages made for a project link to its metrics by their plain names, and keep the
    ``?project=`` a configured token browsed with."""
    app = closed_app(redis_db.url)
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha_admin, _ = alpha(app, store)
    client = app.test_client()
    mine = client.get("/", headers=bearer(alpha_admin)).get_data(as_text=True)
    assert f'href="/ui/metric/{NAME}"' in mine and "alpha/" not in mine
    page = client.get(f"/ui/metric/{NAME}", headers=bearer(alpha_admin)).get_data(as_text=True)
    assert f"/v1/estimates/{NAME}" in page and "alpha/" not in page
    browsed = client.get("/?project=alpha", headers=bearer(ADMIN)).get_data(as_text=True)
    assert f'href="/ui/metric/{NAME}?project=alpha"' in browsed
    # The SDK module's files are no metric: served in every project alike.
    module = client.get("/sdk/ldp-telemetry/index.js")
    assert module.status_code == 200
    ingest, _ = store.create("alpha app", KINDS["ingest"], "alpha")
    again = client.get("/sdk/ldp-telemetry/index.js", headers=bearer(ingest))
    assert (again.status_code, again.get_data()) == (200, module.get_data())
    page = client.get(f"/ui/metric/{NAME}?project=alpha", headers=bearer(ADMIN))
    assert page.status_code == 200 and SECRET_TEXT in page.get_data(as_text=True)
    assert "project=alpha" in re.search(r'"estimates": "([^"]+)"', page.get_data(as_text=True))[1]


def test_ingest_keys_can_be_required_for_one_project(redis_db: Any) -> None:
    """``LDP_INGEST_KEY_PROJECTS=alpha``: alpha's reports need one of its ingest keys,
    while the default project's (and beta's) stay open, as without the setting."""
    app = create_server_app(
        {
            "REDIS_URL": redis_db.url,
            "TESTING": True,
            "ADMIN_TOKEN": ADMIN,
            "INGEST_KEY_PROJECTS": "alpha",
        }
    )
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha(app, store)  # its reports, sent with its key: accepted
    client = app.test_client()
    definition = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}?project=alpha").json)
    one = {"reports": [build_report(definition, SECRET_LABELS[0])]}
    keyless = client.post("/v1/reports?project=alpha", json=one)
    assert keyless.status_code == 401 and keyless.json["error"] == "an ingest key is required"
    reader, _ = store.create("alpha reader", KINDS["read"], "alpha")
    assert client.post("/v1/reports", json=one, headers=bearer(reader)).status_code == 401
    beta_key, _ = store.create("beta app", KINDS["ingest"], "beta")
    crossed = client.post("/v1/reports?project=alpha", json=one, headers=bearer(beta_key))
    assert crossed.status_code == 403
    made = client.put(f"/v1/metrics/{NAME}", json=DEFAULT_SPEC, headers=bearer(ADMIN))
    assert made.status_code == 201
    plain = MetricDefinition.from_dict(client.get(f"/v1/metrics/{NAME}").json)
    sent = client.post("/v1/reports", json={"reports": [build_report(plain, "x")]})
    assert sent.status_code == 202  # the default project: open, as before


def test_a_session_acts_in_the_project_it_names_with_its_role_there(redis_db: Any) -> None:
    """Signed in with a role in alpha only: alpha's pages with ``?project=alpha``, the
    default project's refused (sent to sign in), as each project's role says."""
    app = signin_app(redis_db.url)
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    alpha(app, store)
    cookie, _ = SessionStore(store.redis).create("alice", {"alpha": "viewer"}, 3600)
    client = app.test_client()
    client.set_cookie(SESSION_COOKIE, cookie)
    headers: dict[str, str] = {}
    mine = client.get(f"/ui/metric/{NAME}?project=alpha", headers=headers)
    assert mine.status_code == 200 and SECRET_TEXT in mine.get_data(as_text=True)
    estimates = client.get(f"/v1/estimates/{NAME}?project=alpha", headers=headers)
    assert estimates.status_code == 200 and estimates.json["n"] == 0
    assert client.get(f"/ui/metric/{NAME}", headers=headers).status_code == 403  # no role
    assert client.get(f"/v1/estimates/{NAME}", headers=headers).status_code in (401, 403)
