"""Alert rules: the false-alarm guarantee over many looks, and rules firing in the worker.

The statistical tests simulate null streams with numpy's generator (seeded) and look at
each after every batch; the fraction with any alert must stay within α plus three
binomial standard errors of the simulation, and a fixed-n rule re-checked at the same
looks must break that bound (so the check can fail). The full-size runs (10,000 streams ×
1,000 looks) are ``benchmarks/bench_alerts.py``. Guide: docs/guides/alerts.md.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import pytest

from aggregator.alerts.evaluate import AlarmChannels, Alerts, RuleRefused
from aggregator.alerts.rules import AlertSpec
from aggregator.stats.alerting import Observable, change_fires, expected_delay, level_fires
from aggregator.stats.anytime import cs_bounded_mean
from aggregator.stream.worker import Worker
from client_sdk import mechanisms
from client_sdk.mechanisms.numeric import create_numeric
from client_sdk.wire import MetricDefinition, build_report
from ldp_store import alerts as store
from ldp_store import keys
from ldp_store.registry import Registry
from ldp_store.schema import SEGMENT_KEY

ALPHA = 0.05
STREAMS = 2000
LOOKS = np.unique(np.geomspace(20, 200_000, 200).astype(np.int64))


def _bound(streams: int) -> float:
    """α plus three standard errors of a fraction of ``streams`` at α."""
    return ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / streams)


def _bernoulli_paths(rng: np.random.Generator, mu: float, streams: int) -> np.ndarray:
    """Cumulative successes at each look of ``streams`` i.i.d. Bernoulli(μ) streams."""
    steps = np.diff(np.concatenate([[0], LOOKS]))
    return np.cumsum(rng.binomial(steps, mu, size=(streams, len(LOOKS))), axis=1)


def _fixed_n_fires(n: np.ndarray, total: np.ndarray, mu0: float, z: float = 1.96) -> np.ndarray:
    """The naive rule: the fixed-n 95 % interval's lower end above the level."""
    m = total / n
    return m - z * np.sqrt(np.maximum(m * (1 - m), 1e-12) / n) > mu0


def test_a_share_rule_fires_falsely_at_most_alpha_over_200_looks() -> None:
    m = mechanisms.create("oue", epsilon=1.0, domain_size=8)
    obs = Observable.of_share(m)
    level = 0.1  # the truth sits exactly on the level: the hardest null
    mu = m.q + level * (m.p - m.q)
    paths = _bernoulli_paths(np.random.default_rng(40), mu, STREAMS)
    fired = level_fires(obs, LOOKS[None, :], paths, paths, level, True, ALPHA).any(axis=1)
    assert fired.mean() <= _bound(STREAMS)
    naive = _fixed_n_fires(LOOKS[None, :], paths, mu).any(axis=1)
    assert naive.mean() > _bound(STREAMS)  # what the guarantee protects against


def test_a_mean_rule_fires_falsely_at_most_alpha_over_200_looks() -> None:
    m = create_numeric("duchi", epsilon=1.0)
    obs = Observable.of_mean(m, (0.0, 100.0))
    level = 70.0
    x = (level - 50.0) / 50.0  # the scaled mean: a report is ±C with P(+C) = (1 + x/C)/2
    c = m.bound
    plus = _bernoulli_paths(np.random.default_rng(41), (1 + x / c) / 2, STREAMS)
    total = c * (2 * plus - LOOKS[None, :])
    total_sq = c * c * LOOKS[None, :] * np.ones_like(plus)
    fired = level_fires(obs, LOOKS[None, :], total, total_sq, level, True, ALPHA)
    assert fired.any(axis=1).mean() <= _bound(STREAMS)


