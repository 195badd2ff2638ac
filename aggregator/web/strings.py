"""String metrics' planning APIs, and the pieces of the estimates API that are HTTP's.

``GET /v1/plan/strings`` and ``…/curve``: what a string metric can find
(:mod:`aggregator.stats.string_planning`). For ``GET /v1/estimates/<name>`` of a string
metric, :func:`parse_candidates` reads ``?candidates=a,b,c``; the answer itself is
:class:`aggregator.query.estimators.StringEstimator`'s, its discovery run through
:mod:`aggregator.web.read_guard`, whose cache :func:`overview_alarms` reads for the
overview. See docs/concepts/strings.md.
"""

from __future__ import annotations

import numpy as np
from flask import Blueprint, request
from werkzeug.exceptions import BadRequest

from aggregator.stats.detect import Alarm, detect_sketch
from aggregator.stats.string_planning import collision_floor, detectable_curve, string_plan
from aggregator.web.access import UNAUTHORIZED, documented_read
from aggregator.web.models import (
    MAX_CANDIDATES,
    MAX_CANDIDATES_QUERY,
    MAX_N,
    StringCurve,
    StringCurveQuery,
    StringPlan,
    StringPlanQuery,
)
from aggregator.web.plan import n_grid
from aggregator.web.read_guard import cached
from client_sdk.mechanisms.strings import StringSketch
from client_sdk.wire import MetricDefinition
from ldp_api.models import Error, answer
from ldp_api.openapi import Reply

__all__ = ["bp", "overview_alarms", "parse_candidates"]

bp = Blueprint("strings", __name__)


def parse_candidates(raw: str | None) -> list[str]:
    """The values of ``?candidates=a,b,c`` (empty ones dropped).

    Raises:
        ValueError: more than :data:`MAX_CANDIDATES` values or
            :data:`~aggregator.web.models.MAX_CANDIDATES_QUERY` characters, or a NUL.
    """
    if not raw:
        return []
    values = [v for v in raw.split(",") if v]
    if len(values) > MAX_CANDIDATES:
        raise ValueError(f"at most {MAX_CANDIDATES} candidates, got {len(values)}")
    if len(raw) > MAX_CANDIDATES_QUERY:
        raise ValueError(f"at most {MAX_CANDIDATES_QUERY} characters, got {len(raw)}")
    if any("\x00" in v for v in values):
        raise ValueError("a candidate must not contain NUL")
    return values


def overview_alarms(definition: MetricDefinition, alpha: float) -> tuple[list[Alarm], list[str]]:
    """The all-time window's alarms as the overview shows them, without a discovery of its
    own (about a second of CPU): those of the discovery this process last made for it
    (:func:`~aggregator.web.read_guard.cached`), with its discovered values' labels; none
    when it has made none.

    Args:
        definition: a string metric version.
        alpha: the false-alarm rate per window.
    """
    hit = cached((definition.name, definition.version, "all"))
    if hit is None:
        return [], []
    found, est = hit
    return detect_sketch(est, "all", found.values, found.known, alpha), found.labels


def _arg(name: str, default: float | None = None) -> float | None:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number, got {raw[:40]!r}") from None
    if not np.isfinite(value):
        raise BadRequest(f"{name} must be a finite number")
    return value


def _planned() -> tuple[float, int, float, float]:
    """ε, max_length, concentration and power of a planning query, checked.

    Raises:
        BadRequest: a missing or bad parameter.
    """
    epsilon = _arg("epsilon")
    if epsilon is None:
        raise BadRequest("epsilon is required")
    length = _arg("max_length", 16.0)
    assert length is not None
    if length != int(length) or not 1 <= length <= 64:
        raise BadRequest(f"max_length must be an integer in [1, 64], got {length:g}")
    concentration = _arg("concentration", 0.0)
    power = _arg("power", 0.5)
    assert concentration is not None and power is not None
    if not 0 <= concentration <= 1:
        raise BadRequest(f"concentration must be in [0, 1], got {concentration:g}")
    if not 0.01 <= power <= 0.99:
        raise BadRequest(f"power must be in [0.01, 0.99], got {power:g}")
    try:
        StringSketch(epsilon=epsilon, max_length=int(length))
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return epsilon, int(length), concentration, power


@bp.get("/v1/plan/strings")
@documented_read(
    "What a string metric can find: the frequency N users find, or the users needed to "
    "find values of a frequency.",
    {
        200: Reply("The answer (users null: no number of users suffices).", StringPlan),
        400: Reply("A missing or bad parameter, or both or neither of users/frequency.", Error),
        401: UNAUTHORIZED,
    },
    description="Give exactly one of users and frequency.",
    query=StringPlanQuery,
)
def get_string_plan() -> dict[str, object]:
    """The frequency ``users`` find, or the users a ``frequency`` needs."""
    epsilon, length, concentration, power = _planned()
    users, frequency = _arg("users"), _arg("frequency")
    if (users is None) == (frequency is None):
        raise BadRequest("give exactly one of users and frequency")
    if users is not None and (users != int(users) or not 1 <= users <= MAX_N):
        raise BadRequest(f"users must be an integer in [1, {MAX_N:.0e}], got {users:g}")
    if frequency is not None and not 0 < frequency < 1:
        raise BadRequest(f"frequency must be in (0, 1), got {frequency:g}")
    found = string_plan(
        epsilon,
        length,
        None if users is None else int(users),
        frequency,
        concentration,
        power,
    )
    return answer(StringPlan(**found.to_dict()))


@bp.get("/v1/plan/strings/curve")
@documented_read(
    "The frequency N users find against N on a log grid, down to the collision floor: "
    "the explorer's string mode.",
    {
        200: Reply("The detectable frequency at each N.", StringCurve),
        400: Reply("A missing or bad parameter.", Error),
        401: UNAUTHORIZED,
    },
    query=StringCurveQuery,
)
def get_string_curve() -> dict[str, object]:
    """The frequency found with probability ``power`` at each N of a geometric grid."""
    epsilon, length, concentration, power = _planned()
    n = n_grid()
    sketch = StringSketch(epsilon=epsilon, max_length=length)
    body = StringCurve(
        epsilon=sketch.epsilon,
        max_length=length,
        rows=sketch.rows,
        cells=sketch.cells,
        concentration=concentration,
        power=power,
        floor=collision_floor(sketch, concentration, power=power),
        n=[float(x) for x in n],
        frequency=detectable_curve(sketch, n, concentration, power=power),
    )
    return answer(body)
