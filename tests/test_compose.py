"""The deployment files cannot rot: docker-compose.yml and the Dockerfile, checked by structure.

No Docker engine runs here, so these tests read the files: the services exist, every
long-running service has a healthcheck and waits for healthy dependencies, Redis keeps
what it accepted (AOF, ``noeviction``), the environment uses only documented variables,
the ``load`` profile holds only Locust, and scalable services publish no fixed host port.
The nginx in front of the collectors is checked by its config's structure here (timeouts,
limits, no client address in logs or headers) and run for real in test_nginx_proxy.py.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from client_sdk.ohttp.keys import SEALING_OVERHEAD
from collector.settings import MAX_BODY_BYTES

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {
    "redis",
    "collector",
    "proxy",
    "aggregator",
    "dashboard",
    "exporter",
    "locust-master",
    "locust-worker",
    "relay",
}
SCALABLE = {"collector", "aggregator", "locust-worker"}
"""Services run as several replicas (``--scale``): no container_name, no fixed host port."""
NOT_REDIS_CLIENTS = {"redis", "proxy", "relay", "prometheus", "grafana"}
"""Services that neither talk to Redis nor wait for it (the proxy waits for collectors, the
Oblivious HTTP relay for the proxy, Prometheus for the services it scrapes, Grafana for
Prometheus)."""
NGINX_CONF = ROOT / "deploy" / "nginx.conf"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _documented(path: Path) -> set[str]:
    """Variable names in the first column of the markdown tables of ``path``."""
    names: set[str] = set()
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("|"):
            first = line.strip().strip("|").split("|")[0]
            names.update(re.findall(r"`+([A-Z][A-Z0-9_]+)`+", first))
    return names


def _is_locust(name: str) -> bool:
    return name.startswith("locust")


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return " ".join(command) if isinstance(command, list) else str(command)


def test_services_present(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) >= REQUIRED


def test_healthchecks_except_locust(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        if _is_locust(name):
            continue
        check = service.get("healthcheck")
        assert check and check.get("test"), f"{name} has no healthcheck"
        assert not check.get("disable"), name
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    for web in ("collector", "dashboard"):
        test = " ".join(services[web]["healthcheck"]["test"])
        assert "/readyz" in test, web


def test_depends_on_healthy(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on needs the long form"
        for dep, spec in depends.items():
            assert dep in services, f"{name} depends on unknown {dep}"
            if "healthcheck" in services[dep]:
                assert spec.get("condition") == "service_healthy", f"{name} → {dep}"
        if name not in NOT_REDIS_CLIENTS and not _is_locust(name):
            assert depends.get("redis", {}).get("condition") == "service_healthy", name


def test_redis_keeps_what_it_accepted(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = _command(redis)
    assert re.search(r"--appendonly\s+\"?yes", command)
    assert re.search(r"--appendfsync\s+everysec", command)
    assert re.search(r"--maxmemory-policy\s+noeviction", command)
    assert re.search(r"--maxmemory\s+\S+", command)  # a limit, below which the mark sits
    assert any(str(v).endswith(":/data") for v in redis.get("volumes", []))
    assert compose.get("volumes", {}).keys() >= {"redis-data"}


def test_env_is_documented(services: dict[str, dict[str, Any]]) -> None:
    pipeline = _documented(ROOT / "docs" / "reference" / "configuration.md")
    pipeline |= {"LDP_REDIS_URL", "LDP_ERROR_LOG"}  # documented in pairs on one row
    assert {"REDIS_URL", "LDP_BIND", "LDP_WEB_WORKERS"} <= pipeline
    locust = _documented(ROOT / "docs" / "guides" / "deployment.md")
    assert "LDP_MAX_P95_MS" in locust
    for name, service in services.items():
        env = service.get("environment", {})
        assert isinstance(env, dict), f"{name}: use the mapping form of environment"
        allowed = locust | pipeline if _is_locust(name) else pipeline
        unknown = set(env) - allowed
        assert not unknown, f"{name} uses undocumented variables {sorted(unknown)}"
        if not _is_locust(name) and name not in NOT_REDIS_CLIENTS:
            assert env.get("REDIS_URL", "").startswith("redis://redis:"), name


def test_load_profile_holds_only_locust(services: dict[str, dict[str, Any]]) -> None:
    in_load = {n for n, s in services.items() if "load" in s.get("profiles", [])}
    assert in_load == {n for n in services if _is_locust(n)}
    assert in_load >= {"locust-master", "locust-worker"}
    for name in set(services) - in_load:
        assert not services[name].get("profiles"), f"{name} must run by default"
    worker = _command(services["locust-worker"])
    assert "--worker" in worker and "--master-host" in worker and "locust-master" in worker
    assert "--master" in _command(services["locust-master"])
    assert "loadtests/locustfile.py" in worker


def test_ports_sane(services: dict[str, dict[str, Any]]) -> None:
    host_ports: list[str] = []
    for name, service in services.items():
        for port in service.get("ports", []):
            parts = str(port).split(":")
            assert 1 <= len(parts) <= 3, f"{name}: {port}"
            assert all(p.isdigit() and 0 < int(p) < 65536 for p in parts[-2:] if p), port
            if len(parts) >= 2:
                assert name not in SCALABLE, f"{name} is scaled: no fixed host port ({port})"
                host_ports.append(f"{parts[0] if len(parts) == 3 else ''}:{parts[-2]}")
        if name in SCALABLE:
            assert "container_name" not in service, name
    assert len(host_ports) == len(set(host_ports)), f"host port collision: {host_ports}"
    assert "6379" not in " ".join(host_ports), "Redis must not be published"


def test_services_run_the_real_entry_points(services: dict[str, dict[str, Any]]) -> None:
    collector = _command(services["collector"])
    assert "gunicorn" in collector and "collector/gunicorn_conf.py" in collector
    assert (ROOT / "collector" / "gunicorn_conf.py").exists()
    assert "ldp aggregate" in _command(services["aggregator"])
    assert "create_server_app()" in _command(services["dashboard"])
    for name in ("collector", "dashboard"):
        assert services[name]["environment"]["LDP_BIND"].startswith("0.0.0.0:"), name


def test_dockerfile_installs_the_project() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert re.search(r"pip install .*\.\[\$\{?EXTRAS\}?\]", text)
    assert re.search(r"^ARG EXTRAS=server$", text, re.M)
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0"), "the image must run as a non-root user"
    # Every package the project installs (pyproject's packages.find), none forgotten.
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = [pattern.rstrip("*") for pattern in include["packages"]["find"]["include"]]
    assert "collector" in packages and "aggregator" in packages
    for package in packages:
        assert re.search(rf"^COPY {package}\b", text, re.M), package
    assert "gunicorn_conf.py" in text


def test_gunicorn_services_add_up_their_workers_metrics(
    services: dict[str, dict[str, Any]],
) -> None:
    """Each gunicorn worker counts for itself: /metrics must add them up
    (prometheus-client's multiprocess mode, in a folder that is empty at each start)."""
    for name in ("collector", "dashboard"):
        service = services[name]
        folder = service["environment"]["PROMETHEUS_MULTIPROC_DIR"]
        assert folder in service.get("tmpfs", []), name


# -- the buffering proxy in front of the collectors ----------------------------------------


def _nginx_statements() -> list[tuple[str, list[str]]]:
    """(directive, arguments) of every statement of deploy/nginx.conf, comments removed
    (quoted strings kept whole), block openers included."""
    text = re.sub(r"(?m)#.*$", "", NGINX_CONF.read_text())
    out = []
    for statement in re.findall(r"([^;{}]+)[;{]", text):
        words = re.findall(r"'[^']*'|\"[^\"]*\"|\S+", statement)
        if words:
            out.append((words[0], [w.strip("'\"") for w in words[1:]]))
    return out


def _one(statements: list[tuple[str, list[str]]], directive: str) -> list[str]:
    found = [args for name, args in statements if name == directive]
    assert len(found) == 1, f"{directive}: {found}"
    return found[0]


def _seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[unit]


def _bytes(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kKmM])?", value).groups()  # type: ignore[union-attr]
    return int(number) * {None: 1, "k": 1024, "K": 1024, "m": 1 << 20, "M": 1 << 20}[unit]


