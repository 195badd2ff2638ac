#!/usr/bin/env python3
"""One entry point for a fresh machine with only Python: set up, test, run.

    python3 tasks.py test            # venv + install (+ Debian's chromium, nginx, promtool, JDK 17,
                                     # junit5 and kotlin, as root) + npm ci in client_js/ and
                                     # tests/browser/ + ruff + mypy + the docs site + the
                                     # whole test suite (with the JS and JVM SDKs' tests)
    python3 tasks.py ldp ARGS...     # venv + install + the ``ldp`` command line

The virtual environment lives in ``.venv`` and is reinstalled only when
``pyproject.toml`` changes. Standard library only: this runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def _run(*cmd: str | os.PathLike[str]) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    # NO_MKDOCS_2_WARNING: mkdocs-material's end-of-life banner, printed on every build.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    code = subprocess.call([str(c) for c in cmd], cwd=ROOT, env=env)
    if code:
        sys.exit(code)


def ensure_venv(extra: str = "dev") -> None:
    """Create .venv and install the project with ``extra`` unless already current."""
    stamp_key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extra.encode()).hexdigest()
    stamp = VENV / f".installed-{stamp_key[:16]}"
    if stamp.exists():
        return
    if not (BIN / "python").exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    _run(BIN / "python", "-m", "pip", "install", "--upgrade", "--quiet", "pip")
    _run(BIN / "python", "-m", "pip", "install", "--quiet", "-e", f".[{extra}]")
    for old in VENV.glob(".installed-*"):
        old.unlink()
    stamp.touch()


CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium, which the browser tests drive (``playwright install`` cannot
download browsers on these machines)."""

NGINX = Path("/usr/sbin/nginx")
"""Debian's nginx, which tests/test_nginx_proxy.py runs with deploy/nginx.conf."""


def _apt_install(binary: Path, package: str, tests: str) -> None:
    """Install a Debian ``package`` providing ``binary`` when it is missing, saying first
    what it installs and for which ``tests``.

    Only as root with apt-get; otherwise the ``tests`` that need it skip and say why.
    """
    if binary.exists():
        return
    if os.name != "posix" or os.geteuid() != 0 or not Path("/usr/bin/apt-get").exists():
        print(
            f"note: {binary} is missing and this is not root with apt-get: {tests} will be skipped",
            flush=True,
        )
        return
    print(
        f"tasks.py: {binary} is missing: installing Debian's {package} for {tests}, now, "
        f"as root (apt-get update, then apt-get install {package}); to install nothing, "
        "install it first or run tasks.py as another user (those tests then skip)",
        flush=True,
    )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        print("+", " ".join(cmd), flush=True)
        if subprocess.call(cmd, env=env) != 0:
            print(f"note: installing {package} failed: {tests} will be skipped", flush=True)
            return


def ensure_chromium() -> None:
    """Install Debian's ``chromium`` for the browser tests when it is missing."""
    _apt_install(CHROMIUM, "chromium", "the browser tests (tests/browser)")


def ensure_nginx() -> None:
    """Install Debian's ``nginx-light`` for the proxy test when it is missing."""
    _apt_install(NGINX, "nginx-light", "the proxy test (tests/test_nginx_proxy.py)")


PROMTOOL = Path("/usr/bin/promtool")


def ensure_promtool() -> None:
    """Install Debian's ``prometheus`` (its ``promtool``) for the rules' tests when missing."""
    _apt_install(
        PROMTOOL, "prometheus", "the alerting rules' tests (tests/test_prometheus_rules.py)"
    )


JAVAC = Path("/usr/bin/javac")
"""Debian's JDK 17 compiler, which builds the JVM SDK (client_jvm/build.py)."""

JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")
"""Debian's JUnit 5 console launcher, which runs the JVM SDK's tests (Maven Central, where
JUnit usually comes from, is out of these machines' reach)."""

KOTLINC = Path("/usr/bin/kotlinc")
"""Debian's Kotlin compiler, which builds the Kotlin example app against the JVM SDK."""


