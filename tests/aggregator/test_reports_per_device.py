"""The reports-per-device bound a memoized metric's intervals rest on, per window."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from aggregator.stats.accounting import reports_per_device
from client_sdk import wire
from ldp_store.schema import window_span


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


MEMO = wire.parse_spec(
    "app.mode",
    {
        "domain": ["a", "b", "c"],
        "epsilon": 1.0,
        "longitudinal": {"permanent_epsilon": 3.0},
        "budget": {"reports_per_period": 2, "period": "day"},
    },
)


def test_window_spans() -> None:
    assert window_span("all") is None
    assert window_span("hour:2026-11-25T10") == (ts("2026-11-25T10:00"), ts("2026-11-25T11:00"))
    assert window_span("day:2026-11-25") == (ts("2026-11-25T00:00"), ts("2026-11-26T00:00"))
    with pytest.raises(ValueError, match="not a window"):
        window_span("week:2026-48")


def test_the_bound_grows_with_the_days_since_the_version_was_created() -> None:
    created, now = ts("2026-11-20T09:00"), ts("2026-11-25T12:00")
    # all: 6 days overlapped + 1 for clock skew, 2 reports a day
    assert reports_per_device(MEMO, created, "all", now).bound == 14
    # an old day window: reports made since creation may arrive in it (offline devices)
    assert reports_per_device(MEMO, created, "day:2026-11-21", now).bound == 2 * (3 + 1)
    # a window that is still open ends now
    assert reports_per_device(MEMO, created, "day:2026-11-25", now).bound == 14
    assert "2 per day" in reports_per_device(MEMO, created, "all", now).reason


def test_only_memoized_versions_with_a_known_budget_and_age_get_a_bound() -> None:
    plain = wire.parse_spec("app.x", {"domain": ["a", "b"], "epsilon": 1.0})
    assert (
        reports_per_device(plain, ts("2026-11-20T00:00"), "all", ts("2026-11-25T00:00")).bound == 1
    )
    unknown = reports_per_device(MEMO, None, "all", ts("2026-11-25T00:00"))
    assert unknown.bound == 1 and "may be too narrow" in unknown.reason
