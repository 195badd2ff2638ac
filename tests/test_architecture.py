"""Architecture rules: the protocol is stdlib-only, its math lives in one place, and the
SDK's rooms and names stay as STYLE.md 18-20 want them (one errors module, no _random)."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import client_sdk

ROOT = Path(__file__).resolve().parents[1]
SDK = ROOT / "client_sdk"
SDK_MECHANISMS = SDK / "mechanisms"
SDK_ERRORS = SDK / "errors.py"


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
        "import client_sdk, client_sdk.mechanisms, client_sdk.errors, client_sdk.options;"
        "import client_sdk.store;"  # the whole SDK, the durable store (sqlite3) included
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


# -- rooms and names (STYLE.md 18-20) -----------------------------------------------------------


def _sdk_modules() -> list[str]:
    """Every module and package of client_sdk, by dotted name."""
    found = pkgutil.walk_packages(client_sdk.__path__, "client_sdk.")
    return ["client_sdk", *(info.name for info in found)]


def test_the_sdk_has_no_module_named_random() -> None:
    """The randomness module is public: client_sdk.mechanisms.randomness, no _random shim."""
    names = _sdk_modules()
    assert "client_sdk.mechanisms.randomness" in names
    assert not [name for name in names if name.rsplit(".", 1)[-1] == "_random"]
    assert not list(SDK.rglob("_random.py"))
    assert importlib.util.find_spec("client_sdk.mechanisms._random") is None


def test_the_sdk_has_no_worker_beside_the_aggregators() -> None:
    """One Worker in the repo (the aggregator's stream worker); the SDK's is the Uploader."""
    assert not [name for name in _sdk_modules() if name.rsplit(".", 1)[-1] == "worker"]
    for path in SDK.rglob("*.py"):
        classes = {
            n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)
        }
        assert "Worker" not in classes, path.relative_to(ROOT)


def _base_name(node: ast.expr) -> str:
    """``Exception`` of ``Exception``, ``Error`` of ``sqlite3.Error``, ``X`` of ``X[T]``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def test_every_sdk_exception_is_defined_in_errors_py() -> None:
    """Every class under client_sdk deriving from an exception lives in client_sdk/errors.py.

    Read from the source (the AST), so no module needs importing: a base is an exception
    when it is a built-in exception, is named like one (``sqlite3.Error``,
    ``http.client.HTTPException``), or is itself such a class defined in the SDK.
    """
    classes: list[tuple[Path, str, list[str]]] = []
    for path in sorted(SDK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes.append((path, node.name, [_base_name(b) for b in node.bases]))
    exceptions = {
        name
        for name, obj in vars(builtins).items()
        if isinstance(obj, type) and issubclass(obj, BaseException)
    }

    def is_exception(base: str) -> bool:
        return base in exceptions or base.endswith(("Error", "Exception", "Warning"))

    found: dict[str, Path] = {}
    while True:  # until no class is added: a subclass of an SDK exception is one too
        more = {
            name: path
            for path, name, bases in classes
            if name not in found and any(is_exception(b) or b in found for b in bases)
        }
        if not more:
            break
        found.update(more)
    assert found, "no exception class found: the AST walk is broken"
    misplaced = sorted(
        f"{path.relative_to(ROOT)}: {name}" for name, path in found.items() if path != SDK_ERRORS
    )
    assert not misplaced, "define SDK exceptions in client_sdk/errors.py:\n" + "\n".join(misplaced)


def test_every_sdk_exception_is_defined_in_errors_py_at_run_time() -> None:
    """The same rule on the imported modules (catches a base the AST cannot name)."""
    misplaced = []
    for name in _sdk_modules():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("client_sdk")
                and obj.__module__ != "client_sdk.errors"
            ):
                misplaced.append(f"{obj.__module__}.{obj.__qualname__}")
    assert not misplaced, misplaced


def test_the_errors_module_imports_nothing_from_the_sdk() -> None:
    """So the stdlib-only mechanisms may import it (and it stays stdlib-only itself)."""
    for node in ast.walk(ast.parse(SDK_ERRORS.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "errors.py: no relative imports"
            names = [node.module or ""]
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top == "__future__", (
                f"errors.py imports {name}"
            )