def test_a_change_rule_fires_falsely_at_most_alpha_over_200_looks() -> None:
    m = mechanisms.create("grr", epsilon=2.0, domain_size=4)
    obs = Observable.of_share(m)
    f = 0.3
    mu = m.q + f * (m.p - m.q)
    rng = np.random.default_rng(42)
    base_n = 5000
    base = rng.binomial(base_n, mu, size=STREAMS)
    b_lo, b_hi = cs_bounded_mean(base_n, base, base, 0.0, 1.0, ALPHA / 2)
    paths = _bernoulli_paths(rng, mu, STREAMS)
    n = LOOKS[None, :]
    fired = change_fires(obs, (n, paths, paths), (b_lo[:, None], b_hi[:, None]), 0.0, ALPHA)
    assert fired.any(axis=1).mean() <= _bound(STREAMS)
    # the same union of two sequences over one baseline interval, read with fixed-n ends
    m, b = paths / n, base[:, None] / base_n
    z = 2.24  # 97.5 % two-sided, as α/2 each
    naive = np.abs(m - b) > z * (np.sqrt(m * (1 - m) / n) + np.sqrt(b * (1 - b) / base_n))
    assert naive.any(axis=1).mean() > _bound(STREAMS)


def test_half_the_streams_of_a_doubled_share_fire_near_the_expected_delay() -> None:
    """The stated delay is the median's order: between half and twice the median."""
    m = mechanisms.create("grr", epsilon=1.0, domain_size=4)
    obs = Observable.of_share(m)
    level, truth = 0.1, 0.2
    stated = expected_delay(obs, truth, level, ALPHA)
    assert stated is not None
    paths = _bernoulli_paths(np.random.default_rng(43), m.q + truth * (m.p - m.q), 400)
    fired = level_fires(obs, LOOKS[None, :], paths, paths, level, True, ALPHA)
    first = np.where(fired.any(axis=1), LOOKS[np.argmax(fired, axis=1)], np.inf)
    median = float(np.median(first))
    assert stated / 2 <= median <= 2 * stated, (stated, median)


# -- rules in the worker (a real Redis) ----------------------------------------------------

_LOADER = "for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'p', ARGV[i]) end return #ARGV"


def _metric(client: Any, name: str = "app.theme", **spec: Any) -> MetricDefinition:
    body = {
        "domain": ["light", "dark", "auto", "contrast"],
        "epsilon": 2.0,
        "mechanism": "grr",
        **spec,
    }
    return Registry(client).put(name, body).definition


def _send(client: Any, d: MetricDefinition, shares: list[float], n: int, seed: int) -> None:
    rng = random.Random(seed)
    values = rng.choices(range(d.k), shares, k=n)
    payloads = [json.dumps(d.mechanism.perturb(v, rng=rng)) for v in values]
    loader = client.register_script(_LOADER)
    for i in range(0, n, 5000):
        loader(keys=[keys.stream_key(d.name, d.version)], args=payloads[i : i + 5000])


def _drain(client: Any, alerts: Alerts) -> Worker:
    w = Worker(client, handle_signals=False, block_ms=10, on_counted=alerts.evaluate)
    w.run(once=True)
    return w


NULL = [0.5, 0.2, 0.2, 0.1]


def test_the_worker_fires_a_share_rule_once_when_the_share_crosses_its_level(
    redis_db: Any,
) -> None:
    client = redis_db.client()
    d = _metric(client)
    _send(client, d, NULL, 2000, seed=1)
    alerts = Alerts(client, public_url="http://dash.example")
    _drain(client, alerts)
    rule = alerts.create(AlertSpec(metric=d.name, kind="share_above", value="dark", level=0.3))
    quiet = alerts.create(AlertSpec(metric=d.name, kind="share_above", value="auto", level=0.3))
    assert rule["origin"][0] == 2000 and rule["expected_delay"]["reports"] > 0
    _send(client, d, [0.2, 0.6, 0.1, 0.1], 3000, seed=2)
    _drain(client, alerts)
    states = store.states(client)
    assert set(states["firing"]) == {rule["id"]}
    fired = states["firing"][rule["id"]]
    assert fired["n"] == 3000
    lo, hi = fired["ci"]
    assert 0.3 < lo < 0.6 < hi  # the interval holds the truth and clears the level
    assert "http://dash.example/ui/metric/app.theme" in fired["message"]
    assert "above 30.00%" in fired["message"] and "anytime interval" in fired["message"]
    assert states["last"][quiet["id"]]["firing"] is False
    _send(client, d, [0.2, 0.6, 0.1, 0.1], 500, seed=3)
    _drain(client, alerts)  # still firing: no second event
    assert [e["type"] for e in store.recent_events(client)].count("fired") == 1


