"""``GET /sdk/ldp-telemetry/<name>``: the collector serves the JavaScript SDK as ONE
minified module (and its relay option), built from the sources by the pinned esbuild,
compressed as the request asks, cached by its content hash, importable from an allowed
origin, from the source tree or an installed copy."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from collector_helpers import make_app

from collector import api_sdk

ROOT = Path(__file__).resolve().parents[2]
CLIENT_JS = ROOT / "client_js"
DIST = CLIENT_JS / "dist"
APP = "https://app.example"

GOAL_GZIP_BYTES = 15_000
"""The SDK's size goal on a page: at most 15 kB as served, gzipped (issue 35)."""


def test_the_sdk_is_one_module_with_nothing_to_import(client: Any) -> None:
    r = client.get("/sdk/ldp-telemetry/index.js")  # no Accept-Encoding: as it is
    assert r.status_code == 200 and r.mimetype == "text/javascript"
    assert "Content-Encoding" not in r.headers
    assert r.data == (DIST / "index.js").read_bytes()
    text = r.data.decode()
    assert "import " not in text and 'from"' not in text and 'from "' not in text
    for name in ("Client", "MemoryStorage", "IndexedDBStorage", "buildReport", "encodeReport"):
        assert f" as {name}" in text or f"{name}," in text or f"{name}}}" in text, name
    ohttp = client.get("/sdk/ldp-telemetry/ohttp.js")
    assert ohttp.status_code == 200 and b"Relay" in ohttp.data
    assert ohttp.data == (DIST / "ohttp.js").read_bytes()


@pytest.mark.parametrize(
    ("accept", "encoding"),
    [
        ("gzip, deflate, br, zstd", "br"),
        ("gzip, deflate", "gzip"),
        ("br;q=0, gzip", "gzip"),
        ("identity", None),
        ("", None),
    ],
)
def test_brotli_or_gzip_when_the_request_accepts_it(
    client: Any, accept: str, encoding: str | None
) -> None:
    body = (DIST / "index.js").read_bytes()
    digest = hashlib.sha256(body).hexdigest()[:16]
    r = client.get("/sdk/ldp-telemetry/index.js", headers={"Accept-Encoding": accept})
    assert r.status_code == 200
    assert r.headers.get("Content-Encoding") == encoding
    assert "Accept-Encoding" in r.headers["Vary"]
    if encoding == "gzip":
        assert gzip.decompress(r.data) == body
    elif encoding == "br":
        assert r.data == (DIST / "index.js.br").read_bytes()  # build.mjs --check decodes it
    else:
        assert r.data == body
    etag, weak = r.get_etag()
    assert not weak and etag == digest + {"br": "-br", "gzip": "-gz", None: ""}[encoding]
    again = client.get(
        "/sdk/ldp-telemetry/index.js",
        headers={"Accept-Encoding": accept, "If-None-Match": f'"{etag}"'},
    )
    assert again.status_code == 304


def test_the_plain_name_is_revalidated_the_hashed_name_is_immutable(client: Any) -> None:
    plain = client.get("/sdk/ldp-telemetry/index.js")
    assert plain.cache_control.public and plain.cache_control.max_age == api_sdk.CACHE_SECONDS
    assert not plain.cache_control.immutable
    digest, _ = plain.get_etag()  # the ETag names the hashed file
    hashed = client.get(f"/sdk/ldp-telemetry/index.{digest}.js")
    assert hashed.status_code == 200 and hashed.data == plain.data
    assert hashed.cache_control.max_age == api_sdk.HASHED_CACHE_SECONDS
    assert hashed.cache_control.immutable
    stale = client.get("/sdk/ldp-telemetry/index.0123456789abcdef.js")
    assert stale.status_code == 404 and f"index.{digest}.js" in str(stale.json["details"])


@pytest.mark.parametrize(
    "name",
    ["mechanisms.js", "client.js", "nope.js", "..%2Fclient.js", "index.d.ts", "INDEX.js"],
)
def test_anything_else_is_a_json_404(client: Any, name: str) -> None:
    """The source files are no longer served one by one: a page imports index.js."""
    r = client.get(f"/sdk/ldp-telemetry/{name}")
    assert r.status_code == 404
    assert r.is_json and "error" in r.json


