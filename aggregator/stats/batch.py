"""The codec protocol: how every metric kind's reports plug into the worker and the tools.

A *codec* works on whole batches of one mechanism's payloads with numpy. The stream
worker (:mod:`aggregator.stream.worker`), the firehose, the simulations and the
estimators see every metric kind — frequency oracles (:mod:`aggregator.stats.codecs`),
numeric means (:mod:`aggregator.stats.numeric`), and any kind added later — through the
same four steps:

* :meth:`Codec.parse`: payloads → a :class:`Batch` of numpy columns, every payload checked
  as strictly as the SDK's ``check_payload`` (which words the error of the first bad one);
* :meth:`Codec.decode`: payloads → the kind's additive statistic (support
  :class:`~aggregator.stats.codecs.Counts`, or :class:`~aggregator.stats.numeric.NumericStats`);
* :meth:`Codec.increments`: a parsed batch → what it adds to a window's counts, as typed
  :class:`~ldp_store.schema.Increments` (``n``, the nonzero support counts or one delta
  blob for a wide batch: :func:`support_increments`; a numeric batch's sums), which the
  storage package words as the commit script's fields;
* :meth:`Codec.seed_increments`: a local-hashing batch's seed bins (the commit script adds
  them to the window's seed histograms; empty for other kinds);
* :meth:`Codec.encode` / :meth:`Codec.to_payloads`: true values → perturbed columns with a
  numpy generator, and back to payload dicts (simulation and load generation only: a numpy
  generator is not a CSPRNG; devices use the SDK).

:func:`aggregator.stats.codecs.codec_for` picks the codec of any mechanism object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms import LocalHashing, PayloadError
from ldp_store import schema
from ldp_store.schema import Increments

__all__ = [
    "SEED_BINS",
    "Batch",
    "Codec",
    "FastParseCodec",
    "Increments",
    "PartsCodec",
    "SupportCodec",
    "delta_blob",
    "int_columns",
    "raise_first_error",
    "seed_bins",
    "support_increments",
]

S_co = TypeVar("S_co", covariant=True)

SEED_BINS = 1024
"""Bins of a window's seed histogram (a seed's index modulo 1024). The honest counts per
bin are ≈ n/1024 (98 at n = 10⁵), so one seed reused by 1 % of the reports stands ten
standard deviations out in its bin; 1024 fields cost Redis a few kB per window."""


def seed_bins(m: LocalHashing, a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The bin of each report's seed: ((a − 1)·P + b) mod :data:`SEED_BINS`."""
    index = (np.asarray(a, dtype=np.int64) - 1) * m.prime + np.asarray(b, dtype=np.int64)
    return np.asarray(index % SEED_BINS, dtype=np.int64)


@dataclass
class Batch:
    """Parsed reports of one mechanism: named numpy columns of equal length ``n``."""

    n: int
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> Batch:
        """The rows ``rows`` of this batch."""
        return Batch(len(rows), {name: col[rows] for name, col in self.columns.items()})


@runtime_checkable
class Codec(Protocol[S_co]):
    """Batch operations for one mechanism object; ``S_co`` is its additive statistic."""

    @property
    def m(self) -> Any:
        """The mechanism object: its ``check_payload`` is the reference checker."""
        ...

    def parse(self, payloads: Sequence[Any]) -> Batch:
        """Validate and columnize payloads.

        Raises:
            PayloadError: naming the index and the problem of the first bad payload.
        """
        ...

    def decode(self, payloads: Sequence[Any]) -> S_co:
        """parse, then the batch's additive statistic."""
        ...

    def increments(self, batch: Batch) -> Increments:
        """What a parsed batch adds to a window's counts."""
        ...

    def seed_increments(self, batch: Batch) -> list[int]:
        """Seed-bin increments of a parsed batch, flat (bin, count) pairs: a local-hashing
        batch's hash seeds for the poisoning test (:mod:`aggregator.stats.detect`); empty
        for every other kind."""
        ...

    def encode(self, values: Any, gen: np.random.Generator) -> Batch:
        """Perturb true values in bulk with a numpy generator (simulation only)."""
        ...

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        ...


def support_increments(n: int, support: np.ndarray) -> Increments:
    """The increments of a frequency batch: ``n``, then its nonzero support counts, or
    one delta blob when k ≥ :data:`~ldp_store.schema.DELTA_MIN_K` (one list push a window
    instead of one ``BITFIELD`` increment per counter; see Deltas in :mod:`ldp_store.schema`).

    Args:
        n: reports in the batch.
        support: its support counts C(0..k−1).
    """
    nonzero = np.flatnonzero(support)
    if len(support) >= schema.DELTA_MIN_K:
        return Increments(n, delta=delta_blob(support) if len(nonzero) else b"")
    return Increments(n, nonzero.tolist(), support[nonzero].tolist())


def delta_blob(support: np.ndarray) -> bytes:
    """A delta blob (see Deltas in :mod:`ldp_store.schema`): the nonzero C(v) of a support
    vector as (v, C(v)) pairs, v ascending."""
    nonzero = np.flatnonzero(support)
    pairs = np.empty((len(nonzero), 2), dtype=schema.DELTA_DTYPE)
    pairs[:, 0], pairs[:, 1] = nonzero, support[nonzero]
    return pairs.tobytes()


