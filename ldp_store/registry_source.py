"""The metrics registry a server applied (``ldp serve --metrics``): its file name and text,
kept so the dashboard's privacy dictionary (``/ui/dictionary``) shows what was applied.

See ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import json
from typing import Any

from ldp_store.keys import REGISTRY_SOURCE_KEY

__all__ = ["load_source", "save_source"]

MAX_SOURCE_BYTES = 4 * 1024 * 1024
"""Largest registry kept: 200 metrics of 256 values each are about 1 MB of TOML."""


def save_source(redis: Any, name: str, text: str) -> None:
    """Keep the applied registry (``name``: its file name, which says TOML or JSON).

    Raises:
        ValueError: a registry larger than :data:`MAX_SOURCE_BYTES`.
    """
    body = json.dumps({"name": name, "text": text})
    if len(body.encode()) > MAX_SOURCE_BYTES:
        raise ValueError(f"the registry is larger than {MAX_SOURCE_BYTES} bytes")
    redis.set(REGISTRY_SOURCE_KEY, body)


def load_source(redis: Any) -> tuple[str, str] | None:
    """The applied registry's (file name, text), None when none was applied."""
    raw = redis.get(REGISTRY_SOURCE_KEY)
    if raw is None:
        return None
    data = json.loads(raw)
    return str(data["name"]), str(data["text"])
