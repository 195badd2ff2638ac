"""Relayed reports end to end in one app (``ldp serve``'s): sealed through its gateway,
pooled, released by a real stream worker at the pool's bound, counted; and the metric page
says which ε holds towards whom, the shuffled ε_c towards the collector computed for what
was actually released (Feldman–McMillan–Talwar, ``aggregator.stats.shuffling``).

Before (issue 35, item 4): with the default ``LDP_SHUFFLE_MAX_DELAY`` = 0 a pool below B
waited for good (20 acknowledged reports of v1, v2 created: v1's n stayed 0), and the page
gave ε_c for a batch of B and r = the budget's reports per period, whatever was released
and however many periods a pool spanned.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from relay_helpers import age_pool, relay_reports
from test_dashboard_api import define, make

from aggregator.query.relayed import relayed_epsilon
from aggregator.stats.shuffling import amplification
from aggregator.stream.worker import Worker
from client_sdk.wire import MetricDefinition, build_report
from ldp_api.context import shared
from ldp_store import keys

SPEC = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}
HOUR = keys.SHUFFLE_MAX_DELAY


def shown(page: str) -> float:
    found = re.search(r'data-field="relayed-epsilon">([0-9.]+)<', page)
    assert found, page[:2000]
    return float(found.group(1))


def metric_page(client: FlaskClient, name: str, version: int | None = None) -> str:
    query = f"?version={version}" if version else ""
    return html.unescape(client.get(f"/ui/metric/{name}{query}").get_data(as_text=True))


def relay(client: FlaskClient, definition: MetricDefinition, n: int) -> None:
    relay_reports(client, [build_report(definition, i % 3) for i in range(n)])


def drain(app: Flask) -> None:
    Worker(shared(app=app).redis, handle_signals=False).run(once=True)


def estimates(client: FlaskClient, name: str, version: int) -> dict[str, Any]:
    answer = client.get(f"/v1/estimates/{name}?version={version}")
    assert answer.status_code == 200, answer.json
    return dict(answer.json)


def test_reports_waiting_when_their_version_changes_are_counted_at_the_bound(
    redis_db: Any,
) -> None:
    app = make(redis_db.url)  # the defaults: B = 100, an hour's bound
    client = app.test_client()
    v1 = define(client, "app.theme", SPEC)
    relay(client, v1, 20)
    v2 = define(client, "app.theme", {**SPEC, "epsilon": 2.0})
    assert v2.version == v1.version + 1
    drain(app)
    before = estimates(client, v1.name, v1.version)
    assert before["n"] == 0 and before["relayed_waiting"]["reports"] == 20
    age_pool(shared(app=app).redis, v1.name, v1.version, HOUR + 1)  # the bound has passed
    drain(app)
    after = estimates(client, v1.name, v1.version)
    assert after["n"] == 20 and after.get("relayed_waiting") is None
    assert sum(row["support_count"] for row in after["estimates"]) > 0


def test_a_retired_metrics_waiting_reports_are_counted_at_the_bound(redis_db: Any) -> None:
    app = make(redis_db.url)
    client = app.test_client()
    theme = define(client, "app.theme", SPEC)
    relay(client, theme, 7)
    retired = client.post("/v1/metrics/app.theme/retire", headers=_admin())
    assert retired.status_code == 200, retired.json
    age_pool(shared(app=app).redis, theme.name, theme.version, HOUR + 1)
    drain(app)
    assert estimates(client, theme.name, theme.version)["n"] == 7


def _admin() -> dict[str, str]:
    from test_dashboard_api import ADMIN_TOKEN, bearer

    return bearer(ADMIN_TOKEN)


def test_before_any_release_the_page_gives_a_full_batchs_epsilon_and_says_so(
    redis_db: Any,
) -> None:
    client = make(redis_db.url, SHUFFLE_MIN_BATCH=1000).test_client()
    define(client, "app.theme", SPEC)
    page = metric_page(client, "app.theme")
    expected = amplification(1.0, 1000, 1).epsilon
    assert expected <= shown(page) <= expected + 1e-4  # rounded up: still a bound
    assert shown(page) < 1.0  # amplified below ε₀ at B = 1000
    assert "full ones of 1,000" in page and "none released yet" in page
    assert "relay and collector together" in page and "collude" in page
    assert "nothing enforces one report per device" in page


def test_the_epsilon_shown_is_that_of_the_smallest_batch_released(redis_db: Any) -> None:
    app = make(redis_db.url)  # B = 100
    client = app.test_client()
    theme = define(client, "app.theme", SPEC)
    relay(client, theme, 30)  # a metric with little traffic: 30 < B
    age_pool(shared(app=app).redis, theme.name, theme.version, HOUR + 1)
    drain(app)
    assert estimates(client, theme.name, theme.version)["n"] == 30
    page = metric_page(client, "app.theme")
    expected = amplification(1.0, 30, 1).epsilon
    assert expected <= shown(page) <= expected + 1e-4
    assert shown(page) > amplification(1.0, 100, 1).epsilon + 1e-3  # not B's
    assert "the smallest released of 30" in page


def test_a_device_can_have_a_budget_of_reports_per_period_spanned_in_a_batch(
    redis_db: Any,
) -> None:
    """An hour's pool can straddle midnight, and a report may arrive up to a period after
    it was made: three days' budgets, 4 × 3 reports of one device in a batch."""
    client = make(redis_db.url).test_client()
    budgeted = {**SPEC, "budget": {"reports_per_period": 4, "period": "day"}}
    define(client, "app.budgeted", budgeted)
    page = metric_page(client, "app.budgeted")
    found = relayed_epsilon(1.0, 100, 12, 100, False)
    assert found is not None and found.reports_per_device == 12
    assert shown(page) == found.epsilon
    assert "at most 12 reports of a batch" in page


@pytest.mark.parametrize(("delay", "r"), [(3600, 12), (86_400, 12), (86_401, 16)])
def test_the_longer_a_pool_may_wait_the_more_periods_it_spans(
    redis_db: Any, delay: int, r: int
) -> None:
    client = make(redis_db.url, SHUFFLE_MAX_DELAY=delay).test_client()
    define(client, "app.budgeted", {**SPEC, "budget": {"reports_per_period": 4, "period": "day"}})
    assert f"at most {r} reports of a batch" in metric_page(client, "app.budgeted")


def test_no_shuffling_states_no_amplification_and_a_batch_of_one_hides_nothing() -> None:
    assert relayed_epsilon(1.0, 1, None, 1, False) is None  # B = 1: nothing is shuffled
    alone = relayed_epsilon(1.0, 1, None, 100, True)  # one report released at its bound
    assert alone is not None and alone.epsilon == 1.0
