"""The deployment files cannot rot: docker-compose.yml and the Dockerfile, checked by structure.

No Docker engine runs here, so these tests read the files: the services exist, every
long-running service has a healthcheck and waits for healthy dependencies, Redis keeps
what it accepted (AOF, ``noeviction``), the environment uses only documented variables,
the ``load`` profile holds only Locust, and scalable services publish no fixed host port.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {"redis", "collector", "aggregator", "dashboard", "locust-master", "locust-worker"}
SCALABLE = {"collector", "aggregator", "locust-worker"}
"""Services run as several replicas (``--scale``): no container_name, no fixed host port."""


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
        if name != "redis" and not _is_locust(name):
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
    pipeline = _documented(ROOT / "docs" / "pipeline.md")
    pipeline |= {"LDP_REDIS_URL", "LDP_ERROR_LOG"}  # documented in pairs on one row
    assert {"REDIS_URL", "LDP_BIND", "LDP_WEB_WORKERS"} <= pipeline
    locust = _documented(ROOT / "loadtests" / "locustfile.py")
    assert "LDP_MAX_P95_MS" in locust
    for name, service in services.items():
        env = service.get("environment", {})
        assert isinstance(env, dict), f"{name}: use the mapping form of environment"
        allowed = locust | pipeline if _is_locust(name) else pipeline
        unknown = set(env) - allowed
        assert not unknown, f"{name} uses undocumented variables {sorted(unknown)}"
        if not _is_locust(name) and name != "redis":
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