def test_the_module_as_served_gzipped_is_within_the_goal(client: Any) -> None:
    """At most 15 kB as a browser receives it with gzip (smaller still with Brotli)."""
    r = client.get("/sdk/ldp-telemetry/index.js", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    assert len(r.data) <= GOAL_GZIP_BYTES, f"{len(r.data):,} B gzipped as served"
    br = client.get("/sdk/ldp-telemetry/index.js", headers={"Accept-Encoding": "br"})
    assert len(br.data) < len(r.data)


def test_the_built_module_is_what_the_sources_build_to() -> None:
    """client_js/dist is committed (a fresh clone and an installed package serve it without
    Node); the pinned esbuild rebuilds it from client_js/src, byte for byte."""
    node = shutil.which("node")
    if node is None or not (CLIENT_JS / "node_modules" / "esbuild").is_dir():
        pytest.skip("needs Node and `npm ci` in client_js/ (python3 tasks.py test runs it)")
    check = subprocess.run(
        [node, "build.mjs", "--check"], cwd=CLIENT_JS, capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stderr


def test_an_allowed_origin_may_import_it_and_no_other(redis_db: Any) -> None:
    c = make_app(redis_db.url, CORS_ORIGINS=APP).test_client()
    r = c.get("/sdk/ldp-telemetry/index.js", headers={"Origin": APP})
    assert r.headers["Access-Control-Allow-Origin"] == APP
    assert "Access-Control-Allow-Credentials" not in r.headers
    other = c.get("/sdk/ldp-telemetry/index.js", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


def test_an_installed_package_carries_the_module() -> None:
    """The package's copy is ``collector/client_js`` (a link to client_js/dist here), and
    pyproject's package data puts every built file in the wheel."""
    assert api_sdk.MODULE_DIR.resolve() == DIST.resolve()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = data["package-data"]["collector"]
    built = sorted(p.name for p in DIST.iterdir())
    assert built == ["index.js", "index.js.br", "ohttp.js", "ohttp.js.br"]
    for name in built:
        assert any(fnmatch(f"client_js/{name}", p) for p in patterns), name
    # the Docker image copies what the link points at
    assert "COPY client_js/dist ./client_js/dist" in (ROOT / "Dockerfile").read_text()


def test_every_sdk_url_the_docs_name_is_served(client: Any) -> None:
    """The READMEs and the docs name only files the collector serves (the SDK's sources
    were once served one by one, and the package's README said so after they no longer
    were); the hashed name is written ``index.<hash>.js``."""
    texts = [ROOT / "README.md", CLIENT_JS / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named: set[str] = set()
    for path in texts:
        for m in re.finditer(r"/sdk/ldp-telemetry/([A-Za-z0-9_.<>-]+\.js)", path.read_text()):
            named.add(m.group(1))
    assert "index.js" in named and "ohttp.js" in named
    digest = client.get("/sdk/ldp-telemetry/index.js").get_etag()[0]
    for name in sorted(named):
        concrete = name.replace("<hash>", digest)
        assert client.get(f"/sdk/ldp-telemetry/{concrete}").status_code == 200, name
    # nor is any file of client_js/src named as if it were served beside the module
    readme = (CLIENT_JS / "README.md").read_text()
    for source in sorted(p.name for p in (CLIENT_JS / "src").glob("*.js")):
        assert f"ldp-telemetry/{source}" not in readme or source in ("index.js", "ohttp.js")


def test_the_package_readme_says_what_the_collector_does_across_origins() -> None:
    """The package's README once said the collector answered no cross-origin request; it
    answers the origins of ``LDP_CORS_ORIGINS`` (collector/cors.py)."""
    readme = " ".join((CLIENT_JS / "README.md").read_text().split())
    assert "does not answer cross-origin" not in readme
    assert "LDP_CORS_ORIGINS" in readme
