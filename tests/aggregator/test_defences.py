"""The defences ``ldp attack poison`` runs: the collector's plausibility check and the
aggregate's poisoning alarms, each on real crafted reports and real decoders.

Margins. GRR at k = 64, ε = 1: p* = e/(e + 63) = 0.041, q* = 1/(e + 63) = 0.0152. A rare
target (f ≈ 0.5 %) is supported by n·π ≈ 1,650 of n = 10⁵ honest reports (π = q* +
f(p* − q*)), σ ≈ 40, ×√(1 + 1/6) for the trailing baseline; the 1,010 crafted reports
add 1,010, z ≈ 23 against Holm's first threshold z(α/k) = 4.2 at α = 10⁻³: missing
it has probability far below 10⁻¹⁰⁰ per trial.

False alarms. :func:`aggregator.stats.detect.detect` bounds the probability that an
honest window raises any alarm by α. At α = 10⁻³ the chance of one or more alarms in 20
honest trials is at most 1 − (1 − 10⁻³)²⁰ < 2 %, so the seeded runs below expect none;
at α = 0.2 (where a wrong baseline, e.g. windows of another population or size, is
flagged nearly every time) the number of alarms over 40 trials is at most the upper
10⁻³ quantile of Bin(40, 0.2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from aggregator.analysis.crafting import MaximalGain
from aggregator.analysis.defences import (
    AggregateDetection,
    HonestWindows,
    PoisonedBatch,
    plausibility,
)
from aggregator.analysis.poisoning import DEFENCES, simulate_poisoning
from aggregator.analysis.simulation import distribution, simulate_reports
from aggregator.stats.detect import DEFAULT_ALARM_RATE
from aggregator.stats.kinds import codec_for
from aggregator.stats.robustness import fake_count
from client_sdk import mechanisms
from client_sdk.mechanisms import FrequencyOracle

K = 64
N = 100_000
HONEST_N = 20_000
"""Reports per honest window in the false-alarm runs: above MIN_REPORTS, and enough
(> 5·1024) for the seed test's full 1,024 bins."""


def window_batch(
    m: FrequencyOracle,
    payloads: list[dict[str, Any]],
    users: int,
    gen: np.random.Generator,
    targets: tuple[int, ...] = (),
) -> PoisonedBatch:
    """A fresh honest window of ``users`` Zipf users plus ``payloads``, with its baseline."""
    probs = distribution("zipf", m.domain_size)
    true_counts = gen.multinomial(users, probs).astype(np.int64)
    genuine, seeds = simulate_reports(m, true_counts, gen)
    poisoned = genuine + codec_for(m).decode(payloads)
    honest = HonestWindows(m, probs, users, gen)
    return PoisonedBatch(m, "crafted", payloads, genuine, poisoned, targets, 0, seeds, honest)


def binomial_upper_quantile(trials: int, p: float, tail: float) -> int:
    """The smallest c with Pr[Bin(trials, p) > c] ≤ tail."""
    below = 0.0
    for c in range(trials + 1):
        below += math.comb(trials, c) * p**c * (1 - p) ** (trials - c)
        if 1.0 - below <= tail:
            return c
    return trials


def test_the_registered_defences_are_the_deployments_checks() -> None:
    assert DEFENCES[0] is plausibility
    detection = DEFENCES[1]
    assert isinstance(detection, AggregateDetection)
    assert detection.alpha == DEFAULT_ALARM_RATE and detection.trailing == 6


# -- aggregate detection ---------------------------------------------------------------------


def test_detection_catches_grr_mga_at_one_percent_in_every_trial() -> None:
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    result = simulate_poisoning(
        m, [50], N, fake_count(N, 0.01), runs=10, seed=7, defences=[AggregateDetection()]
    )
    mga = [v for v in result.defences if v.attack == "mga"]
    assert len(mga) == 10 and all(v.alarm for v in mga)
    assert all(v.alarms[0] == "shift" and v.detail.startswith("shift: '50' rose") for v in mga)
    summary = next(s for s in result.defence_summary if s.attack == "mga")
    assert (summary.caught, summary.trials, summary.rate) == (10, 10, 1.0)


