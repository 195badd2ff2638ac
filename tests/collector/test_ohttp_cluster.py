"""The gateway, its keys and the shuffle pools on a Redis Cluster of real redis-servers:
the key rotation's transaction touches one key, a pool and its stream share a hash slot."""

from __future__ import annotations

import json
from typing import Any

from collector_helpers import define, make_app, reports
from relay_helpers import key_config, opened, post, seal

from ldp_store import keys, streams
from ldp_store.ohttp_keys import GatewayKeys

SPEC = {"domain": ["a", "b", "c"], "epsilon": 1.0, "mechanism": "grr"}


def test_relayed_reports_are_pooled_and_released_on_a_cluster(cluster_db: Any) -> None:
    app = make_app(cluster_db.url, SHUFFLE_MIN_BATCH=5)
    client = app.test_client()
    theme = define(client, "app.theme", SPEC)
    config = key_config(client)
    for report in reports(theme, 5):
        sealed, context = seal(config, json.dumps({"reports": [report]}).encode())
        assert opened(post(client, sealed), context).status == 202
    redis = cluster_db.client()
    assert streams.length(redis, keys.stream_key(theme.name, theme.version)) == 5
    assert not redis.exists(keys.pool_key(theme.name, theme.version))
    store = GatewayKeys(redis)
    assert len(store.rotate()) == 2  # WATCH/MULTI on the one keys hash works on a cluster
