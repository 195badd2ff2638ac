"""Building blocks of the OpenAPI description shared by :mod:`collector.openapi` and
:mod:`collector.openapi_read`: references, JSON bodies, the error shape."""

from __future__ import annotations

from typing import Any

from client_sdk.wire import MAX_NAME_LENGTH

__all__ = ["NAME_PARAMETER", "UNAVAILABLE", "error", "json_body", "ref"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(description: str) -> dict[str, Any]:
    return json_body(ref("Error"), description)


UNAVAILABLE = {
    **error("Storage is unavailable or the backlog is full; retry after Retry-After seconds."),
    "headers": {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}},
}

NAME_PARAMETER = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "maxLength": MAX_NAME_LENGTH, "pattern": "^[a-z0-9][a-z0-9_.-]*$"},
}
