"""The JVM SDK for the tests: ``client_jvm/build.py`` loaded, the jar and the compiled tests
built once per session (under its file lock, so parallel workers share one build)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "client_jvm_build", ROOT / "client_jvm" / "build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build = _load()


def built() -> ModuleType:
    """The build module with the jar and the tests compiled; skips when the JDK or JUnit is
    missing (``python3 tasks.py test`` installs them as root)."""
    why = build.missing()
    if why is not None:
        pytest.skip(why)
    build.build_tests()
    return build