def test_a_change_rule_fires_on_a_shift_and_resolving_rearms_it(redis_db: Any) -> None:
    client = redis_db.client()
    d = _metric(client)
    _send(client, d, NULL, 4000, seed=4)
    alerts = Alerts(client)
    _drain(client, alerts)
    rule = alerts.create(AlertSpec(metric=d.name, kind="change", value="light", min_change=0.05))
    assert rule["baseline"]["n"] == 4000
    _send(client, d, NULL, 3000, seed=5)  # no change: quiet
    _drain(client, alerts)
    assert store.firings(client) == {}
    _send(client, d, [0.1, 0.5, 0.3, 0.1], 4000, seed=6)
    _drain(client, alerts)
    assert rule["id"] in store.firings(client), (rule["baseline"], store.states(client)["last"])
    fired = store.firings(client)[rule["id"]]
    assert fired["estimate"] < fired["baseline"]["estimate"] - 0.05
    assert "changed from" in fired["message"]
    alerts.acknowledge(rule["id"], "on it")
    assert alerts.listing()[0]["status"] == "acknowledged"
    armed = alerts.resolve(rule["id"])
    assert armed["baseline"]["n"] == 11_000 and store.firings(client) == {}
    assert alerts.listing()[0]["status"] == "ok"


def test_a_mean_rule_fires_in_the_metrics_units(redis_db: Any) -> None:
    """Numeric sums (units of 2⁻³⁰) reach the test as the metric's mean: a rule at 80 on
    [0, 120] fires for values around 100, its twin at 110 does not."""
    client = redis_db.client()
    spec = {"kind": "numeric", "range": [0, 120], "epsilon": 4.0}
    d = Registry(client).put("app.minutes", spec).definition
    alerts = Alerts(client)
    high = alerts.create(AlertSpec(metric=d.name, kind="mean_above", level=80.0))
    higher = alerts.create(AlertSpec(metric=d.name, kind="mean_above", level=110.0))
    rng = random.Random(10)
    payloads = [
        json.dumps(build_report(d, rng.uniform(90, 110), rng)["payload"]) for _ in range(4000)
    ]
    client.register_script(_LOADER)(keys=[keys.stream_key(d.name, d.version)], args=payloads)
    _drain(client, alerts)
    firings = store.firings(client)
    assert set(firings) == {high["id"]}
    lo, hi = firings[high["id"]]["ci"]
    assert 80 < lo < 100 < hi  # the interval holds the true mean, in minutes
    assert store.states(client)["last"][higher["id"]]["estimate"] < 110


