"""The OpenAPI description of the read APIs ``ldp serve`` mounts on the collector.

Estimates, trends, overview and planning (:mod:`aggregator.web.estimates`,
:mod:`aggregator.web.status`, :mod:`aggregator.web.plan`). Their limits are repeated in
:data:`READ_LIMITS` (importing the aggregator would load numpy and scipy into the
collector) and pinned to its constants by ``tests/collector``.
"""

from __future__ import annotations

from typing import Any

from client_sdk import mechanisms
from client_sdk.wire import BUDGET_PERIODS
from collector.openapi_base import NAME_PARAMETER as _NAME
from collector.openapi_base import UNAVAILABLE as _UNAVAILABLE
from collector.openapi_base import error as _error
from collector.openapi_base import json_body as _json
from collector.openapi_base import ref as _ref
from ldp_store import schema

__all__ = ["READ_LIMITS", "READ_PATHS", "READ_SCHEMAS"]

READ_LIMITS: dict[str, Any] = {
    "window_pattern": schema.WINDOW_REGEX,
    "max_trend_windows": 24 * 14,
    "max_points": 400,
    "min_n": 1.0,
    "max_n": 1e12,
    "default_grid": (1e2, 1e8, 61),
}
"""The aggregator's own limits (``aggregator.web.estimates``, ``aggregator.web.plan``), as
documented."""


def _nullable(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **more}


_READ_SECURITY: list[dict[str, list[str]]] = [{"readToken": []}, {"readTokenBasic": []}]
"""Needed only when LDP_READ_TOKEN is set (else reads are open); see the schemes."""

_UNAUTHORIZED = {
    **_error("LDP_READ_TOKEN is set and no valid read (or admin) token was sent."),
    "headers": {
        "WWW-Authenticate": {
            "description": 'Bearer realm="ldp-telemetry", then a Basic challenge of the '
            "same realm (for the dashboard's pages).",
            "schema": {"type": "string"},
        }
    },
}

_STORAGE = {**_UNAVAILABLE, "description": "Redis is unavailable; retry after Retry-After s."}

_VERSION = {
    "name": "version",
    "in": "query",
    "description": "A version of the metric (default: the current one).",
    "schema": {"type": "integer", "minimum": 1},
}

_CONFIDENCE = {
    "name": "confidence",
    "in": "query",
    "description": "The intervals' level.",
    "schema": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.95},
}

_SIMULTANEOUS = {
    "name": "simultaneous",
    "in": "query",
    "description": "Intervals that hold for every value at once (Bonferroni): 1, true or "
    "yes (any case) mean true, anything else false. Ignored for numeric metrics.",
    "schema": {"type": "string", "default": "false"},
}

_EPSILON = {
    "name": "epsilon",
    "in": "query",
    "required": True,
    "description": "ε per report.",
    "schema": {
        "type": "number",
        "minimum": mechanisms.MIN_EPSILON,
        "maximum": mechanisms.MAX_EPSILON,
    },
}

_K = {
    "name": "k",
    "in": "query",
    "required": True,
    "description": "The domain size.",
    "schema": {"type": "integer", "minimum": 2, "maximum": mechanisms.MAX_DOMAIN_SIZE},
}

_PLAN_CONFIDENCE = {**_CONFIDENCE, "description": "The half-widths' level."}

_NUMBER_OR_NULL = _nullable("number", description="null when n is 0 (no estimate).")