@pytest.mark.parametrize("name", ["grr", "oue", "olh"])
def test_honest_windows_raise_no_alarm_at_the_default_rate(name: str) -> None:
    m = mechanisms.create(name, epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(11)
    detection = AggregateDetection()
    verdicts = [detection(window_batch(m, [], HONEST_N, gen)) for _ in range(20)]
    assert [v.detail for v in verdicts if v.alarm] == []


def test_honest_windows_raise_alarms_at_most_at_the_configured_rate() -> None:
    m = mechanisms.create("oue", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(12)
    detection = AggregateDetection(alpha=0.2)
    alarms = sum(detection(window_batch(m, [], HONEST_N, gen)).alarm for _ in range(40))
    assert alarms <= binomial_upper_quantile(40, 0.2, 1e-3)


def test_olh_fakes_that_searched_for_one_seed_show_in_the_seed_test() -> None:
    """Eight targets: the few seeds that hash seven together are reused by every fake."""
    m = mechanisms.create("olh", epsilon=1.0, domain_size=K)
    targets = [2, 8, 26, 29, 44, 51, 57, 60]
    result = simulate_poisoning(
        m, targets, N, fake_count(N, 0.01), runs=3, seed=1, defences=[AggregateDetection()]
    )
    mga = [v for v in result.defences if v.attack == "mga"]
    assert all("seeds" in v.alarms for v in mga)


def test_unary_fakes_setting_only_their_targets_fall_short_in_the_support_test() -> None:
    """An OUE report sets about 17 of 64 bits; a fake setting one leaves the total short
    by about 16 per fake (16,000 here), some 14 standard deviations."""

    class TargetsOnly(MaximalGain):
        @property
        def ones(self) -> int:
            return len(self.targets)

    m = mechanisms.create("oue", epsilon=1.0, domain_size=K)
    gen = np.random.default_rng(5)
    payloads = TargetsOnly(m, [40]).payloads(fake_count(N, 0.01), gen)
    verdict = AggregateDetection()(window_batch(m, payloads, N, gen, (40,)))
    assert verdict.alarm and "support" in verdict.alarms
    assert plausibility(window_batch(m, payloads, 2000, gen, (40,))).flagged == 0


def test_detection_without_a_baseline_says_so() -> None:
    m = mechanisms.create("grr", epsilon=1.0, domain_size=K)
    batch = window_batch(m, [], 2000, np.random.default_rng(1))
    bare = PoisonedBatch(m, "crafted", [], batch.genuine, batch.poisoned)
    with pytest.raises(ValueError, match="honest windows"):
        AggregateDetection()(bare)


# -- plausibility ----------------------------------------------------------------------------


def test_oue_mga_with_a_normal_number_of_ones_passes_plausibility() -> None:
    m = mechanisms.create("oue", epsilon=1.0, domain_size=K)
    result = simulate_poisoning(m, [3, 17, 40], 5000, 51, runs=3, seed=2, defences=[plausibility])
    mga = [v for v in result.defences if v.attack == "mga"]
    assert [(v.flagged, v.checked, v.alarm) for v in mga] == [(0, 51, False)] * 3
    # Nothing dropped: the gain left is the attack's whole gain.
    summary = result.defence_summary[0]
    assert summary.gain == pytest.approx(sum(g.gain for g in result.targets), abs=1e-12)


def test_an_all_ones_oue_forgery_is_refused_and_gains_nothing() -> None:
    class AllOnes(MaximalGain):
        @property
        def ones(self) -> int:
            return self.mechanism.domain_size

    m = mechanisms.create("oue", epsilon=1.0, domain_size=K)
    assert m.plausible_ones()[1] < K  # all-ones is beyond what honest reports set
    gen = np.random.default_rng(3)
    payloads = AllOnes(m, [3, 17]).payloads(51, gen)
    verdict = plausibility(window_batch(m, payloads, 5000, gen, (3, 17)))
    assert (verdict.flagged, verdict.checked, verdict.alarm) == (51, 51, True)
    assert verdict.gain == 0.0  # every crafted report dropped: the estimate is the genuine one
    assert "too_many_ones" in verdict.detail