def test_a_group_rule_watches_only_its_group(redis_db: Any) -> None:
    """A rule on platform=ios fires when the share moves among ios devices only; the same
    rule on android stays quiet."""
    client = redis_db.client()
    dims = [{"name": "platform", "values": ["ios", "android"]}]
    d = _metric(client, dimensions=dims)
    rng = random.Random(9)

    def send(shares_by_segment: dict[int, list[float]], n: int) -> None:
        payloads = []
        for segment, shares in shares_by_segment.items():
            for v in rng.choices(range(d.k), shares, k=n):
                payload = d.mechanism.perturb(v, rng=rng)
                payload[SEGMENT_KEY] = segment  # what the collector adds beside a report
                payloads.append(json.dumps(payload))
        client.register_script(_LOADER)(keys=[keys.stream_key(d.name, d.version)], args=payloads)

    alerts = Alerts(client)
    rules = {
        group: alerts.create(
            AlertSpec(
                metric=d.name,
                kind="share_above",
                value="dark",
                level=0.3,
                dimension="platform",
                group=group,
            )
        )
        for group in ("ios", "android")
    }
    ios = d.segment({"platform": "ios"})
    android = d.segment({"platform": "android"})
    send({ios: [0.2, 0.6, 0.1, 0.1], android: NULL}, 3000)
    _drain(client, alerts)
    assert set(store.firings(client)) == {rules["ios"]["id"]}
    assert store.firings(client)[rules["ios"]["id"]]["n"] == 3000
    assert "[platform=ios]" in store.firings(client)[rules["ios"]["id"]]["message"]


PLATFORMS = [{"name": "platform", "values": ["ios", "android", "web"]}]


def _send_groups(
    client: Any, d: MetricDefinition, sizes: dict[str, tuple[list[float], int]]
) -> None:
    """``sizes``: per platform, the shares of its values and how many reports."""
    rng = random.Random(sum(n for _, n in sizes.values()))
    payloads = []
    for platform, (shares, n) in sizes.items():
        segment = d.segment({"platform": platform})
        for v in rng.choices(range(d.k), shares, k=n):
            payload = d.mechanism.perturb(v, rng=rng)
            payload[SEGMENT_KEY] = segment  # what the collector adds beside a report
            payloads.append(json.dumps(payload))
    client.register_script(_LOADER)(keys=[keys.stream_key(d.name, d.version)], args=payloads)


def _group_rule(alerts: Alerts, d: MetricDefinition, group: str, **spec: Any) -> dict[str, Any]:
    body = {"value": "dark", **(spec or {"kind": "share_above", "level": 0.3})}
    return alerts.create(AlertSpec(metric=d.name, dimension="platform", group=group, **body))


def test_a_rule_on_a_group_the_breakdown_hides_shows_no_figure_until_it_is_shown(
    redis_db: Any,
) -> None:
    """A group with fewer reports than LDP_MIN_SEGMENT_REPORTS is hidden from the breakdown;
    a rule on it armed then would serve its all-time sums as the origin (and the figures
    since, with the later all-time figure, would give them). It waits instead: no origin,
    no n, no estimate, no firing, until the group is shown; then it is armed from there.
    The old code armed it at once and served the hidden group's sums."""
    client = redis_db.client()
    d = _metric(client, dimensions=PLATFORMS)
    alerts = Alerts(client, min_segment_reports=50)
    _send_groups(client, d, {"ios": (NULL, 3000), "android": (NULL, 3000), "web": (NULL, 20)})
    _drain(client, alerts)
    rule = _group_rule(alerts, d, "web")
    assert rule["origin"] is None and rule["armed_at"] is None
    assert "platform=web is hidden from the breakdown in all (small" in rule["waiting"]
    _send_groups(client, d, {"web": ([0.1, 0.8, 0.05, 0.05], 25)})  # 45: still hidden
    _drain(client, alerts)
    last = store.states(client)["last"][rule["id"]]
    assert last["firing"] is False and "waiting" in last
    assert not {"n", "estimate", "ci"} & set(last)
    (listed,) = alerts.listing()
    assert listed["origin"] is None and listed["waiting"]
    _send_groups(client, d, {"web": (NULL, 100)})  # 145 reports: shown, armed from here
    _drain(client, alerts)
    (listed,) = alerts.listing()
    assert listed["waiting"] is None and listed["origin"][0] == 145
    assert store.firings(client) == {}
    _send_groups(client, d, {"web": ([0.1, 0.8, 0.05, 0.05], 1500)})
    _drain(client, alerts)
    assert store.firings(client)[rule["id"]]["n"] == 1500


