"""The read side mounts on any app that carries the shared request context
(ldp_api/context.py): it needs nothing of the collector, not even imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from flask import Flask
    from prometheus_client import CollectorRegistry, generate_latest
    import aggregator.web
    from ldp_api.context import SharedContext, attach
    from ldp_store import connection
    from ldp_store.lifecycle import MemoryUsage
    from ldp_store.registry import Registry

    class Hooks:
        def __init__(self):
            self.registry = CollectorRegistry()

        def add_collector(self, collector):
            self.registry.register(collector)

    client = connection.connect(sys.argv[1])
    Registry(client).put("app.theme", {"domain": ["light", "dark"], "epsilon": 1.0})
    app = Flask("bare")
    hooks = Hooks()
    attach(app, SharedContext(client, Registry(client), MemoryUsage(client), hooks))
    aggregator.web.install(app)
    web = app.test_client()
    overview = web.get("/v1/overview")
    estimates = web.get("/v1/estimates/app.theme")
    print(json.dumps({
        "overview": [overview.status_code, overview.get_json()],
        "estimates": [estimates.status_code, estimates.get_json()],
        "dashboard": web.get("/").status_code,
        "metrics": generate_latest(hooks.registry).decode(),
        "collector": sorted(m for m in sys.modules if m.split(".")[0] == "collector"),
    }))
    """
)


def test_the_read_side_serves_on_an_app_without_the_collector(redis_db: Any) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, redis_db.url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.splitlines()[-1])
    assert found["collector"] == []  # not imported, not needed
    status, overview = found["overview"]
    assert status == 200 and [m["name"] for m in overview["metrics"]] == ["app.theme"]
    status, estimates = found["estimates"]
    assert status == 200 and estimates["metric"] == "app.theme" and estimates["n"] == 0
    assert found["dashboard"] == 200
    # The read side's metrics reach the app's registry through the hooks: the read
    # guard's counters, and the poisoning alarms evaluated at the scrape.
    assert "ldp_read_discoveries_total" in found["metrics"]
    assert "ldp_poisoning_checks_up 1.0" in found["metrics"]
