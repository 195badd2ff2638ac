"""Architecture rules: the protocol is stdlib-only and its math lives in one place."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

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


PACKAGES = ("client_sdk", "ldp_store", "ldp_api", "collector", "aggregator")

MAY_IMPORT = {
    "client_sdk": {"client_sdk"},
    "ldp_store": {"client_sdk", "ldp_store"},
    "ldp_api": {"client_sdk", "ldp_api"},
    "collector": {"client_sdk", "ldp_store", "ldp_api", "collector"},
    "aggregator": {"client_sdk", "ldp_store", "ldp_api", "aggregator"},
}
"""DESIGN.md's arrows: the services are peers over the shared rooms (the SDK's protocol,
the Redis contract, the HTTP contract), and the shared rooms import no service."""

COMPOSER = ROOT / "aggregator" / "service" / "app.py"
"""The one module that composes both services (``ldp serve``'s app)."""


def test_the_packages_import_only_along_the_arrows() -> None:
    offenders = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            allowed = MAY_IMPORT[package] | ({"collector"} if path == COMPOSER else set())
            for node in ast.walk(ast.parse(path.read_text())):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top in PACKAGES and top not in allowed:
                        offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)
