"""Memoized responses for repeated reporting: RAPPOR's permanent randomized response.

A device that reports the same value again and again would, with fresh noise each time,
let an observer average the noise away: m reports at ε cost m·ε. A *memoized* mechanism
randomizes in two stages (Erlingsson, Pihur, Korolova 2014):

In full: ``docs/statistics/memoized.md``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

from client_sdk.mechanisms.base import (
    MAX_EPSILON,
    MIN_EPSILON,
    FrequencyOracle,
    exp_epsilon,
    shade_down,
)
from client_sdk.mechanisms.randomness import (
    RandomSource,
    bernoulli,
    bernoulli_lanes,
    bits_from,
    default_rng,
)
from client_sdk.mechanisms.rr import GeneralizedRR
from client_sdk.mechanisms.unary import (
    OptimizedUnaryEncoding,
    SymmetricUnaryEncoding,
    UnaryEncoding,
)

__all__ = [
    "MIN_EPSILON_GAP",
    "MIN_SECRET_BYTES",
    "HmacShakeRandom",
    "Memoized",
    "MemoizedGRR",
    "MemoizedOUE",
    "MemoizedSUE",
    "new_secret",
    "prr_info",
]

MIN_SECRET_BYTES = 16
"""A device secret has at least 128 bits: anyone who sees a device's reports could
otherwise search the secrets offline for the one whose PRRs match them, and so learn the
PRR of every value of that device."""

SECRET_BYTES = 32
"""Size of a fresh secret (:func:`new_secret`): HMAC-SHA256's natural key size."""

MIN_EPSILON_GAP = MIN_EPSILON
"""ε∞ must exceed ε₁ by at least this. Closer, the instantaneous response almost never
changes the permanent one (p₂ → 1, and at p₂ = 1.0 there is nothing left to sample):
every report of a value would be the same, hence linkable, for a gain in ε (≤ 10⁻⁴)
that no one could measure."""

PRR_LABEL = b"ldp-telemetry/prr/v1"
"""Domain separation of the HMAC input: a device secret used for anything else never
yields the same stream. Changing it re-randomizes every device's PRRs (see module doc)."""

_CHUNK = 64
"""Bytes of stream made beyond the first request: the rest of a PRR (a GRR's one
``randrange``, a unary PRR's Bernoulli draw of the true bit) then needs no second call."""


def new_secret() -> bytes:
    """A fresh device secret: :data:`SECRET_BYTES` bytes from the OS CSPRNG.

    The device keeps it (and only it) to memoize every PRR; forgetting it forgets them.
    """
    return secrets.token_bytes(SECRET_BYTES)


def prr_info(metric: str, version: int, value: int) -> bytes:
    """The HMAC input naming one permanent response: label, metric, version, value.

    ``PRR_LABEL + b"\\x00" + f"{metric}\\x00{version}\\x00{value}"`` in UTF-8; a metric name
    without NUL characters makes it injective.

    Raises:
        ValueError: ``metric`` is not a string without NUL, or ``version``/``value`` not
            non-negative ints.
    """
    if not isinstance(metric, str) or "\x00" in metric:
        raise ValueError(f"metric must be a string without NUL characters, got {metric!r}")
    for what, x in (("version", version), ("value", value)):
        if type(x) is not int or x < 0:
            raise ValueError(f"{what} must be a non-negative int, got {x!r}")
    return PRR_LABEL + b"\x00" + f"{metric}\x00{version}\x00{value}".encode()


def _check_secret(secret: object) -> bytes:
    if not isinstance(secret, (bytes, bytearray)):
        raise ValueError(f"secret must be bytes, got {type(secret).__name__}")
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"secret must have at least {MIN_SECRET_BYTES} bytes, got {len(secret)}")
    return bytes(secret)


