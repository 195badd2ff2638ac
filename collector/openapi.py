"""The OpenAPI 3.1 description of the collector's HTTP API, served at ``/openapi.json``.

Written by hand next to the views it describes; ``tests/collector`` checks that every
URL rule of the app is documented with its methods and every documented path exists.
Limits are taken from the code that enforces them, so they cannot drift.
"""

from __future__ import annotations

from typing import Any

from client_sdk import mechanisms
from client_sdk.wire import (
    MAX_DESCRIPTION_LENGTH,
    MAX_LABEL_LENGTH,
    MAX_NAME_LENGTH,
    MAX_SHARDS,
)
from collector import settings

__all__ = ["OPENAPI"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_UNAVAILABLE = {
    **_error("Storage is unavailable or the backlog is full; retry after Retry-After seconds."),
    "headers": {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}},
}

_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "maxLength": MAX_NAME_LENGTH, "pattern": "^[a-z0-9][a-z0-9_.-]*$"},
}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "details"],
        "properties": {
            "error": {"type": "string"},
            "details": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Mechanism": {
        "type": "object",
        "description": "The mechanism's parameters, enough to rebuild it exactly.",
        "required": ["mechanism", "epsilon"],
        "properties": {
            "mechanism": {
                "type": "string",
                "enum": [*mechanisms.MECHANISMS, *mechanisms.NUMERIC_MECHANISMS],
            },
            "epsilon": {"type": "number"},
            "domain_size": {"type": "integer"},
        },
        "additionalProperties": True,
    },
    "MetricDefinition": {
        "type": "object",
        "required": ["name", "version", "kind", "mechanism"],
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "kind": {"type": "string", "enum": ["categorical", "numeric"]},
            "domain": {
                "type": "array",
                "items": {"type": "string"},
                "description": "A categorical metric's values.",
            },
            "range": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 2,
                "maxItems": 2,
                "description": "A numeric metric's [lo, hi] (it has no domain).",
            },
            "description": {"type": "string"},
            "mechanism": _ref("Mechanism"),
            "mechanism_reason": {"type": "string"},
            "shards": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SHARDS,
                "default": 1,
                "description": "Streams this version's reports spread over (absent: 1).",
            },
        },
    },
    "MetricSpec": {
        "type": "object",
        "description": "What an operator sends; changing ε, domain, mechanism or shards "
        "makes a new version, a description-only change keeps it.",
        "required": ["epsilon"],
        "additionalProperties": False,
        "properties": {
            "kind": {
                "type": "string",
                "enum": ["categorical", "numeric"],
                "default": "categorical",
                "description": "numeric: the mean of a number in 'range' (then no domain, "
                "no options; mechanism auto, duchi, pm or hybrid).",
            },
            "range": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 2,
                "maxItems": 2,
                "description": "[lo, hi] of a numeric metric, lo < hi.",
            },
            "domain": {
                "type": "array",
                "minItems": 2,
                "maxItems": mechanisms.MAX_DOMAIN_SIZE,
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_LABEL_LENGTH},
            },
            "epsilon": {
                "type": "number",
                "minimum": mechanisms.MIN_EPSILON,
                "maximum": mechanisms.MAX_EPSILON,
            },
            "mechanism": {
                "type": "string",
                "enum": [*mechanisms.NAMES, *mechanisms.NUMERIC_MECHANISMS],
                "default": "auto",
            },
            "options": {"type": "object"},
            "description": {"type": "string", "maxLength": MAX_DESCRIPTION_LENGTH},
            "longitudinal": {
                "type": "object",
                "description": "Memoized responses for values reported again and again: "
                "permanent_epsilon bounds what unlimited reports of one value reveal.",
                "properties": {"permanent_epsilon": {"type": "number"}},
                "required": ["permanent_epsilon"],
                "additionalProperties": False,
            },
            "budget": {
                "type": "object",
                "description": "Device-side limit: at most reports_per_period reports per period.",
                "properties": {
                    "reports_per_period": {"type": "integer", "minimum": 1},
                    "period": {"type": "string", "enum": ["day", "week", "month"]},
                },
                "required": ["reports_per_period", "period"],
                "additionalProperties": False,
            },
            "shards": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SHARDS,
                "default": 1,
                "description": "Streams to spread a hot metric over (each its own hash slot "
                "on a Redis Cluster); a report's shard follows from its id. Changing it "
                "makes a new version, so a replay always meets its first copy.",
            },
        },
    },
    "Report": {
        "type": "object",
        "description": "One perturbed report; nothing else (no device id, no time).",
        "required": ["metric", "version", "id", "payload"],
        "additionalProperties": False,
        "properties": {
            "metric": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
            "payload": {"type": "object", "description": "The mechanism's wire format."},
        },
    },
    "ReportBatch": {
        "type": "object",
        "required": ["reports"],
        "additionalProperties": False,
        "properties": {
            "reports": {
                "type": "array",
                "minItems": 1,
                "maxItems": settings.MAX_REPORTS,
                "description": "At most MAX_REPORTS reports (default shown) and "
                "MAX_BODY_BYTES bytes per request.",
                "items": _ref("Report"),
            }
        },
    },
    "Rejection": {
        "type": "object",
        "required": ["index", "error"],
        "properties": {"index": {"type": "integer"}, "error": {"type": "string"}},
    },
    "IngestResult": {
        "type": "object",
        "required": ["accepted", "duplicates", "rejected"],
        "properties": {
            "accepted": {"type": "integer", "description": "Reports appended now."},
            "duplicates": {"type": "integer", "description": "Replays of known ids."},
            "rejected": {"type": "array", "items": _ref("Rejection")},
        },
    },
    "IngestError": {
        "allOf": [
            _ref("Error"),
            {
                "type": "object",
                "properties": {"rejected": {"type": "array", "items": _ref("Rejection")}},
            },
        ]
    },
    "Status": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string"}},
    },
}

