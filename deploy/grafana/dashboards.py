"""Grafana dashboards for ldp-telemetry, generated with grafanalib.

Run ``python deploy/grafana/dashboards.py`` to rewrite ``deploy/grafana/dashboards/*.json``
(tests/test_prometheus_rules.py checks that the committed files are this script's output,
that every expression parses, and that each names a series ``ldp serve`` exports).
docker-compose.yml provisions them in Grafana beside a Prometheus scraping the services.
Guide: docs/guides/alerts.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafanalib._gen import DashboardEncoder  # what grafanalib's own generate-dashboard uses
from grafanalib.core import Dashboard, GridPos, Target, TimeSeries

HERE = Path(__file__).resolve().parent
OUT = HERE / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "ldp-prometheus"}
"""The datasource the provisioning (provisioning/datasources/prometheus.yml) defines."""


def panel(title: str, exprs: dict[str, str], unit: str, row: int, col: int) -> TimeSeries:
    """One time series panel, half the width, a row of 8 units per ``row``."""
    return TimeSeries(
        title=title,
        dataSource=DATASOURCE,
        targets=[
            Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + i), datasource=DATASOURCE)
            for i, (legend, expr) in enumerate(exprs.items())
        ],
        unit=unit,
        gridPos=GridPos(h=8, w=12, x=12 * col, y=8 * row),
    )


def dashboards() -> dict[str, Dashboard]:
    """Every dashboard by file name."""
    rate = "sum by (status) (rate(ldp_collector_responses_total[5m]))"
    return {
        "ingest": Dashboard(
            title="ldp-telemetry: ingest",
            uid="ldp-ingest",
            tags=["ldp-telemetry"],
            panels=[
                panel("Responses by status", {"{{status}}": rate}, "reqps", 0, 0),
                panel(
                    "Reports accepted and rejected",
                    {
                        "accepted": "sum(rate(ldp_collector_reports_accepted_total[5m]))",
                        "rejected {{reason}}": "sum by (reason) "
                        "(rate(ldp_collector_reports_rejected_total[5m]))",
                    },
                    "ops",
                    0,
                    1,
                ),
                panel(
                    "503 answers by reason",
                    {"{{reason}}": "sum by (reason) (rate(ldp_collector_unavailable_total[5m]))"},
                    "reqps",
                    1,
                    0,
                ),
                panel(
                    "Request latency (p50, p99)",
                    {
                        f"p{q}": f"histogram_quantile(0.{q}, sum by (le) "
                        "(rate(ldp_collector_request_duration_seconds_bucket[5m])))"
                        for q in (50, 99)
                    },
                    "s",
                    1,
                    1,
                ),
            ],
        ).auto_panel_ids(),
        "drain": Dashboard(
            title="ldp-telemetry: drain and lag",
            uid="ldp-drain",
            tags=["ldp-telemetry"],
            panels=[
                panel("Reports waiting (lag)", {"{{metric}}": "ldp_lag_reports"}, "short", 0, 0),
                panel("Dead letters", {"{{metric}}": "ldp_dead_letters"}, "short", 0, 1),
                panel(
                    "Counting rate",
                    {"{{metric}}": "rate(ldp_reports_counted[5m])"},
                    "ops",
                    1,
                    0,
                ),
                panel(
                    "Restarts of ldp serve's children",
                    {"{{child}}": "increase(ldp_supervisor_restarts_total[15m])"},
                    "short",
                    1,
                    1,
                ),
                panel(
                    "Alerts firing, notifications queued and dead",
                    {
                        "firing": "ldp_alerts_firing",
                        "queued": "ldp_alert_outbox",
                        "dead letters": "ldp_alert_dead_letters",
                    },
                    "short",
                    2,
                    0,
                ),
                panel(
                    "Poisoning alarms",
                    {"{{metric}} {{kind}}": "max by (metric, kind) (ldp_poisoning_alarm)"},
                    "short",
                    2,
                    1,
                ),
            ],
        ).auto_panel_ids(),
        "memory": Dashboard(
            title="ldp-telemetry: memory",
            uid="ldp-memory",
            tags=["ldp-telemetry"],
            panels=[
                panel(
                    "Redis memory",
                    {
                        "used": "ldp_redis_used_memory_bytes",
                        "maxmemory": "ldp_redis_maxmemory_bytes",
                    },
                    "bytes",
                    0,
                    0,
                ),
                panel("Per metric", {"{{metric}}": "ldp_redis_memory_bytes"}, "bytes", 0, 1),
                panel(
                    "Replay guard",
                    {
                        "held": "ldp_replay_guard_memory_bytes",
                        "budget": "ldp_replay_guard_budget_bytes",
                    },
                    "bytes",
                    1,
                    0,
                ),
                panel(
                    "Replay guard: refused shards, early epochs",
                    {
                        "refused": "ldp_replay_guard_refused_units",
                        "shortened": "sum(increase(ldp_replay_guard_shortened_total[1h]))",
                    },
                    "short",
                    1,
                    1,
                ),
            ],
        ).auto_panel_ids(),
        "relay": Dashboard(
            title="ldp-telemetry: relay (Oblivious HTTP)",
            uid="ldp-relay",
            tags=["ldp-telemetry"],
            panels=[
                panel(
                    "Gateway requests by outcome",
                    {"{{outcome}}": "sum by (outcome) (rate(ldp_ohttp_requests_total[5m]))"},
                    "reqps",
                    0,
                    0,
                ),
                panel(
                    "Shuffled batches released",
                    {
                        "batches": "sum(rate(ldp_shuffle_batches_total[15m]))",
                        "reports": "sum(rate(ldp_shuffle_reports_total[15m]))",
                    },
                    "ops",
                    0,
                    1,
                ),
            ],
        ).auto_panel_ids(),
        "metrics": Dashboard(
            title="ldp-telemetry: reports per metric",
            uid="ldp-metrics",
            tags=["ldp-telemetry"],
            panels=[
                panel("Reports counted (n)", {"{{metric}}": "ldp_reports_counted"}, "short", 0, 0),
                panel(
                    "Reports accepted per metric",
                    {
                        "{{metric}}": "sum by (metric) "
                        "(rate(ldp_collector_reports_accepted_total[5m]))"
                    },
                    "ops",
                    0,
                    1,
                ),
            ],
        ).auto_panel_ids(),
    }


def rendered() -> dict[str, str]:
    """Each dashboard's JSON as written to ``dashboards/<name>.json``."""
    return {
        name: json.dumps(d.to_json_data(), cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"
        for name, d in dashboards().items()
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, text in rendered().items():
        (OUT / f"{name}.json").write_text(text)
        print(f"wrote {OUT / name}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
