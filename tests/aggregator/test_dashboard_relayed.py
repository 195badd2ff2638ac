"""The metric page says which ε holds towards whom: ε per report towards a relay and a
collector together (or without a relay), the shuffled ε_c of a batch of B towards the
collector alone (Feldman–McMillan–Talwar, ``aggregator.stats.shuffling``)."""

from __future__ import annotations

import html
import re
from typing import Any

from test_dashboard_api import define, make

from aggregator.query.estimators import relayed_epsilon
from aggregator.stats.shuffling import amplification

SPEC = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}


def shown(page: str) -> float:
    found = re.search(r'data-field="relayed-epsilon">([0-9.]+)<', page)
    assert found, page[:2000]
    return float(found.group(1))


def test_the_metric_page_shows_the_relayed_epsilon_at_b(redis_db: Any) -> None:
    client = make(redis_db.url, SHUFFLE_MIN_BATCH=1000).test_client()
    define(client, "app.theme", SPEC)
    page = html.unescape(client.get("/ui/metric/app.theme").get_data(as_text=True))
    expected = amplification(1.0, 1000, 1).epsilon
    assert expected <= shown(page) <= expected + 1e-4  # rounded up: still a bound
    assert shown(page) < 1.0  # amplified below ε₀ at B = 1000
    assert "batches of ≥ 1000" in page and "relay and collector together" in page
    assert "collude" in page and "nothing enforces one report per device" in page


def test_a_budget_bounds_a_devices_reports_per_batch(redis_db: Any) -> None:
    client = make(redis_db.url).test_client()
    budgeted = {**SPEC, "budget": {"reports_per_period": 4, "period": "day"}}
    define(client, "app.budgeted", budgeted)
    page = html.unescape(client.get("/ui/metric/app.budgeted").get_data(as_text=True))
    found = relayed_epsilon(1.0, 100, 4)
    assert found is not None and found.reports_per_device == 4
    assert shown(page) == found.epsilon
    assert "at most 4 reports of a batch" in page


def test_no_shuffling_states_no_amplification() -> None:
    assert relayed_epsilon(1.0, 1, None) is None