_PATHS: dict[str, Any] = {
    "/v1/metrics": {
        "get": {
            "summary": "The current definition of every metric.",
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "properties": {
                            "metrics": {"type": "array", "items": _ref("MetricDefinition")}
                        },
                    },
                    "The metrics.",
                ),
                "503": _UNAVAILABLE,
            },
        }
    },
    "/v1/metrics/{name}": {
        "parameters": [_NAME],
        "get": {
            "summary": "One metric's current definition, or a given version.",
            "parameters": [
                {"name": "version", "in": "query", "schema": {"type": "integer", "minimum": 1}}
            ],
            "responses": {
                "200": _json(_ref("MetricDefinition"), "The definition."),
                "400": _error("The version is not a positive integer."),
                "404": _error("No such metric or version."),
                "503": _UNAVAILABLE,
            },
        },
        "put": {
            "summary": "Create or change a metric (operators only).",
            "security": [{"adminToken": []}],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("MetricSpec")}},
            },
            "responses": {
                "200": _json(_ref("MetricDefinition"), "Unchanged version (description only)."),
                "201": _json(_ref("MetricDefinition"), "A new version was created."),
                "400": _error("Invalid definition; every problem is in details."),
                "401": _error("No bearer token."),
                "403": _error("Wrong token, or metric changes are disabled."),
                "413": _error("The body is too large."),
                "415": _error("The body is not UTF-8 JSON."),
                "503": _UNAVAILABLE,
            },
        },
    },
    "/v1/reports": {
        "post": {
            "summary": "Append a batch of perturbed reports.",
            "description": "Each report is validated strictly against its metric version; "
            "valid ones are appended (once: replayed ids count as duplicates), invalid "
            "ones are listed by index. 4xx: drop the batch; 503: retry it.",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ReportBatch")}},
            },
            "responses": {
                "202": _json(_ref("IngestResult"), "Stored (the valid reports)."),
                "400": _json(_ref("IngestError"), "Malformed, or no valid report."),
                "413": _error("Too many reports or too many bytes."),
                "415": _error("The body is not UTF-8 JSON."),
                "503": _UNAVAILABLE,
            },
        }
    },
    "/healthz": {
        "get": {
            "summary": "Liveness: the process answers.",
            "responses": {"200": _json(_ref("Status"), "Alive.")},
        }
    },
    "/readyz": {
        "get": {
            "summary": "Readiness: Redis answers.",
            "responses": {"200": _json(_ref("Status"), "Ready."), "503": _UNAVAILABLE},
        }
    },
    "/metrics": {
        "get": {
            "summary": "The collector's own metrics (Prometheus text format).",
            "responses": {
                "200": {
                    "description": "Counters and histograms.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    },
    "/openapi.json": {
        "get": {
            "summary": "This document.",
            "responses": {
                "200": {
                    "description": "OpenAPI 3.1.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
        }
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "ldp-telemetry collector",
        "version": "1",
        "description": "Ingestion of locally differentially private reports. Errors are "
        '{"error": "...", "details": [...]}: 4xx means the request will never be '
        "valid, 503 (with Retry-After) means retry later.",
    },
    "paths": _PATHS,
    "components": {
        "schemas": _SCHEMAS,
        "securitySchemes": {"adminToken": {"type": "http", "scheme": "bearer"}},
    },
}
"""The document itself (a plain dict, served as JSON)."""
