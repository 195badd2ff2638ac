"""The OpenAPI 3.1 description of the HTTP API, served at ``/openapi.json``.

Written by hand next to the views it describes. One catalogue covers every route of
``ldp serve`` (:func:`aggregator.service.app.create_server_app`): the collector's (metric
definitions, reports, health, Prometheus) and the read APIs the aggregator mounts on it
(estimates, trends, overview, planning). :func:`document` serves the part an app routes,
so the collector alone describes only its own routes. The dashboard's HTML pages and
their assets (``/``, ``/ui/…``) are pages, not API, and are not described.

``tests/collector`` checks that every URL rule of both apps is documented with its
methods, that nothing else is, and that the read APIs' real answers match their schemas.
Collector limits are taken from the code that enforces them; the aggregator's are
repeated below (importing it would load numpy and scipy into the collector) and pinned
to its constants by those tests.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Flask

from client_sdk import mechanisms
from client_sdk.wire import (
    MAX_DESCRIPTION_LENGTH,
    MAX_LABEL_LENGTH,
    MAX_SHARDS,
)
from collector import settings
from collector.openapi_base import NAME_PARAMETER as _NAME
from collector.openapi_base import UNAVAILABLE as _UNAVAILABLE
from collector.openapi_base import error as _error
from collector.openapi_base import json_body as _json
from collector.openapi_base import ref as _ref
from collector.openapi_read import READ_LIMITS
from collector.openapi_read import READ_PATHS as _READ_PATHS
from collector.openapi_read import READ_SCHEMAS as _READ_SCHEMAS

__all__ = ["OPENAPI", "READ_LIMITS", "app_paths", "document"]

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

_SECURITY_SCHEMES = {
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "LDP_ADMIN_TOKEN: metric changes. It also grants reads.",
    },
    "readToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "LDP_READ_TOKEN (or the admin token): asked for only when "
        "LDP_READ_TOKEN is set; without it the read APIs are open.",
    },
    "readTokenBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "The same token as the password, any user name (what the "
        "dashboard's pages send).",
    },
}

_VERBS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "ldp-telemetry",
        "version": "1",
        "description": "Ingestion of locally differentially private reports and, on "
        "`ldp serve`, the estimates computed from them. Errors are "
        '{"error": "...", "details": [...]}: 4xx means the request will never be '
        "valid, 503 (with Retry-After) means retry later.",
    },
    "paths": {**_PATHS, **_READ_PATHS},
    "components": {
        "schemas": {**_SCHEMAS, **_READ_SCHEMAS},
        "securitySchemes": _SECURITY_SCHEMES,
    },
}
"""Every route of ``ldp serve`` (a plain dict); an app serves :func:`document`."""

_RULE_VARIABLE = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


def app_paths(app: Flask) -> dict[str, set[str]]:
    """Every URL rule of ``app`` as an OpenAPI path, with its methods (lower case).

    HEAD and OPTIONS, which Flask adds to every rule, are left out.
    """
    found: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        path = _RULE_VARIABLE.sub(r"{\1}", rule.rule)
        found.setdefault(path, set()).update(m.lower() for m in rule.methods or ())
    return {path: methods - {"head", "options"} for path, methods in found.items()}


def _used(node: Any, schemas: dict[str, Any], seen: set[str]) -> set[str]:
    """Names of the component schemas ``node`` refers to, transitively."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            if name not in seen:
                seen.add(name)
                _used(schemas[name], schemas, seen)
        for value in node.values():
            _used(value, schemas, seen)
    elif isinstance(node, list):
        for value in node:
            _used(value, schemas, seen)
    return seen


def document(app: Flask) -> dict[str, Any]:
    """The part of :data:`OPENAPI` that ``app`` serves: its routes, the schemas and
    security schemes those use.

    Args:
        app: the collector alone, or the app of ``ldp serve``.

    Returns:
        A new OpenAPI document (the catalogue is not changed).
    """
    routed = app_paths(app)
    paths = {
        path: {
            key: value for key, value in item.items() if key not in _VERBS or key in routed[path]
        }
        for path, item in OPENAPI["paths"].items()
        if path in routed
    }
    schemas = OPENAPI["components"]["schemas"]
    used = _used(paths, schemas, set())
    schemes = {
        name
        for item in paths.values()
        for key, operation in item.items()
        if key in _VERBS
        for requirement in operation.get("security", [])
        for name in requirement
    }
    return {
        **OPENAPI,
        "paths": paths,
        "components": {
            "schemas": {name: schema for name, schema in schemas.items() if name in used},
            "securitySchemes": {
                name: scheme for name, scheme in _SECURITY_SCHEMES.items() if name in schemes
            },
        },
    }
