"""Build and test the JVM SDK with the JDK alone: ``javac``, ``jar`` and JUnit 5's console
launcher (Debian's ``junit5``), no Maven or Gradle (Maven Central is out of reach here).

    python3 client_jvm/build.py jar     # client_jvm/build/ldp-telemetry.jar
    python3 client_jvm/build.py test    # the jar, the JUnit tests, and a run of them

Standard library only. Each step is skipped when its inputs have not changed (a hash of
the sources is stamped beside the output), and runs under a file lock, so parallel test
workers build once and share the result. See docs/guides/jvm.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
BUILD = ROOT / "build"
JAR = BUILD / "ldp-telemetry.jar"
TEST_CLASSES = BUILD / "test-classes"
MAIN = ROOT / "src" / "main" / "java"
RESOURCES = ROOT / "src" / "main" / "resources"
TESTS = ROOT / "src" / "test" / "java"

JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")
"""Debian's ``junit5`` package: the console launcher with the Jupiter API and engine."""

RELEASE = "17"
"""The Java release the sources are written in and compiled for (``javac --release``)."""


def jdk_tool(name: str) -> str | None:
    """A JDK program (javac, jar, java): from JAVA_HOME, else on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def missing() -> str | None:
    """Why the SDK cannot be built and tested here, or None."""
    for name in ("javac", "jar", "java"):
        if jdk_tool(name) is None:
            return f"the JDK's {name} is not installed (Java 17: Debian's openjdk-17-jdk-headless)"
    if not JUNIT.exists():
        return f"{JUNIT} is missing (Debian's junit5; python3 tasks.py test installs it as root)"
    return None


def _sources(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.java"))


def _digest(files: list[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for item in extra:
        h.update(item.encode() + b"\0")
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


_depth = 0
"""How deep this process is in :func:`locked` (the lock is taken once, re-entered freely)."""


@contextmanager
def locked() -> Iterator[None]:
    """The build folder's lock: one build (or one cached test run) at a time across
    processes; re-entrant within one."""
    global _depth
    BUILD.mkdir(parents=True, exist_ok=True)
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    with open(BUILD / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _depth = 1
        try:
            yield
        finally:
            _depth = 0
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} … failed:\n{done.stdout}{done.stderr}")


def _compile(sources: list[Path], out: Path, classpath: list[Path]) -> None:
    javac = jdk_tool("javac")
    assert javac is not None, missing()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cp = ["-cp", os.pathsep.join(map(str, classpath))] if classpath else []
    argfile = out.parent / f".{out.name}-sources"
    argfile.write_text("\n".join(str(s) for s in sources) + "\n")
    _run(
        [
            javac,
            "--release",
            RELEASE,
            "-encoding",
            "UTF-8",
            "-Xlint:all,-serial",
            "-Werror",
            *cp,
            "-d",
            str(out),
            f"@{argfile}",
        ]
    )


def build_jar() -> Path:
    """The SDK's jar (``build/ldp-telemetry.jar``), compiled unless current."""
    sources = _sources(MAIN) + sorted(p for p in RESOURCES.rglob("*") if p.is_file())
    stamp = BUILD / ".jar-stamp"
    with locked():
        digest = _digest(sources, RELEASE)
        if JAR.exists() and stamp.exists() and stamp.read_text() == digest:
            return JAR
        classes = BUILD / "classes"
        _compile([s for s in sources if s.suffix == ".java"], classes, [])
        manifest = BUILD / "MANIFEST.MF"
        manifest.write_text("Automatic-Module-Name: org.ldptelemetry\n")
        jar = jdk_tool("jar")
        assert jar is not None
        tmp = JAR.with_suffix(".tmp")
        files = ["-C", str(classes), ".", "-C", str(RESOURCES), "."]
        _run([jar, "--create", "--file", str(tmp), "--manifest", str(manifest), *files])
        tmp.replace(JAR)
        stamp.write_text(digest)
    return JAR


def build_tests() -> Path:
    """The JUnit tests and the test programs (``build/test-classes``), compiled unless current."""
    jar = build_jar()
    sources = _sources(TESTS)
    stamp = BUILD / ".tests-stamp"
    with locked():
        digest = _digest(sources, stamp_of(jar))
        if TEST_CLASSES.exists() and stamp.exists() and stamp.read_text() == digest:
            return TEST_CLASSES
        _compile(sources, TEST_CLASSES, [jar, JUNIT])
        stamp.write_text(digest)
    return TEST_CLASSES


def stamp_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def classpath() -> str:
    """The jar and the compiled tests: what the test programs run with."""
    return os.pathsep.join([str(build_tests()), str(JAR)])


def java_command(*args: str) -> list[str]:
    """``java`` with the SDK and the test programs on the class path, and the repository's
    root as ``ldp.root`` (where the conformance vectors are found)."""
    java = jdk_tool("java")
    assert java is not None, missing()
    return [java, "-Dldp.root=" + str(REPO), "-cp", classpath(), *args]


def run_tests(*selectors: str) -> subprocess.CompletedProcess[str]:
    """Run the JUnit tests (all, or those ``selectors`` pick, e.g. ``--select-class=…``)."""
    build_tests()
    java = jdk_tool("java")
    assert java is not None
    chosen = list(selectors) or ["--scan-class-path", str(TEST_CLASSES)]
    cmd = [
        java,
        "-Dldp.root=" + str(REPO),
        "-jar",
        str(JUNIT),
        "--disable-banner",
        "--details=tree",
        "--class-path",
        classpath(),
        *chosen,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)


def main() -> None:
    """``jar`` or ``test``."""
    why = missing()
    if why:
        print(f"cannot build: {why}", file=sys.stderr)
        sys.exit(2)
    if sys.argv[1:2] == ["jar"]:
        print(build_jar())
    elif sys.argv[1:2] == ["test"]:
        done = run_tests(*sys.argv[2:])
        print(done.stdout + done.stderr)
        sys.exit(done.returncode)
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