def raise_first_error(m: Any, payloads: Sequence[Any]) -> NoReturn:
    """After a fast parser refused a batch: raise the reference checker's error for the
    first bad payload, naming its index (a fast parser stricter than it is a bug).

    Raises:
        PayloadError: always, unless ``m.check_payload`` accepts every payload.
        AssertionError: then.
    """
    for i, payload in enumerate(payloads):
        try:
            m.check_payload(payload)
        except PayloadError as exc:
            raise PayloadError(f"payload #{i}: {exc}") from None
    raise AssertionError("fast parser rejected a batch the reference checker accepts")


def int_columns(payloads: Sequence[Any], bounds: dict[str, tuple[int, int]]) -> Batch | None:
    """Columns of int fields, each within [low, high); None if anything is off."""
    width = len(bounds)
    if not all(type(p) is dict and len(p) == width for p in payloads):
        return None
    columns: dict[str, np.ndarray] = {}
    for name, (low, high) in bounds.items():
        values = [p[name] for p in payloads]
        if not all(type(x) is int for x in values):
            return None
        col = np.array(values, dtype=np.int64)
        if col.size and (col.min() < low or col.max() >= high):
            return None
        columns[name] = col
    return Batch(len(payloads), columns)


class FastParseCodec:
    """The shared part of the codecs: :meth:`parse` runs the fast parser ``_parse_fast``
    (a :class:`Batch`, or None if anything is off) and otherwise raises the reference
    checker's error; no seed increments."""

    m: Any
    _refused: tuple[type[Exception], ...] = ()
    """Exceptions of ``_parse_fast`` that mean "refused", like None."""

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        raise NotImplementedError

    def parse(self, payloads: Sequence[Any]) -> Batch:
        """Validate and columnize payloads.

        Raises:
            PayloadError: naming the index and the problem of the first bad payload.
        """
        try:
            batch = self._parse_fast(payloads)
        except self._refused:
            batch = None
        if batch is None:
            raise_first_error(self.m, payloads)
        return batch

    def seed_increments(self, batch: Batch) -> list[int]:
        """None: only local hashing's reports carry a hash seed."""
        return []


class SupportCodec(FastParseCodec):
    """A :class:`FastParseCodec` that counts: :meth:`increments` are ``n`` and the
    counters of :meth:`count` (:func:`support_increments`)."""

    def count(self, batch: Batch) -> npt.NDArray[np.int64]:
        """The counters of a parsed batch."""
        raise NotImplementedError

    def increments(self, batch: Batch) -> Increments:
        """What a parsed batch adds: ``n``, then its counters (:func:`support_increments`)."""
        return support_increments(batch.n, self.count(batch))


class PartsCodec(SupportCodec):
    """A codec whose reports are split into parts by one int field ``key`` (a joint
    metric's group ``g``, a histogram's level ``l``), part i holding key ``first + i``;
    each part is parsed and counted by its own inner codec. The counters are n of each
    part, then each part's counts at ``m.offsets[i]`` (``sizes[i]`` of them); a batch's
    columns are ``key``, ``rows{i}`` and part i's own columns as ``{i}.{name}``."""

    key: str
    first: int
    inner: Sequence[Any]
    sizes: Sequence[int]

    def _parse_part(self, i: int, part: list[Any]) -> Batch | None:
        """Part i's payloads parsed by its inner codec (a ``key`` column is dropped)."""
        raise NotImplementedError

    def _parse_fast(self, payloads: Sequence[Any]) -> Batch | None:
        keys = [p.get(self.key) if type(p) is dict else None for p in payloads]
        first, end = self.first, self.first + len(self.inner)
        if not all(type(x) is int and first <= x < end for x in keys):
            return None
        column = np.array(keys, dtype=np.int64)
        columns: dict[str, np.ndarray] = {self.key: column}
        for i in range(len(self.inner)):
            rows = np.flatnonzero(column == first + i)
            parsed = self._parse_part(i, [payloads[r] for r in rows.tolist()])
            if parsed is None:
                return None
            columns[f"rows{i}"] = rows
            for name, col in parsed.columns.items():
                if name != self.key:
                    columns[f"{i}.{name}"] = col
        return Batch(len(payloads), columns)

    def _part(self, batch: Batch, i: int) -> Batch:
        prefix = f"{i}."
        cols = {k[len(prefix) :]: v for k, v in batch.columns.items() if k.startswith(prefix)}
        return Batch(len(batch.columns[f"rows{i}"]), cols)

    def count(self, batch: Batch) -> npt.NDArray[np.int64]:
        """The batch's counters: n of each part, then each part's counts."""
        out = np.zeros(self.m.counters, dtype=np.int64)
        for i, codec in enumerate(self.inner):
            part = self._part(batch, i)
            out[i] = part.n
            if part.n:
                start = self.m.offsets[i]
                out[start : start + self.sizes[i]] = codec.count(part)
        return out

    def decode(self, payloads: Sequence[Any]) -> npt.NDArray[np.int64]:
        """parse + count."""
        return self.count(self.parse(payloads))

    def to_payloads(self, batch: Batch) -> list[dict[str, Any]]:
        """Payload dicts of a batch, as the SDK would have produced them."""
        out: list[dict[str, Any]] = [{} for _ in range(batch.n)]
        for i, codec in enumerate(self.inner):
            rows = batch.columns[f"rows{i}"].tolist()
            for r, inner in zip(rows, codec.to_payloads(self._part(batch, i)), strict=True):
                out[r] = {self.key: self.first + i, **inner}
        return out
