"""One codec protocol: every metric kind parses, decodes and commits the same way.

The worker, the firehose and the tools see frequency and numeric codecs through
:class:`aggregator.stats.batch.Codec` only; these tests hold every codec to it, and hold
its increments to the storage schema that the counts readers use.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from aggregator.query.estimators import BY_KIND
from aggregator.stats.batch import Batch, Codec
from aggregator.stats.codecs import FrequencyCodec
from aggregator.stats.kinds import KINDS, codec_for
from aggregator.stats.numeric import NumericCodec, NumericStats
from client_sdk.mechanisms import NUMERIC_NAMES, create, create_numeric
from ldp_store import schema

FREQUENCY = [("rr", 2), ("grr", 12), ("sue", 9), ("oue", 33), ("olh", 40), ("hr", 15), ("ss", 20)]


def hincrby(increments: schema.Increments) -> dict[str, int]:
    """What HINCRBY of a batch's commit fields leaves in an empty hash."""
    pairs = schema.increment_fields(increments)
    fields: Counter[str] = Counter()
    for field, increment in zip(pairs[::2], pairs[1::2], strict=True):
        assert isinstance(field, str) and isinstance(increment, int)
        fields[field] += increment
    return dict(fields)


@pytest.mark.parametrize(("name", "k"), FREQUENCY)
def test_frequency_codecs_commit_what_they_decode(name: str, k: int) -> None:
    m = create(name, epsilon=1.0, domain_size=k)
    codec = codec_for(m)
    assert isinstance(codec, FrequencyCodec) and isinstance(codec, Codec)
    rng = random.Random(7)
    payloads = [m.perturb(rng.randrange(k), rng) for _ in range(500)]
    counts = codec.decode(payloads)
    fields = hincrby(codec.increments(codec.parse(payloads)))
    assert fields.pop(schema.N) == counts.n == 500
    support = np.zeros(k, dtype=np.int64)
    for field, value in fields.items():
        kind, v = schema.parse_field(field)
        assert kind == "c" and value > 0  # only nonzero counts are written
        support[v] = value
    np.testing.assert_array_equal(support, counts.support)


@pytest.mark.parametrize("name", [n for n in NUMERIC_NAMES if n != "auto"])
def test_numeric_codecs_commit_what_they_decode(name: str) -> None:
    m = create_numeric(name, epsilon=0.5)
    codec = codec_for(m)
    assert isinstance(codec, NumericCodec) and isinstance(codec, Codec)
    gen = np.random.default_rng(3)
    payloads = codec.to_payloads(codec.encode(gen.uniform(-1, 1, 400), gen))
    stats = codec.decode(payloads)
    assert stats.n == 400
    assert NumericStats.from_fields(hincrby(codec.increments(codec.parse(payloads)))) == stats


@pytest.mark.parametrize(("name", "k"), [*FREQUENCY, ("duchi", 0), ("pm", 0)])
def test_every_codec_round_trips_payloads_through_a_batch(name: str, k: int) -> None:
    m: Any = create_numeric(name, 1.0) if k == 0 else create(name, epsilon=1.0, domain_size=k)
    codec = codec_for(m)
    gen = np.random.default_rng(11)
    values = gen.uniform(-1, 1, 50) if k == 0 else gen.integers(0, k, 50)
    batch = codec.encode(values, gen)
    assert isinstance(batch, Batch) and batch.n == 50
    payloads = codec.to_payloads(batch)
    for payload in payloads:
        m.check_payload(payload)
    again = codec.parse(payloads)
    assert again.columns.keys() == batch.columns.keys()
    for column in batch.columns:
        np.testing.assert_array_equal(again.columns[column], batch.columns[column])
    rows = np.array([3, 1, 4])
    taken = batch.take(rows)
    assert taken.n == 3
    for column in batch.columns:
        np.testing.assert_array_equal(taken.columns[column], batch.columns[column][rows])


def test_a_mechanism_without_a_codec_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="no decoder for object"):
        codec_for(object())  # type: ignore[call-overload]


def test_the_read_side_knows_every_kind_the_codec_table_knows() -> None:
    """A kind added to :data:`aggregator.stats.kinds.KINDS` has an estimator too."""
    assert set(BY_KIND) == {kind for kind, _, _ in KINDS}