def ensure_jvm() -> None:
    """Install Debian's JDK 17, ``junit5`` and ``kotlin`` for the JVM SDK when missing."""
    _apt_install(JAVAC, "openjdk-17-jdk-headless", "the JVM SDK's tests (tests/client_jvm)")
    _apt_install(JUNIT, "junit5", "the JVM SDK's JUnit tests (tests/client_jvm)")
    _apt_install(KOTLINC, "kotlin", "the Kotlin example app (tests/client_jvm)")


CLIENT_JS = ROOT / "client_js"
BROWSER_TESTS = ROOT / "tests" / "browser"
OIDC_TESTS = ROOT / "tests" / "oidc"
NPM_PROJECTS = {
    CLIENT_JS: "client_js/dist and its types cannot be checked",
    BROWSER_TESTS: "the browser tests cannot run axe-core (they check the layout only)",
    OIDC_TESTS: "the sign-in tests have no OpenID Connect provider (they are skipped)",
}
"""Folders whose package-lock.json pins dev dependencies, and what is lost without them.
client_js/: esbuild, which builds the module ``ldp serve`` serves (``npm run build``;
client_js/dist is committed, so serving needs no Node) and which
tests/collector/test_sdk_module.py runs to check that dist/ is what the sources build to,
TypeScript, whose ``tsc --checkJs`` tests/test_client_js.py runs (both skipped without
them), and the bundle benchmark; the JS tests themselves run on Node alone
(tests/test_client_js.py). tests/browser/: axe-core, which test_layout_browser.py loads
into every dashboard page. tests/oidc/: oidc-provider, the real OpenID Connect provider
the dashboard's sign-in tests start (tests/browser/test_signin_browser.py)."""


def ensure_js() -> None:
    """``npm ci`` (their pinned dev dependencies, from package-lock.json) in each of
    :data:`NPM_PROJECTS` whose lock file changed; a failed install is a note."""
    npm = shutil.which("npm")
    for folder, without in NPM_PROJECTS.items():
        if npm is None:
            print(f"note: npm is missing: {without}", flush=True)
            continue
        lock = folder / "package-lock.json"
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
        stamp = folder / "node_modules" / f".ci-{digest}"
        if stamp.exists():
            continue
        print(f"+ npm ci ({folder.relative_to(ROOT)})", flush=True)
        code = subprocess.call(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder
        )
        if code:
            print(f"note: npm ci failed: {without}", flush=True)
            continue
        stamp.touch()


def test(args: list[str]) -> None:
    """Lint, type-check, build the documentation site strictly and run every test."""
    ensure_venv("dev")
    ensure_chromium()
    ensure_nginx()
    ensure_promtool()
    ensure_jvm()
    ensure_js()
    _run(BIN / "ruff", "check", ".")
    _run(BIN / "ruff", "format", "--check", ".")
    _run(BIN / "mypy")
    _run(BIN / "mkdocs", "build", "--strict", "--quiet")
    # One worker more than cores: the tests wait on servers, sockets and subprocesses for
    # about a third of their time. Work stealing: a worker that runs out takes another's
    # remaining tests (the slow modules run first, dealt evenly to the workers:
    # tests/conftest.py SLOW_FIRST), so all end together.
    xdist = ["-n", str((os.cpu_count() or 1) + 1), "--dist", "worksteal"]
    _run(BIN / "python", "-m", "pytest", *xdist, "--durations=15", *args)


def ldp(args: list[str]) -> None:
    """Run the ``ldp`` command line inside the project's environment."""
    ensure_venv("dev")
    os.execv(str(BIN / "ldp"), [str(BIN / "ldp"), *args])


def main() -> None:
    """Dispatch ``python3 tasks.py {test,ldp,setup} ...``."""
    commands = {"test": test, "ldp": ldp, "setup": lambda _args: ensure_venv("dev")}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__)
        sys.exit(2)
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
