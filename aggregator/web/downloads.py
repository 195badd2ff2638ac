"""The estimates' CSV answers as downloads: one name scheme for every kind's file.

Reference: ``docs/reference/http.md``.
"""

from __future__ import annotations

from typing import Protocol

from flask import Response

__all__ = ["csv_download"]


class Named(Protocol):
    """What names a file: the answer's metric, version and window."""

    metric: str
    version: int
    window: str


def csv_download(text: str, body: Named, suffix: str = "") -> Response:
    """``text`` as a CSV attachment named ``<metric>-v<version>-<window><suffix>.csv`` (the
    window's colons as underscores)."""
    filename = f"{body.metric}-v{body.version}-{body.window.replace(':', '_')}{suffix}.csv"
    return Response(
        text,
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