class HmacShakeRandom:
    """A deterministic ``random.Random``-like generator: HMAC-SHA256 seed, SHAKE-256 stream.

    The seed is K = HMAC-SHA256(secret, info); the stream is SHAKE-256(K), the
    extendable-output function of FIPS 202, read byte by byte. ``getrandbits(n)`` takes
    the next ⌈n/8⌉ bytes as a big-endian integer and keeps its top n bits (the convention
    of :class:`~client_sdk.mechanisms.SecureRandom`); ``randrange(n)`` draws
    (n−1).bit_length() bits until the result is below n. Both are defined here, not
    inherited from ``random``, so the stream cannot change with the Python version.

    SHAKE-256 rather than HMAC in counter mode for the stream: one C call yields the
    ~1 KiB a unary PRR at k = 1024 needs in about 5 µs, against about 33 HMAC calls and
    60-100 µs, on the SDK's hot path (whose goal is 100 µs per report at k = 1024).

    Args:
        secret: the key, at least :data:`MIN_SECRET_BYTES` bytes.
        info: what the stream is for (:func:`prr_info`).

    References:
        RFC 2104 (HMAC) as the key-derivation PRF, as in NIST SP 800-108r1.
        FIPS 202, §6.2 (SHAKE-256).
    """

    def __init__(self, secret: bytes, info: bytes) -> None:
        self.seed = hmac.digest(_check_secret(secret), bytes(info), hashlib.sha256)
        self._xof = hashlib.shake_256(self.seed)
        self._buf = b""
        self._pos = 0

    def _take(self, nbytes: int) -> bytes:
        end = self._pos + nbytes
        if end > len(self._buf):
            # SHAKE's output of length m is a prefix of its output of any length > m:
            # regenerate at least twice as much, so the total work stays linear, and a
            # chunk more, so the small draws that follow a large one need no new call.
            self._buf = self._xof.digest(max(end + _CHUNK, 2 * len(self._buf)))
        out = self._buf[self._pos : end]
        self._pos = end
        return out

    def getrandbits(self, k: int, /) -> int:
        """A non-negative int of ``k`` bits from the stream."""
        return bits_from(self._take, k)

    def randrange(self, start: int, stop: int | None = None, step: int = 1, /) -> int:
        """A uniform element of ``range(start, stop, step)``, by rejection sampling."""
        if stop is None:
            start, stop = 0, start
        if step <= 0:
            raise ValueError(f"step must be positive, got {step}")
        n = (stop - start + step - 1) // step
        if n <= 0:
            raise ValueError(f"empty range for randrange({start}, {stop}, {step})")
        bits = (n - 1).bit_length()
        r = self.getrandbits(bits)
        while r >= n:
            r = self.getrandbits(bits)
        return start + r * step

    def sample(self, population: Sequence[int], k: int) -> list[int]:
        """``k`` distinct elements, by a partial Fisher–Yates shuffle."""
        pool = list(population)
        if not 0 <= k <= len(pool):
            raise ValueError(f"cannot sample {k} of {len(pool)}")
        for i in range(k):
            j = i + self.randrange(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def random(self) -> float:
        """A float in [0, 1) with 53 bits from the stream."""
        return self.getrandbits(53) * 2.0**-53


@dataclass(frozen=True)
class Memoized(FrequencyOracle):
    """Base of the memoized mechanisms: PRR at ε∞ (memoized), IRR on top to ε₁ per report.

    Args:
        epsilon: ε₁, the ε of one report, in [MIN_EPSILON, MAX_EPSILON − MIN_EPSILON_GAP].
        domain_size: k.
        permanent_epsilon: ε∞, the ε of the permanent response and so of any number of
            reports of one unchanged value; ε₁ + MIN_EPSILON_GAP ≤ ε∞ ≤ MAX_EPSILON.

    Raises:
        ValueError: a parameter out of range (the message gives the range).
    """

    permanent_epsilon: float

    base: ClassVar[type[FrequencyOracle]] = FrequencyOracle
    """The mechanism of the PRR, and of the composed single report."""

    # -- parameters --------------------------------------------------------------------
    def _validate(self) -> None:
        super()._validate()
        pe = self.permanent_epsilon
        if isinstance(pe, bool) or not isinstance(pe, (int, float)):
            raise ValueError(f"permanent_epsilon must be a number, got {pe!r}")
        low = self.epsilon + MIN_EPSILON_GAP
        if not math.isfinite(pe) or not low <= pe <= MAX_EPSILON:
            raise ValueError(
                f"permanent_epsilon (ε∞) must be finite and in [epsilon + {MIN_EPSILON_GAP}, "
                f"{MAX_EPSILON}] = [{low:.6g}, {MAX_EPSILON}] for epsilon {self.epsilon}, "
                f"got {pe!r}"
            )
        object.__setattr__(self, "permanent_epsilon", float(pe))
        keep = self.irr_keep
        if not self._irr_floor() < keep < 1.0:  # pragma: no cover - excluded by the gap
            raise ValueError(
                f"epsilon {self.epsilon} and permanent_epsilon {pe} leave no room for an "
                f"instantaneous response (keep probability {keep!r})"
            )

    def options(self) -> dict[str, Any]:  # noqa: D102
        return {"permanent_epsilon": self.permanent_epsilon}

    @cached_property
    def permanent(self) -> FrequencyOracle:
        """The PRR's mechanism: the base mechanism at ε∞."""
        return self.base(epsilon=self.permanent_epsilon, domain_size=self.domain_size)

    @cached_property
    def irr_keep(self) -> float:
        """p₂: the probability that the IRR keeps its input (a value, or each bit)."""
        p1, q1 = self._prr_pq()
        return shade_down(
            self._irr_keep_estimate(),
            lambda p2: self._ratio(*self._compose(p1, q1, p2)),
            self.epsilon,
        )

    # -- per-mechanism hooks ----------------------------------------------------------
    def _irr_floor(self) -> float:
        """The keep probability at which the IRR forgets its input (ε₁ = 0)."""
        raise NotImplementedError

    def _irr_keep_estimate(self) -> float:
        """The closed-form p₂ for ε₁ (in floats; shaded down afterwards)."""
        raise NotImplementedError

    def _prr_pq(self) -> tuple[Fraction, Fraction]:
        """(p₁, q₁) of the PRR, exactly."""
        raise NotImplementedError

    def _compose(self, p1: Fraction, q1: Fraction, p2: Fraction) -> tuple[Fraction, Fraction]:
        """(p*, q*) of one report, exactly, for PRR (p₁, q₁) and IRR keep p₂."""
        raise NotImplementedError

    def _ratio(self, p: Fraction, q: Fraction) -> Fraction:
        """Worst-case likelihood ratio of one report with (p*, q*)."""
        raise NotImplementedError

    def _irr_gap(self) -> float:
        """d: IRR's Pr[supports u | PRR = u] − Pr[supports u | PRR ≠ u]."""
        raise NotImplementedError

    def _instantaneous(self, prr: dict[str, Any], rng: RandomSource) -> dict[str, Any]:
        """The IRR: fresh noise on top of a PRR payload."""
        raise NotImplementedError

    # -- probabilities and ε -----------------------------------------------------------
    @cached_property
    def _composed(self) -> tuple[Fraction, Fraction]:
        return self._compose(*self._prr_pq(), Fraction(self.irr_keep))

    def composed_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) of one report, exact in rational arithmetic."""
        return self._composed

    @cached_property
    def p(self) -> float:  # noqa: D102
        return float(self._composed[0])

    @cached_property
    def q(self) -> float:  # noqa: D102
        return float(self._composed[1])

    def privacy_ratio(self) -> Fraction:
        """The exact worst-case likelihood ratio of one report (≤ e^{ε₁})."""
        return self._ratio(*self.composed_probabilities())

    def permanent_privacy_ratio(self) -> Fraction:
        """The exact worst-case likelihood ratio of the PRR (≤ e^{ε∞}).

        Any number of reports of one value are a randomized function of the PRR alone,
        so their joint likelihood ratio is bounded by this too (post-processing).
        """
        return self.permanent.privacy_ratio()

    @property
    def realized_permanent_epsilon(self) -> float:
        """ln of :meth:`permanent_privacy_ratio` (≤ ``permanent_epsilon``)."""
        return math.log(self.permanent_privacy_ratio())

    def privacy_bounds(self) -> dict[str, Any]:
        """Both guarantees, for the privacy ledger and for people.

        Returns:
            ``per_report``: ε₁, the ε of one report; ``unlimited_same_value``: ε∞, the ε
            of any number of reports of one unchanged value (of one metric version);
            ``memoized``: True; ``explanation``: the two bounds and the trade-off in words.
        """
        e1, einf = self.epsilon, self.permanent_epsilon
        return {
            "per_report": e1,
            "unlimited_same_value": einf,
            "memoized": True,
            "explanation": (
                f"One report is {e1:g}-LDP. Any number of reports of the same value are "
                f"together {einf:g}-LDP: they reveal at most one permanent response, "
                f"randomized once at ε∞ = {einf:g} and kept (memoized) on the device; m "
                f"reports cost min(m·{e1:g}, {einf:g}). A value that changes reveals a new "
                "permanent response: for changing values only sequential composition "
                f"(m·{e1:g}) bounds the total, and a new metric version starts afresh. "
                "Trade-off: the permanent response is stable, so whoever can link reports "
                "to one device can recognise it by its permanent responses over time."
            ),
        }

    def variance(self, n: Any, frequency: Any = 0.0, *, reports_per_device: float = 1) -> Any:
        """Variance of one frequency estimate from ``n`` pooled reports.

        With one report per device this is the base formula (docs/concepts/formulas.md). When each
        device sends r reports of its (unchanged) value, they share a PRR and the
        variance gains the design-effect term

            (r − 1)·d²·[f·p₁(1−p₁) + (1−f)·q₁(1−q₁)] / (n·(p* − q*)²),

        d = the IRR's p − q (GRR: p₂ − (1−p₂)/(k−1); unary: 2p₂ − 1). As r → ∞ it tends
        to the variance of n/r PRRs decoded directly. For devices that report r_i times,
        pass r = Σr_i²/Σr_i.

        Raises:
            ValueError: ``reports_per_device`` < 1.
        """
        r = reports_per_device
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 1 <= r < math.inf:
            raise ValueError(f"reports_per_device must be a number ≥ 1, got {r!r}")
        single = super().variance(n, frequency)
        if r == 1:
            return single
        p1, q1 = (float(x) for x in self._prr_pq())
        d = self._irr_gap()
        spread = frequency * p1 * (1 - p1) + (1 - frequency) * q1 * (1 - q1)
        return single + (r - 1) * d * d * spread / (n * (self.p - self.q) ** 2)

    # -- the device ---------------------------------------------------------------------
    def permanent_response(
        self, value: int, secret: bytes, metric: str = "", version: int = 0
    ) -> dict[str, Any]:
        """The PRR of ``value``: the base mechanism at ε∞, sampled from the HMAC stream.

        Deterministic: the same (secret, metric, version, value) always give the same
        payload, after a restart, on another machine, with another Python.

        Raises:
            ValueError: a bad value, secret, metric or version.
        """
        v = self.check_value(value)
        stream = HmacShakeRandom(secret, prr_info(metric, version, v))
        return self.permanent._perturb(v, stream)

    def perturb_memoized(
        self,
        value: int,
        secret: bytes,
        metric: str = "",
        version: int = 0,
        rng: RandomSource | None = None,
    ) -> dict[str, Any]:
        """One report of a device: its PRR of ``value`` with a fresh IRR on top.

        Args:
            value: the true value, an int in ``range(domain_size)``.
            secret: the device's secret (at least :data:`MIN_SECRET_BYTES` bytes).
            metric: the metric's name; with ``version``, part of the PRR's HMAC input.
            version: the metric's version.
            rng: the IRR's randomness; default: the process CSPRNG.

        Returns:
            A payload in the base mechanism's wire format.

        Raises:
            ValueError: a bad value, secret, metric or version.
        """
        prr = self.permanent_response(value, secret, metric, version)
        return self._instantaneous(prr, rng or default_rng())

    def _perturb(self, value: int, rng: RandomSource) -> dict[str, Any]:
        """A report of a *fresh device*: a new secret from ``rng``, then its PRR and IRR.

        This is the plain ``perturb(value, rng)`` contract, and the distribution that the
        ε audit and ``privacy_ratio`` are about: one report, ε₁.
        """
        secret = rng.getrandbits(8 * SECRET_BYTES).to_bytes(SECRET_BYTES, "big")
        return self.perturb_memoized(value, secret, rng=rng)


@dataclass(frozen=True)
class MemoizedGRR(Memoized, GeneralizedRR):
    """Memoized k-ary randomized response: PRR = GRR at ε∞, IRR = GRR on the PRR's value.

    One report is GRR at ε₁ (payload ``{"v": int}``, decoded as grr).
    """

    name = "memo-grr"
    base = GeneralizedRR

    def _irr_floor(self) -> float:
        return 1 / self.domain_size

    def _prr_pq(self) -> tuple[Fraction, Fraction]:
        p1 = Fraction(self.permanent.p)
        return p1, (1 - p1) / (self.domain_size - 1)

    def _irr_keep_estimate(self) -> float:
        e, k = exp_epsilon(self.epsilon), self.domain_size
        p1, q1 = (float(x) for x in self._prr_pq())
        return (e / (e + k - 1) - q1) / (p1 - q1)

    def _compose(self, p1: Fraction, q1: Fraction, p2: Fraction) -> tuple[Fraction, Fraction]:
        k = self.domain_size
        p = p1 * p2 + (1 - p1) * (1 - p2) / (k - 1)
        return p, (1 - p) / (k - 1)

    def _ratio(self, p: Fraction, q: Fraction) -> Fraction:
        return p / q

    def _irr_gap(self) -> float:
        p2 = Fraction(self.irr_keep)
        return float(p2 - (1 - p2) / (self.domain_size - 1))

    @cached_property
    def keep(self) -> float:
        """Probability that one report is the true value (= p*)."""
        return self.p

    def _instantaneous(self, prr: dict[str, Any], rng: RandomSource) -> dict[str, Any]:
        y = prr["v"]
        if bernoulli(rng, self.irr_keep):
            return {"v": y}
        other = rng.randrange(self.domain_size - 1)
        return {"v": other + (other >= y)}


@dataclass(frozen=True)
class _MemoizedUnary(Memoized, UnaryEncoding):
    """PRR = a unary encoding at ε∞; IRR keeps each bit w.p. p₂, flips it otherwise."""

    def _irr_floor(self) -> float:
        return 0.5

    def _prr_pq(self) -> tuple[Fraction, Fraction]:
        return Fraction(self.permanent.p), Fraction(self.permanent.q)

    def _compose(self, p1: Fraction, q1: Fraction, p2: Fraction) -> tuple[Fraction, Fraction]:
        return p1 * p2 + (1 - p1) * (1 - p2), q1 * p2 + (1 - q1) * (1 - p2)

    def _ratio(self, p: Fraction, q: Fraction) -> Fraction:
        # Moving the true value from v to v' changes the laws of bits v and v' only.
        return p * (1 - q) / (q * (1 - p))

    def _irr_gap(self) -> float:
        return float(2 * Fraction(self.irr_keep) - 1)

    @cached_property
    def irr_flip(self) -> float:
        """1 − p₂, the probability that the IRR flips a bit (exact: p₂ ≥ 1/2)."""
        return float(1 - Fraction(self.irr_keep))

    def _instantaneous(self, prr: dict[str, Any], rng: RandomSource) -> dict[str, Any]:
        bits = int.from_bytes(base64.b64decode(prr["b"]), "big")
        bits ^= bernoulli_lanes(rng, self.irr_flip, self.domain_size) << self._pad
        return {"b": base64.b64encode(bits.to_bytes(self.nbytes, "big")).decode("ascii")}


@dataclass(frozen=True)
class MemoizedSUE(_MemoizedUnary):
    """RAPPOR without Bloom filters: PRR = SUE at ε∞, symmetric IRR; one report is SUE at ε₁.

    In RAPPOR's notation (h = 1): f = 2(1 − p₁), IRR p = 1 − p₂, q = p₂;
    ε∞ = 2·ln((1 − f/2)/(f/2)), see :meth:`rappor_parameters`.
    """

    name = "memo-sue"
    base = SymmetricUnaryEncoding

    def _irr_keep_estimate(self) -> float:
        e = exp_epsilon(self.epsilon / 2)
        p1 = float(self._prr_pq()[0])
        return (1 + (2 * (e / (e + 1)) - 1) / (2 * p1 - 1)) / 2

    def rappor_parameters(self) -> dict[str, float]:
        """RAPPOR's (f, p, q, h) for this mechanism (Erlingsson et al. 2014, §3).

        f: the PRR's noise (a bit is replaced by a fair coin w.p. f); p, q: the IRR's
        Pr[report 1 | PRR bit 0] and Pr[report 1 | PRR bit 1]; h = 1 (one-hot, no Bloom
        filter).
        """
        p1 = Fraction(self.permanent.p)
        return {
            "f": float(2 * (1 - p1)),
            "p": self.irr_flip,
            "q": self.irr_keep,
            "h": 1,
        }


@dataclass(frozen=True)
class MemoizedOUE(_MemoizedUnary):
    """Memoized OUE: PRR = OUE at ε∞, symmetric IRR; one report is OUE at ε₁ (p* = 1/2)."""

    name = "memo-oue"
    base = OptimizedUnaryEncoding

    def _irr_keep_estimate(self) -> float:
        q1 = float(self._prr_pq()[1])
        target = 1 / (exp_epsilon(self.epsilon) + 1)
        return (1 - q1 - target) / (1 - 2 * q1)
