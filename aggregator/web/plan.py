"""The planning API behind the dashboard's tradeoff explorer: what N users buy at ε.

``GET /v1/plan?epsilon=E&k=K&users=N`` (or ``&width=W``) answers :func:`plan`'s table:
the 95 % half-width every mechanism gives N users, or the users each needs for a
half-width W, with central Laplace as the trusted-curator reference::

    {"epsilon", "k", "confidence", "users" | "width", "auto", "fake_fraction",
     "rows": [{"mechanism", "variance_star", "wire_bytes", "half_width", "users", "auto",
               "max_gain"}]}

``max_gain`` is each mechanism's robustness, the explorer's fourth axis: how far fake
clients sending ``fake_fraction`` (default 1 %) of the reports move one value's estimate
with the maximal gain attack (:func:`aggregator.stats.robustness.max_gain`).

``GET /v1/plan/curve?epsilon=E&k=K`` gives the half-width as a function of N on a
logarithmic grid, per mechanism (``&mechanism=NAME`` marks, and adds if needed, the one a
metric uses)::

    {"epsilon", "k", "confidence", "n": [...],
     "curves": [{"mechanism", "half_width": [...], "auto", "current", "central"}]}

Both take ``&matrix=[[…], …]`` (JSON, k×k, rows the true value): a pram mechanism with
that transition matrix is planned beside the others, at the ε its matrix realises (the
ε asked for does not change it; ``auto`` never picks it), and ``&mechanism=pram`` marks
its curve.

The numbers come from the mechanisms' own ``variance`` (the SDK's objects, as the
aggregator's intervals do) and :mod:`aggregator.stats.planning`; the browser only plots them.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from flask import Blueprint, request
from werkzeug.exceptions import BadRequest

from aggregator.stats.planning import half_width_curves, plan
from aggregator.stats.robustness import DEFAULT_FAKE_FRACTION
from aggregator.web.access import UNAUTHORIZED, documented_read
from aggregator.web.models import (
    CURVE_MECHANISMS,
    DEFAULT_CONFIDENCE,
    DEFAULT_GRID,
    MAX_CONFIDENCE,
    MAX_N,
    MAX_POINTS,
    MIN_CONFIDENCE,
    MIN_N,
    MIN_WIDTH,
    Curve,
    CurveQuery,
    Curves,
    Plan,
    PlannedMechanism,
    PlanQuery,
)
from client_sdk import mechanisms
from client_sdk.mechanisms import FrequencyOracle
from ldp_api.models import Error, answer
from ldp_api.openapi import Reply

__all__ = ["MAX_MATRIX_QUERY", "bp", "n_grid"]

MAX_MATRIX_QUERY = 8192
"""Longest ``matrix`` query value: a 16×16 matrix of 4-decimal entries with room to
spare, within what proxies pass in a URL (8 KiB lines are common limits); a larger
matrix is planned from its metric's page, where the definition carries it."""

bp = Blueprint("plan", __name__)


def _number(name: str, default: float | None = None) -> float:
    raw = request.args.get(name)
    if raw is None:
        if default is None:
            raise BadRequest(f"{name} is required")
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number, got {raw[:40]!r}") from None
    if not math.isfinite(value):
        raise BadRequest(f"{name} must be finite, got {raw[:40]!r}")
    return value


def _common() -> tuple[float, int, float]:
    epsilon = _number("epsilon")
    if not mechanisms.MIN_EPSILON <= epsilon <= mechanisms.MAX_EPSILON:
        raise BadRequest(
            f"epsilon must be in [{mechanisms.MIN_EPSILON}, {mechanisms.MAX_EPSILON}], "
            f"got {epsilon:g}"
        )
    k = _number("k")
    if k != int(k) or not 2 <= k <= mechanisms.MAX_DOMAIN_SIZE:
        raise BadRequest(f"k must be an integer in [2, {mechanisms.MAX_DOMAIN_SIZE}], got {k:g}")
    confidence = _number("confidence", DEFAULT_CONFIDENCE)
    if not MIN_CONFIDENCE <= confidence <= MAX_CONFIDENCE:
        raise BadRequest(
            f"confidence must be in [{MIN_CONFIDENCE}, {MAX_CONFIDENCE}], got {confidence:g}"
        )
    return epsilon, int(k), confidence


