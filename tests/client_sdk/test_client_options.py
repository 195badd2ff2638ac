"""The client's settings: checked once, at construction, with the valid range in the message."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest

from client_sdk import Client
from client_sdk.options import MIN_BATCH_BYTES, ClientOptions, ClientSettings
from client_sdk.queue import MemoryQueue

BAD = [
    ({"flush_at": 0}, "flush_at must be an integer >= 1, got 0"),
    ({"flush_at": True}, "flush_at must be an integer >= 1, got True"),
    ({"max_queue": 1.5}, "max_queue must be an integer >= 1, got 1.5"),
    ({"max_queue_bytes": 0}, "max_queue_bytes must be an integer >= 1, got 0"),
    ({"max_batch_reports": -3}, "max_batch_reports must be an integer >= 1, got -3"),
    ({"max_batch_bytes": 64}, f"max_batch_bytes must be an integer >= {MIN_BATCH_BYTES}, got 64"),
    ({"flush_interval": 0}, "flush_interval must be finite and > 0, got 0"),
    ({"flush_interval": math.nan}, "flush_interval must be finite and > 0, got nan"),
    (
        {"flush_interval": "5"},
        "flush_interval must be a number of seconds (finite and > 0), got '5'",
    ),
    ({"metrics_ttl": -1}, "metrics_ttl must be finite and >= 0, got -1"),
    ({"metrics_ttl": math.inf}, "metrics_ttl must be finite and >= 0, got inf"),
    ({"timeout": 0}, "timeout must be finite and > 0, got 0"),
    ({"timeout": True}, "timeout must be a number of seconds (finite and > 0), got True"),
    ({"sleep": 3}, "sleep must be callable or None, got int"),
    ({"clock": 3}, "clock must be callable, got int"),
    ({"wallclock": "now"}, "wallclock must be callable, got str"),
    ({"storage_dir": 5}, "storage_dir must be a path (str or os.PathLike) or None, got int"),
    ({"storage_dir": "/tmp/x", "queue": MemoryQueue()}, "give storage_dir or queue, not both"),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_a_bad_setting_is_refused_with_its_range(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ClientOptions(**options)


@pytest.mark.parametrize(("options", "message"), BAD)
def test_the_client_raises_the_same_error_at_construction(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Client("http://example.org", **options)


def test_the_edges_of_each_range_are_accepted(tmp_path: Path) -> None:
    options = ClientOptions(
        flush_at=1,
        max_queue=1,
        max_queue_bytes=1,
        max_batch_reports=1,
        max_batch_bytes=MIN_BATCH_BYTES,
        flush_interval=1e-9,
        metrics_ttl=0,
        timeout=1,
        sleep=None,
        storage_dir=tmp_path,
    )
    assert options.metrics_ttl == 0.0 and type(options.metrics_ttl) is float
    assert type(options.timeout) is float and type(options.flush_interval) is float


def test_options_are_frozen() -> None:
    options = ClientOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.flush_at = 5  # type: ignore[misc]


def test_the_client_takes_every_option_by_name_and_no_other() -> None:
    """ClientOptions declares the settings once; Client(url, **settings) takes exactly them."""
    names = [f.name for f in dataclasses.fields(ClientOptions)]
    assert "flush_at" in names and "device_budget" in names
    with pytest.raises(TypeError, match=r"unknown setting\(s\) 'flushat'; the settings are: "):
        Client("http://example.org", flushat=3)
    with pytest.raises(TypeError) as caught:
        Client("http://example.org", flush_at=3, storage=".", rngg=None)
    assert "'rngg', 'storage'" in str(caught.value) and ", ".join(names) in str(caught.value)
    defaults = ClientOptions()
    client = Client("http://example.org")
    try:
        assert client._options == defaults
    finally:
        client.shutdown(0)


def test_the_client_uses_the_checked_options() -> None:
    client = Client("http://example.org", flush_at=7, flush_interval=2, metrics_ttl=0)
    try:
        assert client._options == ClientOptions(flush_at=7, flush_interval=2.0, metrics_ttl=0)
        assert client._uploader._flush_at == 7 and client._uploader._flush_interval == 2.0
    finally:
        client.shutdown(0)


def test_the_typed_settings_are_the_options_fields() -> None:
    """ClientSettings (for mypy) and ClientOptions (checked at run time) declare the same
    settings with the same types."""
    typed = ClientSettings.__annotations__
    declared = {f.name: f.type for f in dataclasses.fields(ClientOptions)}
    assert list(typed) == list(declared)
    assert {name: str(t) for name, t in declared.items()} == {
        name: t.__forward_arg__ if hasattr(t, "__forward_arg__") else str(t)
        for name, t in typed.items()
    }
    assert ClientSettings.__required_keys__ == frozenset()


MISSPELT = """
from client_sdk import Client

Client("http://example.org", flush_att=5)
Client("http://example.org", storage_dir=3)
"""

SPELT = """
from client_sdk import Client

Client("http://example.org", flush_at=5, storage_dir="ldp", timeout=2.5)
"""


def test_mypy_refuses_a_misspelt_or_mistyped_setting(tmp_path: Path) -> None:
    """Client(url, **settings: Unpack[ClientSettings]): the mistake fails in mypy, before
    it is a TypeError at run time (the same snippet spelt right passes)."""
    from mypy import api

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "misspelt.py").write_text(MISSPELT)
    (tmp_path / "spelt.py").write_text(SPELT)
    common = ["--config-file", str(root / "pyproject.toml"), "--no-error-summary"]
    common += ["--cache-dir", str(root / ".mypy_cache")]
    report, _, status = api.run([*common, str(tmp_path / "misspelt.py")])
    assert status == 1, report
    assert 'Unexpected keyword argument "flush_att" for "Client"' in report, report
    assert 'Argument "storage_dir" to "Client" has incompatible type "int"' in report, report
    report, _, status = api.run([*common, str(tmp_path / "spelt.py")])
    assert status == 0, report
