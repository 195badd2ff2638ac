"""The JavaScript SDK's ES module, served by the collector for web pages to import.

``GET /sdk/ldp-telemetry/<name>`` answers the files of ``client_js/src`` (``index.js`` and
the siblings it imports) as ``text/javascript``. They come from ``collector/client_js``:
a link to ``client_js/src`` in the source tree, a copy of it in an installed package
(package data). A page on an origin in ``LDP_CORS_ORIGINS`` may import them (see
:mod:`collector.cors`). Browsers keep a file a day and then revalidate it: its ETag is
the package's version and the file's hash, so an upgrade is picked up at once after that.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import re
from pathlib import Path

from flask import Blueprint, Response, request

from collector.errors import ApiError
from ldp_api.models import Error, Model
from ldp_api.openapi import Media, Reply, documented

__all__ = ["MODULE_DIR", "SDK_PATH", "bp", "module_files"]

bp = Blueprint("sdk", __name__)

SDK_PATH = "/sdk/ldp-telemetry/"
"""Where the module's files are served:
``import … from "<collector>/sdk/ldp-telemetry/index.js"``
(the relative imports inside it resolve to the siblings)."""

MODULE_DIR = Path(__file__).resolve().parent / "client_js"
"""The module's files: ``client_js/src`` (a link in the source tree, a copy when installed)."""

CACHE_SECONDS = 24 * 3600
"""A browser reuses a file for a day, then revalidates it by its ETag."""

_FILE_NAME = re.compile(r"[a-z][a-z0-9_]*\.js")


class ModuleFile(Model):
    """The ``<name>`` of one of the module's files."""

    name: str
    """A file of client_js/src, e.g. ``index.js``."""


@functools.cache
def module_files() -> dict[str, tuple[bytes, str]]:
    """Every file of the module with its ETag, read once per process."""
    try:
        version = importlib.metadata.version("ldp-telemetry")
    except importlib.metadata.PackageNotFoundError:
        version = "source"
    files: dict[str, tuple[bytes, str]] = {}
    for path in sorted(MODULE_DIR.glob("*.js")) if MODULE_DIR.is_dir() else ():
        body = path.read_bytes()
        files[path.name] = (body, f"{version}-{hashlib.sha256(body).hexdigest()[:16]}")
    return files


@bp.get(SDK_PATH + "<name>")
@documented(
    "A file of the JavaScript SDK's ES module (index.js and the files it imports).",
    {
        200: Reply(
            "The file; cached a day, revalidated by its ETag (version and hash).",
            media={"text/javascript": Media("An ES module.")},
        ),
        404: Reply("No such file in the module.", Error),
    },
    path=ModuleFile,
)
def module_file(name: str) -> Response:
    """One file of ``client_js/src``, e.g. ``index.js``."""
    found = module_files().get(name) if _FILE_NAME.fullmatch(name) else None
    if found is None:
        raise ApiError(404, "no such file in the JavaScript SDK", [f"try {SDK_PATH}index.js"])
    body, etag = found
    response = Response(body, content_type="text/javascript; charset=utf-8")
    response.cache_control.public = True
    response.cache_control.max_age = CACHE_SECONDS
    response.set_etag(etag)
    response.make_conditional(request)
    return response