READ_SCHEMAS: dict[str, Any] = {
    "EstimateRow": {
        "type": "object",
        "required": [
            "value",
            "frequency",
            "std_error",
            "ci_low",
            "ci_high",
            "norm_sub",
            "support_count",
            "distinguishable_from_zero",
        ],
        "properties": {
            "value": {"type": "string", "description": "One value of the domain."},
            "frequency": {**_NUMBER_OR_NULL, "description": "Unbiased (can leave [0, 1])."},
            "std_error": _NUMBER_OR_NULL,
            "ci_low": _NUMBER_OR_NULL,
            "ci_high": _NUMBER_OR_NULL,
            "norm_sub": {
                **_NUMBER_OR_NULL,
                "description": "Projected onto the probability simplex (Norm-Sub): "
                "post-processed and biased, for display.",
            },
            "support_count": {"type": "integer", "minimum": 0},
            "distinguishable_from_zero": _nullable(
                "boolean", description="Whether the interval excludes 0; null when n is 0."
            ),
        },
    },
    "Estimates": {
        "type": "object",
        "description": "A categorical metric's frequencies in one window.",
        "required": [
            "metric",
            "version",
            "mechanism",
            "epsilon",
            "mechanism_params",
            "n",
            "confidence",
            "simultaneous",
            "window",
            "post_processing",
            "estimates",
        ],
        "properties": {
            "metric": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "mechanism": {"type": "string", "enum": list(mechanisms.MECHANISMS)},
            "epsilon": {"type": "number"},
            "mechanism_params": _ref("Mechanism"),
            "n": {"type": "integer", "minimum": 0, "description": "Reports counted."},
            "confidence": {"type": "number"},
            "simultaneous": {"type": "boolean"},
            "window": {"type": "string"},
            "post_processing": {"type": "string"},
            "estimates": {
                "type": "array",
                "description": "One row per domain value, in the domain's order.",
                "items": _ref("EstimateRow"),
            },
        },
    },
    "NumericEstimate": {
        "type": "object",
        "description": "A numeric metric's mean in one window, in the metric's units.",
        "required": [
            "metric",
            "version",
            "kind",
            "mechanism",
            "epsilon",
            "mechanism_params",
            "n",
            "confidence",
            "window",
            "range",
            "mean",
            "std_error",
            "ci_low",
            "ci_high",
            "std_error_worst_case",
            "mean_clipped",
            "post_processing",
        ],
        "properties": {
            "metric": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "kind": {"const": "numeric"},
            "mechanism": {"type": "string", "enum": list(mechanisms.NUMERIC_MECHANISMS)},
            "epsilon": {"type": "number"},
            "mechanism_params": _ref("Mechanism"),
            "n": {"type": "integer", "minimum": 0},
            "confidence": {"type": "number"},
            "window": {"type": "string"},
            "range": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
            "mean": {**_NUMBER_OR_NULL, "description": "Unbiased (can leave the range)."},
            "std_error": _NUMBER_OR_NULL,
            "ci_low": _NUMBER_OR_NULL,
            "ci_high": _NUMBER_OR_NULL,
            "std_error_worst_case": _NUMBER_OR_NULL,
            "mean_clipped": {
                **_NUMBER_OR_NULL,
                "description": "The mean clipped into the range: post-processed, biased.",
            },
            "post_processing": {"type": "string"},
        },
    },
    "Trend": {
        "type": "object",
        "required": ["metric", "version", "granularity", "confidence", "windows"],
        "properties": {
            "metric": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "granularity": {"type": "string", "enum": ["hour", "day"]},
            "confidence": {"type": "number"},
            "windows": {
                "type": "array",
                "maxItems": READ_LIMITS["max_trend_windows"],
                "description": "The newest windows with counts (at most two weeks of "
                "hours), oldest first.",
                "items": {"oneOf": [_ref("TrendPoint"), _ref("NumericTrendPoint")]},
            },
        },
    },
    "TrendPoint": {
        "type": "object",
        "description": "A categorical metric's estimates in one window.",
        "required": ["window", "n", "estimates"],
        "properties": {
            "window": {"type": "string"},
            "n": {"type": "integer", "minimum": 0},
            "estimates": {"type": "array", "items": _ref("EstimateRow")},
        },
    },
    "NumericTrendPoint": {
        "type": "object",
        "description": "A numeric metric's mean in one window.",
        "required": ["window", "n", "mean", "std_error", "ci_low", "ci_high"],
        "properties": {
            "window": {"type": "string"},
            "n": {"type": "integer", "minimum": 0},
            "mean": _NUMBER_OR_NULL,
            "std_error": _NUMBER_OR_NULL,
            "ci_low": _NUMBER_OR_NULL,
            "ci_high": _NUMBER_OR_NULL,
        },
    },
    "OverviewRow": {
        "type": "object",
        "description": "A metric's current version at a glance.",
        "required": [
            "name",
            "version",
            "kind",
            "description",
            "mechanism",
            "mechanism_params",
            "mechanism_reason",
            "epsilon",
            "k",
            "range",
            "budget",
            "epsilon_per_period",
            "period",
            "longitudinal",
            "permanent_epsilon",
            "n",
            "last_window",
            "lag",
        ],
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "kind": {"type": "string", "enum": ["categorical", "numeric"]},
            "description": {"type": "string"},
            "mechanism": _nullable("string"),
            "mechanism_params": {"type": "object"},
            "mechanism_reason": {"type": "string"},
            "epsilon": _nullable("number", description="ε per report."),
            "k": _nullable("integer", description="Domain size; null for numeric metrics."),
            "range": _nullable(
                "array",
                items={"type": "number"},
                description="A numeric metric's [lo, hi]; null for categorical ones.",
            ),
            "budget": {
                "oneOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "required": ["reports_per_period", "period"],
                        "properties": {
                            "reports_per_period": {"type": "integer", "minimum": 1},
                            "period": {"type": "string", "enum": list(BUDGET_PERIODS)},
                        },
                    },
                ]
            },
            "epsilon_per_period": _nullable(
                "number", description="reports_per_period × ε, when there is a budget."
            ),
            "period": _nullable("string", enum=[*BUDGET_PERIODS, None]),
            "longitudinal": {"type": "boolean", "description": "Memoized responses."},
            "permanent_epsilon": _nullable(
                "number", description="ε∞: what a device ever reveals about one value."
            ),
            "n": {"type": "integer", "minimum": 0, "description": "Reports counted, all time."},
            "last_window": _nullable(
                "string", description="The newest hour (else day) window with counts."
            ),
            "lag": {
                "type": "object",
                "required": ["length", "pending"],
                "properties": {
                    "length": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Reports in the streams, not yet counted.",
                    },
                    "pending": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Of those, read by a worker but not yet acked.",
                    },
                },
            },
        },
    },
    "Plan": {
        "type": "object",
        "description": "Either users (then rows give half-widths) or width (then rows give "
        "the users each mechanism needs).",
        "required": ["epsilon", "k", "confidence", "auto", "rows"],
        "properties": {
            "epsilon": {"type": "number"},
            "k": {"type": "integer"},
            "confidence": {"type": "number"},
            "users": {"type": "integer"},
            "width": {"type": "number"},
            "auto": _nullable("string", description="The mechanism 'auto' picks."),
            "rows": {
                "type": "array",
                "description": "Every mechanism, best first, then central Laplace.",
                "items": _ref("PlanRow"),
            },
        },
        "oneOf": [{"required": ["users"]}, {"required": ["width"]}],
    },
    "PlanRow": {
        "type": "object",
        "required": ["mechanism", "variance_star", "wire_bytes", "half_width", "users", "auto"],
        "properties": {
            "mechanism": {"type": "string"},
            "variance_star": _nullable("number", description="null for central Laplace."),
            "wire_bytes": _nullable("integer", description="null for central Laplace."),
            "half_width": {"type": "number"},
            "users": {"type": "integer", "minimum": 1},
            "auto": {"type": "boolean"},
        },
    },
    "Curves": {
        "type": "object",
        "required": ["epsilon", "k", "confidence", "n", "curves"],
        "properties": {
            "epsilon": {"type": "number"},
            "k": {"type": "integer"},
            "confidence": {"type": "number"},
            "n": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 2,
                "maxItems": READ_LIMITS["max_points"],
                "description": "The N axis: a geometric grid from n_min to n_max.",
            },
            "curves": {"type": "array", "items": _ref("Curve")},
        },
    },
    "Curve": {
        "type": "object",
        "required": ["mechanism", "half_width", "auto", "current", "central"],
        "properties": {
            "mechanism": {"type": "string"},
            "half_width": {
                "type": "array",
                "items": {"type": "number"},
                "description": "The half-width at each N.",
            },
            "auto": {"type": "boolean"},
            "current": {"type": "boolean", "description": "The mechanism asked for."},
            "central": {"type": "boolean", "description": "Central Laplace (a reference)."},
        },
    },
}