def test_a_group_held_back_with_a_small_one_is_not_watched_either(redis_db: Any) -> None:
    """ios and android large, web small: the breakdown holds back one large group with web
    (the total minus the shown groups would give web); a rule on the held-back group
    shows no figure and does not fire, while a rule on the shown one does."""
    from aggregator.query.suppression import hidden_groups

    client = redis_db.client()
    d = _metric(client, dimensions=PLATFORMS)
    alerts = Alerts(client, min_segment_reports=50)
    _send_groups(client, d, {"ios": (NULL, 3000), "android": (NULL, 2000), "web": (NULL, 10)})
    _drain(client, alerts)
    hidden = hidden_groups(client, d, 50).of("all", "platform")
    (held,) = set(hidden) - {"web"}
    (shown,) = {"ios", "android"} - {held}
    rules = {g: _group_rule(alerts, d, g) for g in (held, shown)}
    assert rules[held]["waiting"] and "with_small" in rules[held]["waiting"]
    assert rules[shown]["waiting"] is None
    moved = ([0.2, 0.6, 0.1, 0.1], 3000)
    _send_groups(client, d, {held: moved, shown: moved})
    _drain(client, alerts)
    assert set(store.firings(client)) == {rules[shown]["id"]}
    assert "n" not in store.states(client)["last"][rules[held]["id"]]


def test_a_change_rule_against_days_that_hide_its_group_is_refused(redis_db: Any) -> None:
    """Baseline days are past: a group they hide stays hidden, and the baseline's
    interval would disclose it; the rule is refused with the reason."""
    import time

    client = redis_db.client()
    d = _metric(client, dimensions=PLATFORMS)
    _send_groups(client, d, {"ios": (NULL, 3000), "android": (NULL, 3000), "web": (NULL, 20)})
    _drain(client, Alerts(client))
    tomorrow = Alerts(client, clock=lambda: time.time() + 86400, min_segment_reports=50)
    with pytest.raises(RuleRefused, match="would disclose them: platform=web is hidden"):
        _group_rule(tomorrow, d, "web", kind="change", min_change=0.05, baseline_days=1)
    rule = _group_rule(tomorrow, d, "ios", kind="change", min_change=0.05, baseline_days=1)
    assert rule["baseline"]["n"] == 3000


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"kind": "share_above", "value": "nope", "level": 0.2}, "not in the domain"),
        ({"kind": "mean_above", "level": 0.2, "value": "dark"}, "needs a numeric metric"),
        ({"kind": "share_above", "value": "dark", "level": 1.5}, "share in (0, 1)"),
        ({"kind": "change", "value": "dark"}, "baseline holds no reports"),
        ({"kind": "share_above", "value": "dark", "level": 0.2, "dimension": "x"}, "together"),
    ],
)
def test_a_rule_that_cannot_keep_its_word_is_refused(
    redis_db: Any, spec: dict[str, Any], needle: str
) -> None:
    client = redis_db.client()
    _metric(client)
    with pytest.raises(RuleRefused, match=None) as caught:
        Alerts(client).create(AlertSpec(metric="app.theme", **spec))
    assert needle in str(caught.value)


