"""The table of metric kinds: which codec decodes a mechanism's reports.

Above every codec (frequency, numeric, string, joint, distribution), so none of them imports another
through it: a new kind adds its codec here, and
:func:`aggregator.query.estimators.estimator_for` reads the same table. Where each kind's
code lives: ``docs/architecture/layout.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from aggregator.stats.codecs import Counts, FrequencyCodec, frequency_codec
from aggregator.stats.distribution_codec import HaarCodec, HistogramCodec
from aggregator.stats.joint_codec import JointCodec
from aggregator.stats.numeric import NumericCodec
from aggregator.stats.strings import StringCodec
from client_sdk.mechanisms import FrequencyOracle, NumericMechanism
from client_sdk.mechanisms.distribution import HierarchicalHistogram
from client_sdk.mechanisms.haar import HaarHRR
from client_sdk.mechanisms.joint import JointMechanism
from client_sdk.mechanisms.strings import StringSketch

__all__ = ["KINDS", "codec_for", "count_payloads", "kind_of"]

KINDS: tuple[tuple[str, type[Any], type[Any]], ...] = (
    ("numeric", NumericMechanism, NumericCodec),
    ("string", StringSketch, StringCodec),
    ("joint", JointMechanism, JointCodec),
    ("distribution", HierarchicalHistogram, HistogramCodec),
    ("distribution", HaarHRR, HaarCodec),
)
"""(kind, mechanism class, codec class) of each kind beside the frequency oracles, whose
codec :func:`aggregator.stats.codecs.frequency_codec` picks by oracle."""


def kind_of(mechanism: Any) -> str:
    """The metric kind a mechanism object belongs to: ``frequency`` unless listed in
    :data:`KINDS`."""
    return next((kind for kind, cls, _ in KINDS if isinstance(mechanism, cls)), "frequency")


@overload
def codec_for(mechanism: FrequencyOracle) -> FrequencyCodec: ...
@overload
def codec_for(mechanism: NumericMechanism) -> NumericCodec: ...
@overload
def codec_for(mechanism: StringSketch) -> StringCodec: ...
@overload
def codec_for(mechanism: JointMechanism) -> JointCodec: ...
@overload
def codec_for(mechanism: HierarchicalHistogram) -> HistogramCodec: ...
@overload
def codec_for(mechanism: HaarHRR) -> HaarCodec: ...
@overload
def codec_for(
    mechanism: FrequencyOracle
    | NumericMechanism
    | StringSketch
    | JointMechanism
    | HierarchicalHistogram
    | HaarHRR,
) -> FrequencyCodec | NumericCodec | StringCodec | JointCodec | HistogramCodec | HaarCodec: ...
def codec_for(
    mechanism: FrequencyOracle
    | NumericMechanism
    | StringSketch
    | JointMechanism
    | HierarchicalHistogram
    | HaarHRR,
) -> FrequencyCodec | NumericCodec | StringCodec | JointCodec | HistogramCodec | HaarCodec:
    """The batch codec of a mechanism object, of any kind.

    Raises:
        TypeError: a mechanism without a codec.
    """
    for _, cls, codec in KINDS:
        if isinstance(mechanism, cls):
            return codec(mechanism)
    return frequency_codec(mechanism)  # type: ignore[arg-type]


def count_payloads(mechanism: FrequencyOracle, payloads: Sequence[Any]) -> Counts:
    """Validate and decode a batch of payloads into additive :class:`Counts`."""
    return frequency_codec(mechanism).decode(payloads)
