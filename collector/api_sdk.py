"""The JavaScript SDK as a page loads it: one minified ES module, served by the collector.

``GET /sdk/ldp-telemetry/index.js`` answers the whole SDK (``client_js/src`` bundled into
one minified module by the project's build, a pinned esbuild: ``client_js/build.mjs``);
``ohttp.js`` the relay option, which only pages that use a relay load. Each is also
served as ``index.<hash>.js`` (its content's hash), cached for a year and immutable; the
plain name is cached a day and revalidated by its ETag (the same hash). Brotli or gzip
when the request accepts it. The files come from ``collector/client_js``: a link to
``client_js/dist`` in the source tree (committed, rebuilt and compared by the tests), a
copy in an installed package. A page on an origin in ``LDP_CORS_ORIGINS`` may import them
(see :mod:`collector.cors`). In full: ``docs/reference/sdk-module.md``.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import zopfli.gzip
from flask import Blueprint, Response, request

from collector.errors import ApiError
from ldp_api.models import Error, Model
from ldp_api.openapi import Header, Media, Reply, documented

__all__ = ["MODULE_DIR", "MODULES", "SDK_PATH", "bp", "module_files"]

bp = Blueprint("sdk", __name__)

SDK_PATH = "/sdk/ldp-telemetry/"
"""Where the module is served: ``import … from "<collector>/sdk/ldp-telemetry/index.js"``."""

MODULE_DIR = Path(__file__).resolve().parent / "client_js"
"""The built modules: ``client_js/dist`` (a link in the source tree, a copy when installed)."""

MODULES = ("index.js", "ohttp.js")
"""The SDK (every mechanism and the client) and its relay option."""

CACHE_SECONDS = 24 * 3600
"""A browser reuses ``index.js`` for a day, then revalidates it by its ETag."""

HASHED_CACHE_SECONDS = 365 * 24 * 3600
"""``index.<hash>.js`` never changes: a year, immutable (RFC 8246)."""


_NAME = re.compile(r"(?P<stem>[a-z]+)(?:\.(?P<hash>[0-9a-f]{16}))?\.js")


class ModuleFile(Model):
    """The ``<name>`` of one of the served modules."""

    name: str
    """``index.js`` or ``ohttp.js``, or either with its content hash: ``index.<hash>.js``."""


@dataclass(frozen=True)
class BuiltModule:
    """One built module and its encodings."""

    body: bytes
    digest: str
    """The first 16 hex digits of its SHA-256: its hashed name and its ETag."""
    gzip: bytes
    brotli: bytes | None
    """``<name>.br`` built beside it (the standard library has no Brotli encoder)."""


@functools.cache
def module_files() -> dict[str, BuiltModule]:
    """Every served module with its encodings, read and compressed once per process."""
    files: dict[str, BuiltModule] = {}
    for name in MODULES:
        path = MODULE_DIR / name
        if not path.is_file():
            continue
        body = path.read_bytes()
        brotli = path.with_name(f"{name}.br")
        files[name] = BuiltModule(
            body,
            hashlib.sha256(body).hexdigest()[:16],
            zopfli.gzip.compress(body),  # the smallest gzip (~0.1 s once per process)
            brotli.read_bytes() if brotli.is_file() else None,
        )
    return files


def _found(name: str) -> tuple[BuiltModule, bool]:
    """The module ``name`` asks for, and whether by its hashed name.

    Raises:
        ApiError: 404 for any other name (the SDK's source files are not served one by
            one any more), or the hash of a module this collector no longer has.
    """
    match = _NAME.fullmatch(name)
    found = module_files().get(f"{match['stem']}.js") if match else None
    if found is None or (match and match["hash"] and match["hash"] != found.digest):
        current = [f"{stem} ({stem[:-3]}.{m.digest}.js)" for stem, m in module_files().items()]
        raise ApiError(404, "no such file of the JavaScript SDK", [f"served: {', '.join(current)}"])
    return found, bool(match and match["hash"])


@bp.get(SDK_PATH + "<name>")
@documented(
    "The JavaScript SDK as one minified ES module (index.js), or its relay option (ohttp.js).",
    {
        200: Reply(
            "The module: under its plain name cached a day and revalidated by its ETag (its "
            "content hash); under index.<hash>.js cached a year, immutable. Brotli or gzip "
            "when Accept-Encoding allows.",
            media={"text/javascript": Media("An ES module.")},
            headers={
                "ETag": Header("The content hash (with -br or -gz for an encoding)."),
                "Content-Encoding": Header("br or gzip, when the request accepts it."),
            },
        ),
        304: Reply("Not modified: the ETag matches."),
        404: Reply("No such module, or the hash of one no longer served.", Error),
    },
    path=ModuleFile,
)
def module_file(name: str) -> Response:
    """``index.js``, ``ohttp.js``, or either under its content hash."""
    found, hashed = _found(name)
    accepted = request.accept_encodings
    if found.brotli is not None and accepted["br"]:
        body, encoding, etag = found.brotli, "br", f"{found.digest}-br"
    elif accepted["gzip"]:
        body, encoding, etag = found.gzip, "gzip", f"{found.digest}-gz"
    else:
        body, encoding, etag = found.body, None, found.digest
    response = Response(body, content_type="text/javascript; charset=utf-8")
    if encoding:
        response.content_encoding = encoding
    response.vary.add("Accept-Encoding")
    response.cache_control.public = True
    response.cache_control.max_age = HASHED_CACHE_SECONDS if hashed else CACHE_SECONDS
    if hashed:
        response.cache_control.immutable = True
    response.set_etag(etag)
    response.make_conditional(request)
    return response