def test_a_poisoning_alarm_is_notified_once_through_the_same_outbox(redis_db: Any) -> None:
    """Fake clients who skip the randomizer (every report says "light") raise the
    baseline-free alarm of the all-time window; it is queued once for the alarm webhook."""
    client = redis_db.client()
    d = _metric(client)
    _send(client, d, NULL, 2000, seed=8)
    loader = client.register_script(_LOADER)
    loader(keys=[keys.stream_key(d.name, d.version)], args=[json.dumps({"v": 0})] * 6000)
    channels = AlarmChannels(webhook="https://hooks.example/alarms", email=("sec@example.org",))
    alerts = Alerts(client, public_url="https://ldp.example", alarms=channels)
    _drain(client, alerts)
    events = [e for e in store.recent_events(client) if e["type"] == "poisoning"]
    assert events and all(e["metric"] == d.name for e in events)
    assert "https://ldp.example/ui/metric/app.theme" in events[0]["message"]
    queued = client.xrange(store._key("outbox"))
    targets = sorted({json.loads(f[b"d"])["target"] for _, f in queued})
    assert targets == ["https://hooks.example/alarms", "sec@example.org"]
    assert len(queued) == 2 * len(events)
    alerts._alarms_due.clear()  # test again at once: nothing new to say
    alerts.evaluate({d.name})
    assert client.xlen(store._key("outbox")) == len(queued)


# -- the API and the page ------------------------------------------------------------------

ADMIN = "admin-token-40-40-40-40"


def test_the_api_defines_lists_acknowledges_silences_and_deletes_rules(redis_db: Any) -> None:
    from ldp_server.app import create_server_app

    app = create_server_app(
        {
            "REDIS_URL": redis_db.url,
            "ADMIN_TOKEN": ADMIN,
            "TESTING": True,
            "PUBLIC_URL": "https://ldp.example",
        }
    )
    http = app.test_client()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    client = redis_db.client()
    d = _metric(client)
    body = {
        "metric": d.name,
        "kind": "share_above",
        "value": "dark",
        "level": 0.3,
        "webhook": "https://hooks.example/x",
    }
    assert http.post("/v1/alerts", json=body).status_code == 401
    # A token that is not valid: refused as on every other change route.
    assert (
        http.post("/v1/alerts", json=body, headers={"Authorization": "Bearer nope"}).status_code
        == 403
    )
    bad = http.post("/v1/alerts", json={**body, "value": "nope"}, headers=auth)
    assert bad.status_code == 400 and "not in the domain" in bad.json["error"]
    typo = http.post("/v1/alerts", json={**body, "levle": 0.3}, headers=auth)
    assert typo.status_code == 400 and "levle" in typo.json["error"]
    made = http.post("/v1/alerts", json=body, headers=auth)
    assert made.status_code == 201, made.json
    rule_id = made.json["id"]
    assert made.json["status"] == "ok" and made.json["summary"].startswith("share of 'dark'")
    # ack needs a firing rule: 409; then fire it through the worker
    assert http.post(f"/v1/alerts/{rule_id}/acknowledge", headers=auth).status_code == 409
    _send(client, d, [0.1, 0.7, 0.1, 0.1], 2000, seed=7)
    _drain(client, Alerts(client, public_url="https://ldp.example"))
    listed = http.get("/v1/alerts").json
    (rule,) = listed["rules"]
    assert rule["status"] == "firing" and listed["events"][0]["type"] == "fired"
    assert "https://ldp.example/ui/metric/app.theme" in rule["firing"]["message"]
    acked = http.post(f"/v1/alerts/{rule_id}/acknowledge", json={"note": "mine"}, headers=auth)
    assert acked.status_code == 200 and acked.json["status"] == "acknowledged"
    page = http.get("/ui/alerts")
    assert (
        page.status_code == 200 and b"acknowledged" in page.data and rule_id.encode() in page.data
    )
    silenced = http.post(f"/v1/alerts/{rule_id}/silence", json={"seconds": 60}, headers=auth)
    assert silenced.json["silenced_until"] > 0
    assert (
        http.post(f"/v1/alerts/{rule_id}/silence", json={"seconds": -1}, headers=auth).status_code
        == 400
    )
    resolved = http.post(f"/v1/alerts/{rule_id}/resolve", headers=auth)
    assert resolved.json["status"] == "ok" and resolved.json["origin"][0] == 2000
    assert http.delete(f"/v1/alerts/{rule_id}", headers=auth).status_code == 204
    assert http.get(f"/v1/alerts/{rule_id}").status_code == 404