def test_proxy_fronts_the_collectors(services: dict[str, dict[str, Any]]) -> None:
    proxy = services["proxy"]
    assert str(proxy["image"]).startswith("nginx:")
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]
    assert NGINX_CONF.exists()
    assert [str(p).split(":")[-1] for p in proxy["ports"]] == ["8000"]
    assert proxy["depends_on"]["collector"]["condition"] == "service_healthy"
    assert "/readyz" in " ".join(proxy["healthcheck"]["test"])
    # Only the proxy reaches the collectors: they publish nothing, load goes through it.
    assert not services["collector"].get("ports"), "collectors are reached through the proxy"
    assert "http://proxy:8000" in _command(services["locust-master"])
    assert "server collector:8000" in NGINX_CONF.read_text()


def test_proxy_bounds_every_wait() -> None:
    statements = _nginx_statements()
    for directive in (
        "client_header_timeout",
        "client_body_timeout",
        "send_timeout",
        "keepalive_timeout",
        "proxy_connect_timeout",
        "proxy_send_timeout",
    ):
        assert 0 < _seconds(_one(statements, directive)[0]) <= 30, directive
    # Longer than gunicorn's worker timeout: a slow answer is the collector's to end.
    assert _seconds(_one(statements, "proxy_read_timeout")[0]) > 30
    # Whole bodies first, but for reports: their body streams to a collector, whose
    # deadline and bytes/s floor (ldp_edge/slow_bodies.py) nginx cannot enforce.
    # (The Oblivious HTTP gateway's sealed bodies are buffered: the relay sends each whole.)
    buffering = [args for name, args in statements if name == "proxy_request_buffering"]
    assert buffering == [["on"], ["off"], ["on"]]
    reports = statements.index(("location", ["=", "/v1/reports"]))
    gateway = statements.index(("location", ["=", "/.well-known/ohttp-gateway"]))
    assert reports < statements.index(("proxy_request_buffering", ["off"])) < gateway
    assert _one(statements, "proxy_buffering") == ["on"]
    assert _one(statements, "reset_timedout_connection") == ["on"]