_CSV = {
    "description": "With format=csv: one row per value (categorical: metric, version, "
    "window, n, confidence, value, frequency, std_error, ci_low, ci_high, norm_sub, "
    "support_count) or a single row (numeric: metric, version, window, n, confidence, "
    "range_low, range_high, mean, std_error, ci_low, ci_high); empty cells for null.",
    "schema": {"type": "string"},
}

READ_PATHS: dict[str, Any] = {
    "/v1/estimates/{name}": {
        "parameters": [_NAME],
        "get": {
            "summary": "A metric's estimates with intervals in one window, as JSON or CSV.",
            "description": "Computed from the counts in Redis on each request. Categorical "
            "metrics answer Estimates, numeric ones NumericEstimate (its kind is numeric).",
            "security": _READ_SECURITY,
            "parameters": [
                _VERSION,
                {
                    "name": "window",
                    "in": "query",
                    "description": "all, an hour (hour:YYYY-MM-DDTHH) or a day "
                    "(day:YYYY-MM-DD), UTC.",
                    "schema": {
                        "type": "string",
                        "pattern": f"^(?:{READ_LIMITS['window_pattern']})$",
                        "default": "all",
                    },
                },
                _CONFIDENCE,
                _SIMULTANEOUS,
                {
                    "name": "format",
                    "in": "query",
                    "schema": {"type": "string", "enum": ["json", "csv"], "default": "json"},
                },
            ],
            "responses": {
                "200": {
                    "description": "The estimates.",
                    "headers": {
                        "Content-Disposition": {
                            "description": 'CSV only: attachment; filename="<metric>-v'
                            '<version>-<window>.csv"',
                            "schema": {"type": "string"},
                        }
                    },
                    "content": {
                        "application/json": {
                            "schema": {"oneOf": [_ref("Estimates"), _ref("NumericEstimate")]}
                        },
                        "text/csv": _CSV,
                    },
                },
                "400": _error("A bad version, window, confidence or format."),
                "401": _UNAUTHORIZED,
                "404": _error("No such metric or version."),
                "503": _STORAGE,
            },
        },
    },
    "/v1/estimates/{name}/trend": {
        "parameters": [_NAME],
        "get": {
            "summary": "One estimate per hour or day window, oldest first.",
            "security": _READ_SECURITY,
            "parameters": [
                _VERSION,
                {
                    "name": "granularity",
                    "in": "query",
                    "schema": {"type": "string", "enum": ["hour", "day"], "default": "hour"},
                },
                _CONFIDENCE,
                _SIMULTANEOUS,
            ],
            "responses": {
                "200": _json(_ref("Trend"), "The windows."),
                "400": _error("A bad version, granularity or confidence."),
                "401": _UNAUTHORIZED,
                "404": _error("No such metric or version."),
                "503": _STORAGE,
            },
        },
    },
    "/v1/overview": {
        "get": {
            "summary": "Every metric's current version: definition, n, last window, lag.",
            "security": _READ_SECURITY,
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["metrics"],
                        "properties": {"metrics": {"type": "array", "items": _ref("OverviewRow")}},
                    },
                    "One row per metric.",
                ),
                "401": _UNAUTHORIZED,
                "503": _STORAGE,
            },
        }
    },
    "/v1/plan": {
        "get": {
            "summary": "The 95 % half-width each mechanism gives N users, or the users each "
            "needs for a half-width; central Laplace as the trusted-curator reference.",
            "description": "Give exactly one of users and width.",
            "security": _READ_SECURITY,
            "parameters": [
                _EPSILON,
                _K,
                _PLAN_CONFIDENCE,
                {
                    "name": "users",
                    "in": "query",
                    "schema": {
                        "type": "integer",
                        "minimum": READ_LIMITS["min_n"],
                        "maximum": READ_LIMITS["max_n"],
                    },
                },
                {
                    "name": "width",
                    "in": "query",
                    "description": "A target half-width, as a fraction (0.01 is ±1 %).",
                    "schema": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                },
            ],
            "responses": {
                "200": _json(_ref("Plan"), "One row per mechanism."),
                "400": _error("A missing or bad parameter, or both or neither of users/width."),
                "401": _UNAUTHORIZED,
            },
        }
    },
    "/v1/plan/curve": {
        "get": {
            "summary": "The half-width against N on a log grid, per mechanism and for "
            "central Laplace.",
            "security": _READ_SECURITY,
            "parameters": [
                _EPSILON,
                _K,
                _PLAN_CONFIDENCE,
                {
                    "name": "n_min",
                    "in": "query",
                    "description": "Needs min ≤ n_min < n_max.",
                    "schema": {
                        "type": "number",
                        "minimum": READ_LIMITS["min_n"],
                        "default": READ_LIMITS["default_grid"][0],
                    },
                },
                {
                    "name": "n_max",
                    "in": "query",
                    "schema": {
                        "type": "number",
                        "maximum": READ_LIMITS["max_n"],
                        "default": READ_LIMITS["default_grid"][1],
                    },
                },
                {
                    "name": "points",
                    "in": "query",
                    "schema": {
                        "type": "integer",
                        "minimum": 2,
                        "maximum": READ_LIMITS["max_points"],
                        "default": READ_LIMITS["default_grid"][2],
                    },
                },
                {
                    "name": "mechanism",
                    "in": "query",
                    "description": "Mark this curve as current (added if not planned).",
                    "schema": {"type": "string", "enum": list(mechanisms.MECHANISMS)},
                },
            ],
            "responses": {
                "200": _json(_ref("Curves"), "One curve per mechanism, then central Laplace."),
                "400": _error("A missing or bad parameter."),
                "401": _UNAUTHORIZED,
            },
        }
    },
}
