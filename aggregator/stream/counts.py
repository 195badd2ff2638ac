"""The worker's write side of a window's counts: tidying and folding its delta blobs.

The worker calls :func:`tidy_window` after a commit; what the stored formats mean is in
:mod:`ldp_store.schema`, and reading a window is :mod:`aggregator.query.window`'s job
(see docs/architecture/pipeline.md).
"""

from __future__ import annotations

import hashlib
from typing import Literal

import numpy as np
import redis

from aggregator.query.window import add_deltas, add_packed
from aggregator.stats.batch import delta_blob
from client_sdk.wire import MetricDefinition
from ldp_store import keys, schema, scripts

__all__ = ["fold_window", "tidy_window"]


def tidy_window(
    client: redis.Redis,
    definition: MetricDefinition,
    window: str,
    shard: int,
    fold_bytes: float = 0.0,
) -> tuple[str | None, int]:
    """Tidy a window's delta blobs (see Deltas in :mod:`ldp_store.schema`): fold them into
    its packed support counts once they hold ``fold_bytes`` or more, else merge two or
    more into one (a list then keeps neither the batches' boundaries nor their order).
    Reads the three keys as one snapshot, adds in numpy, and writes with
    :data:`ldp_store.scripts.FOLD`, which checks that nothing changed in between.

    Returns:
        (``"folded"``, ``"merged"`` or None: nothing to do, or another worker came first
        and nothing changed; the blobs it tidied).

    Raises:
        ValueError: corrupt counts (a packed string of the wrong length, a bad blob).
    """
    name, version, k = definition.name, definition.version, definition.k
    _, support_key, delta_key = keys.window_keys(name, version, window, shard)
    _, packed, blobs = scripts.read_window(
        client, name=name, version=version, window=window, shard=shard
    )
    size = sum(len(b) for b in blobs)
    if not blobs or (len(blobs) == 1 and size < fold_bytes):
        return None, 0
    delta = np.zeros(k, dtype=np.int64)
    add_deltas(delta, blobs, delta_key)
    mode: Literal["fold", "merge"]
    if size >= fold_bytes:
        add_packed(delta, packed, support_key)
        mode, payload = "fold", delta.astype(schema.SUPPORT_DTYPE).tobytes()
    else:
        mode, payload = "merge", delta_blob(delta)
    done = scripts.fold_window(
        client,
        name=name,
        version=version,
        window=window,
        shard=shard,
        blobs=len(blobs),
        blobs_sha1=hashlib.sha1(b"".join(blobs)).hexdigest(),  # noqa: S324 (identity)
        packed_sha1=hashlib.sha1(packed or b"").hexdigest(),  # noqa: S324
        mode=mode,
        payload=payload,
    )
    if not done:
        return None, 0
    return ("folded" if mode == "fold" else "merged"), len(blobs)


def fold_window(client: redis.Redis, definition: MetricDefinition, window: str, shard: int) -> int:
    """Fold all of a window's delta blobs into its packed counts now (:func:`tidy_window`
    with no threshold).

    Returns:
        The blobs folded (0: none, or another worker came first and nothing changed).
    """
    mode, blobs = tidy_window(client, definition, window, shard)
    return blobs if mode == "folded" else 0