def test_proxy_limits_match_the_collectors(services: dict[str, dict[str, Any]]) -> None:
    statements = _nginx_statements()
    # The server's limit is the collector's; the gateway's location adds the sealing's
    # overhead, so a batch the collector accepts directly passes sealed too.
    limits_of = [_bytes(a[0]) for name, a in statements if name == "client_max_body_size"]
    buffers = [_bytes(a[0]) for name, a in statements if name == "client_body_buffer_size"]
    limit = limits_of[0]
    assert (
        limit == MAX_BODY_BYTES == int(services["collector"]["environment"]["LDP_MAX_BODY_BYTES"])
    )
    assert limits_of == [limit, limit + SEALING_OVERHEAD]
    assert [b >= lim for b, lim in zip(buffers, limits_of, strict=True)] == [True, True]  # memory
    assert f"at most {MAX_BODY_BYTES} bytes" in NGINX_CONF.read_text()  # nginx's own 413
    zones = [args for name, args in statements if name == "limit_conn_zone"]
    limits = [args for name, args in statements if name == "limit_conn"]
    assert len(zones) >= 2 and len(limits) >= 2, "per-address and total connection limits"
    for zone_name, count in limits:
        assert any(f"zone={zone_name}:" in arg for z in zones for arg in z), zone_name
        assert 0 < int(count)
    # A proxied request holds two connections (client, collector): the total limit keeps
    # even one worker process's connections below worker_connections.
    connections = int(_one(statements, "worker_connections")[0])
    assert 2 * max(int(count) for _, count in limits) <= connections
    assert _one(statements, "limit_conn_status") == ["429"]