@bp.get("/v1/plan")
@documented_read(
    "The half-width each mechanism gives N users, or the users each needs for a "
    "half-width; central Laplace as the trusted-curator reference.",
    {
        200: Reply("One row per mechanism.", Plan),
        400: Reply("A missing or bad parameter, or both or neither of users/width.", Error),
        401: UNAUTHORIZED,
    },
    description="Give exactly one of users and width.",
    query=PlanQuery,
)
def get_plan() -> dict[str, Any]:
    """Half-widths for ``users`` users, or users for a half-width ``width``."""
    epsilon, k, confidence = _common()
    has_users, has_width = "users" in request.args, "width" in request.args
    if has_users == has_width:
        raise BadRequest("give exactly one of users and width")
    users: int | None = None
    width: float | None = None
    if has_users:
        value = _number("users")
        if value != int(value) or not MIN_N <= value <= MAX_N:
            raise BadRequest(f"users must be an integer in [1, {MAX_N:.0e}], got {value:g}")
        users = int(value)
    else:
        width = _number("width")
        if not MIN_WIDTH <= width < 1.0:
            raise BadRequest(
                f"width must be in [{MIN_WIDTH:g}, 1) (a fraction: 0.01 is ±1 %), got {width:g}"
            )
    fake_fraction = _number("fake_fraction", DEFAULT_FAKE_FRACTION)
    if not 0.0 < fake_fraction < 1.0:
        raise BadRequest(
            f"fake_fraction must be in (0, 1) (a fraction: 0.01 is 1 % of the reports), "
            f"got {fake_fraction:g}"
        )
    rows = plan(
        epsilon,
        k,
        users=users,
        width=width,
        confidence=confidence,
        fake_fraction=fake_fraction,
        given=_given_pram(k),
    )
    asked: dict[str, Any] = {"users": users} if users is not None else {"width": width}
    body = Plan(
        epsilon=epsilon,
        k=k,
        confidence=confidence,
        **asked,
        auto=next((r.name for r in rows if r.auto), None),
        fake_fraction=fake_fraction,
        rows=[PlannedMechanism.copied(r, mechanism=r.name) for r in rows],
    )
    return answer(body)


@bp.get("/v1/plan/curve")
@documented_read(
    "The half-width against N on a log grid, per mechanism and for central Laplace.",
    {
        200: Reply("One curve per mechanism, then central Laplace.", Curves),
        400: Reply("A missing or bad parameter.", Error),
        401: UNAUTHORIZED,
    },
    query=CurveQuery,
)
def get_curve() -> dict[str, Any]:
    """The half-width against N on a log grid, per mechanism and for central Laplace."""
    epsilon, k, confidence = _common()
    n = n_grid()
    current = request.args.get("mechanism") or None
    if current is not None and current not in CURVE_MECHANISMS:
        raise BadRequest(f"mechanism must be one of {', '.join(CURVE_MECHANISMS)}")
    given = _given_pram(k)
    try:
        found = half_width_curves(epsilon, k, n, confidence, current, given)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    curves = [Curve.copied(c) for c in found]
    body = Curves(
        epsilon=epsilon, k=k, confidence=confidence, n=[float(x) for x in n], curves=curves
    )
    return answer(body)


def n_grid() -> np.ndarray:
    """The N axis of a curve: ``n_min``, ``n_max`` and ``points`` of the query (defaults
    :data:`~aggregator.web.models.DEFAULT_GRID`), a geometric grid.

    Raises:
        BadRequest: a bound outside [1, MAX_N], n_min ≥ n_max, or points not in
            [2, MAX_POINTS].
    """
    lo, hi, default_points = DEFAULT_GRID
    n_min, n_max = _number("n_min", lo), _number("n_max", hi)
    if not MIN_N <= n_min < n_max <= MAX_N:
        raise BadRequest(f"need 1 ≤ n_min < n_max ≤ {MAX_N:.0e}, got {n_min:g} and {n_max:g}")
    points = _number("points", default_points)
    if points != int(points) or not 2 <= points <= MAX_POINTS:
        raise BadRequest(f"points must be an integer in [2, {MAX_POINTS}], got {points:g}")
    return np.geomspace(n_min, n_max, int(points))


def _given_pram(k: int) -> FrequencyOracle | None:
    """The pram mechanism of ``&matrix=`` (JSON, k×k), or None when not given.

    Raises:
        BadRequest: not JSON, or a matrix pram refuses (the reason is its own).
    """
    text = request.args.get("matrix")
    if text is None:
        return None
    if len(text) > MAX_MATRIX_QUERY:
        raise BadRequest(f"matrix is longer than {MAX_MATRIX_QUERY} characters")
    try:
        matrix = json.loads(text)
    except ValueError:
        raise BadRequest("matrix must be JSON: [[p00, p01, …], [p10, …], …]") from None
    try:
        return mechanisms.create("pram", domain_size=k, matrix=matrix)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
