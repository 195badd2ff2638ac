"""Typed JSON shared by both services' answers; the base of every API model.

Every request and response body of the HTTP API is a pydantic model beside the view that
takes or answers it (``collector/models.py``, ``aggregator/web/models.py``). Views build
their answers from these models (:func:`answer`), and :mod:`ldp_api.openapi` generates
the document's schemas from the same classes, so the two cannot disagree. A field's
docstring is its description in the document; limits are the constants the code
enforces, imported, never repeated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, GetCoreSchemaHandler
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import CoreSchema, core_schema

from client_sdk import mechanisms
from client_sdk.device import MAX_DEVICE_EPSILON
from client_sdk.mechanisms.distribution import HaarHRR, HierarchicalHistogram
from client_sdk.mechanisms.joint import JointMechanism
from client_sdk.mechanisms.strings import StringSketch
from client_sdk.wire import (
    BUDGET_PERIODS,
    MAX_NAME_LENGTH,
    MAX_REPORTS_PER_PERIOD,
    MAX_RETENTION_SECONDS,
    MIN_RETENTION_SECONDS,
    NAME_PATTERN,
)
from ldp_store import projects

__all__ = [
    "Absent",
    "DeviceBudget",
    "DeviceEpsilonCap",
    "Error",
    "Mechanism",
    "MetricName",
    "MetricPath",
    "Model",
    "OneOf",
    "WindowRetention",
    "answer",
]


class Model(BaseModel):
    """The base of the API's models: immutable, no unknown fields, docstrings documented.

    An answer's fields are all required unless typed ``X | Absent`` with the default
    None: such a field is left out of the JSON when not given (see :func:`answer`) and
    is documented as optional, not as nullable. Unknown fields are refused when a model
    is built, so a view cannot send what its model does not say.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    closed: ClassVar[bool] = False
    """Whether the service refuses unknown fields in this object when a client sends it
    (documented as ``additionalProperties: false``). Answers stay open: fields may be
    added, and clients should ignore the ones they do not know."""

    @classmethod
    def copied(cls, source: object, **given: Any) -> Self:
        """The model of what the code computed: each field not in ``given`` from the
        attribute of the same name of ``source`` (a dataclass, or another model).

        Raises:
            AttributeError: ``source`` lacks one of the fields.
            pydantic.ValidationError: a value the field refuses.
        """
        taken = {name: getattr(source, name) for name in cls.model_fields if name not in given}
        return cls(**taken, **given)


Absent = SkipJsonSchema[None]
"""``int | Absent = None``: a field an answer may leave out (never sent as null)."""


class OneOf:
    """``Annotated[str, OneOf(names)]``: one of ``names``, checked and documented as an enum.

    For choices that the code keeps in a collection (mechanism names, budget periods),
    which ``Literal`` cannot take.
    """

    def __init__(self, values: Iterable[str]) -> None:
        self.values = tuple(values)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.literal_schema(list(self.values))


def answer(model: BaseModel) -> dict[str, Any]:
    """The JSON body of ``model``: its fields in declaration order, absent ones left out."""
    return model.model_dump(mode="json", exclude_unset=True)


MetricName = Annotated[
    str,
    Field(max_length=MAX_NAME_LENGTH, pattern=f"^(?:{NAME_PATTERN.pattern})$"),
    BeforeValidator(lambda v: projects.bare(v) if isinstance(v, str) else v),
]
"""A metric's name (:func:`client_sdk.wire.check_name`); a stored name loses its project
(``shop/signup`` is ``signup``), so no answer shows one and no body can name one."""


class MetricPath(Model):
    """The ``<name>`` of a metric's URL."""

    name: MetricName
    """A metric name: a-z, 0-9, '_', '.', '-', starting with a letter or digit."""


class Error(Model):
    """Every error answer: 4xx means the request will never succeed, 503 retry later."""

    error: str
    """One sentence for people."""
    details: list[str]
    """Every individual problem (e.g. one per rejected report); may be empty."""


class Mechanism(Model):
    """A mechanism's parameters (``params()``), enough to rebuild it exactly.

    Mechanisms with options add them (``g`` of olh, ``s`` of ss, ``permanent_epsilon``
    of the memoized ones).
    """

    model_config = ConfigDict(extra="allow")

    mechanism: Annotated[
        str,
        OneOf(
            [
                *mechanisms.MECHANISMS,
                *mechanisms.NUMERIC_MECHANISMS,
                StringSketch.name,
                JointMechanism.name,
                HierarchicalHistogram.name,
                HaarHRR.name,
            ]
        ),
    ]
    epsilon: Annotated[float, Field(ge=mechanisms.MIN_EPSILON, le=mechanisms.MAX_EPSILON)]
    """ε per report."""
    domain_size: int | Absent = None
    """k, for a categorical metric's mechanism."""


Seconds = Annotated[int, Field(ge=MIN_RETENTION_SECONDS, le=MAX_RETENTION_SECONDS)]


class WindowRetention(Model):
    """Seconds a metric's hour and day windows are kept after they end (null: the
    deployment's default, ``LDP_RETENTION_HOUR_SECONDS`` / ``LDP_RETENTION_DAY_SECONDS``)."""

    closed = True

    hour: Seconds | None = None
    day: Seconds | None = None


class DeviceEpsilonCap(Model):
    """The device-wide caps on the total ε one device spends over all metrics
    (``LDP_DEVICE_EPSILON_PER_DAY``, ``LDP_DEVICE_EPSILON_LIFETIME``; null: no cap).
    Devices apply the stricter of these and their app's own (``client_sdk.device``)."""

    closed = True

    epsilon_per_day: Annotated[float, Field(gt=0, le=MAX_DEVICE_EPSILON)] | None = None
    """Per UTC day."""
    epsilon_lifetime: Annotated[float, Field(gt=0, le=MAX_DEVICE_EPSILON)] | None = None
    """Over the device's lifetime."""


class DeviceBudget(Model):
    """A device-side limit: at most ``reports_per_period`` reports per period."""

    closed = True

    reports_per_period: Annotated[int, Field(ge=1, le=MAX_REPORTS_PER_PERIOD)]
    period: Annotated[str, OneOf(BUDGET_PERIODS)]
    """UTC calendar days, ISO weeks (from Monday) or calendar months."""