def test_proxy_logs_and_forwards_no_client_address() -> None:
    statements = _nginx_statements()
    text = re.sub(r"(?m)#.*$", "", NGINX_CONF.read_text())
    # nginx's default format ("combined") starts with $remote_addr and has the time and
    # the user agent: a named format without them, and no access_log without a format.
    formats = {args[0]: " ".join(args[1:]) for name, args in statements if name == "log_format"}
    logs = [args for name, args in statements if name == "access_log"]
    assert logs, "an access_log with the private format"
    for args in logs:
        assert args == ["off"] or (len(args) >= 2 and args[1] in formats), args
    for name in {args[1] for args in logs if len(args) >= 2}:
        for variable in (
            "$remote_addr",
            "$binary_remote_addr",
            "$realip_remote_addr",
            "$remote_user",
            "$http_",
            "$time_",
            "$msec",
            "$request ",
            "$request_uri",
            "$args",
            "$query_string",
        ):
            assert variable not in formats[name] + " ", f"log_format {name} has {variable}"
    # The error log names the client ("client: <address>") at error and below.
    level = _one(statements, "error_log")[-1]
    assert level in ("crit", "alert", "emerg"), level
    # No X-Forwarded-For (nor its kin) reaches a collector; the client's own is removed.
    # The peer's address goes in X-Real-IP alone (set here, replacing the client's own),
    # for the per-source limits; test_collectors_trust_only_the_proxys_header checks
    # the collectors take it from there.
    assert "$proxy_add_x_forwarded_for" not in text
    headers = {args[0].lower(): args[1:] for name, args in statements if name == "proxy_set_header"}
    assert headers["x-real-ip"] == ["$remote_addr"]
    assert text.count("$remote_addr") == 1
    cleared = {name for name, value in headers.items() if value == [""]}
    assert {"x-forwarded-for", "forwarded"} <= cleared


def test_collectors_trust_only_the_proxys_header(services: dict[str, dict[str, Any]]) -> None:
    env = services["collector"]["environment"]
    assert env["LDP_SOURCE_HEADER"] == "X-Real-IP"  # set by the proxy, not by a client
    assert "ports" not in services["collector"]  # reachable only through the proxy
    # The dashboard takes no reports from devices and trusts no header.
    assert "LDP_SOURCE_HEADER" not in services["dashboard"]["environment"]


def test_an_exporter_writes_every_metric_daily_into_a_volume(compose: dict[str, Any]) -> None:
    """History survives expiry: `ldp export --all` at least once a day, kept in a volume."""
    exporter = compose["services"]["exporter"]
    command = _command(exporter)
    assert "ldp export --all" in command and "--out" in command and "/exports/" in command
    sleeps = [int(s) for s in re.findall(r"sleep\s+(\d+)", command)]
    assert sleeps and max(sleeps) <= 86_400
    assert "$$(date" in command  # compose's escape: the shell, not compose, expands it
    assert "exports:/exports" in exporter.get("volumes", [])
    assert "exports" in compose.get("volumes", {})
    assert exporter["environment"]["REDIS_URL"].startswith("redis://redis:")


def test_prometheus_and_grafana_ship_the_rules_and_dashboards(
    services: dict[str, dict[str, Any]],
) -> None:
    """Prometheus mounts the tested rules and scrapes the services; Grafana provisions the
    generated dashboards over it (tests/test_prometheus_rules.py checks their contents)."""
    prometheus, grafana = services["prometheus"], services["grafana"]
    assert "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in prometheus["volumes"]
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["ldp-collector"]["dns_sd_configs"][0]["names"] == ["collector"]
    assert jobs["ldp-dashboard"]["static_configs"][0]["targets"] == ["dashboard:8000"]
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]
    provider = yaml.safe_load(
        (ROOT / "deploy" / "grafana" / "provisioning" / "dashboards" / "ldp.yml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    assert len(list((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))) == 5
