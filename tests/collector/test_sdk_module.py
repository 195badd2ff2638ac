"""``GET /sdk/ldp-telemetry/<name>``: the collector serves the JavaScript SDK's ES module,
cacheable, importable from an allowed origin, from the source tree or an installed copy."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from collector_helpers import make_app

from collector import api_sdk

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "client_js" / "src"
APP = "https://app.example"


def test_every_file_of_the_module_is_served_as_javascript(client: Any) -> None:
    files = sorted(p.name for p in SOURCE.glob("*.js"))
    assert "index.js" in files
    for name in files:
        r = client.get(f"/sdk/ldp-telemetry/{name}")
        assert r.status_code == 200, name
        assert r.mimetype == "text/javascript"
        assert r.data == (SOURCE / name).read_bytes()
        # every relative import resolves to a served sibling
        for target in re.findall(rb'from "\./([^"]+)"', r.data):
            assert client.get(f"/sdk/ldp-telemetry/{target.decode()}").status_code == 200


def test_the_module_is_cached_and_revalidated_by_version(client: Any) -> None:
    r = client.get("/sdk/ldp-telemetry/index.js")
    assert r.cache_control.public and r.cache_control.max_age == api_sdk.CACHE_SECONDS
    etag, _ = r.get_etag()
    assert etag.split("-")[0] == importlib.metadata.version("ldp-telemetry")
    again = client.get("/sdk/ldp-telemetry/index.js", headers={"If-None-Match": f'"{etag}"'})
    assert again.status_code == 304


@pytest.mark.parametrize(
    "name", ["nope.js", "..%2Fclient.js", "index.d.ts", "../package.json", "INDEX.js"]
)
def test_anything_else_is_a_json_404(client: Any, name: str) -> None:
    r = client.get(f"/sdk/ldp-telemetry/{name}")
    assert r.status_code == 404
    assert r.is_json and "error" in r.json


def test_an_allowed_origin_may_import_it_and_no_other(redis_db: Any) -> None:
    c = make_app(redis_db.url, CORS_ORIGINS=APP).test_client()
    r = c.get("/sdk/ldp-telemetry/index.js", headers={"Origin": APP})
    assert r.headers["Access-Control-Allow-Origin"] == APP
    assert "Access-Control-Allow-Credentials" not in r.headers
    other = c.get("/sdk/ldp-telemetry/index.js", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


def test_an_installed_package_carries_the_module() -> None:
    """The package's copy is ``collector/client_js`` (a link to client_js/src here), and
    pyproject's package data puts every file of it in the wheel."""
    assert api_sdk.MODULE_DIR.resolve() == SOURCE.resolve()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = data["package-data"]["collector"]
    for path in SOURCE.glob("*.js"):
        assert any(fnmatch(f"client_js/{path.name}", p) for p in patterns), path.name
    # the Docker image copies what the link points at
    assert "COPY client_js/src ./client_js/src" in (ROOT / "Dockerfile").read_text()
