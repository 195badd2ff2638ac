"""The JVM SDK's own tests (client_jvm/src/test/java, JUnit 5 from Debian's ``junit5``), run
from pytest so that they count in the suite's summary and fail the test command when one
fails: the conformance vectors byte for byte, the random cross-SDK cases, Oblivious HTTP
against RFC 9180 and RFC 9458, and the client against a real HTTP server. One JUnit class
per pytest test, so the workers share them out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jvm_helpers import ROOT, built

CLASSES = sorted(
    p.stem for p in (ROOT / "client_jvm" / "src" / "test" / "java").rglob("*Test.java")
)


def test_the_junit_classes_are_found() -> None:
    assert {"ConformanceTest", "ClientTest", "OhttpTest", "NumbersTest", "RandomCasesTest"} <= set(
        CLASSES
    )


@pytest.mark.parametrize("name", CLASSES)
def test_jvm_sdk(name: str) -> None:
    build = built()
    done = build.run_tests(f"--select-class=org.ldptelemetry.{name}")
    lines = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout).splitlines()
    failed = [line.strip() for line in lines if "✘" in line]
    assert done.returncode == 0, (
        f"JUnit {name} failed: {failed}\n" + "\n".join(lines[-80:]) + done.stderr[-3000:]
    )
    found = next(int(m[1]) for line in lines if (m := re.search(r"(\d+) tests found", line)))
    assert found > 0, "\n".join(lines)


def test_the_jar_holds_the_sdk_alone() -> None:
    """No test class, no dependency: the jar is the SDK's classes and a manifest."""
    import zipfile

    build = built()
    names = zipfile.ZipFile(Path(build.JAR)).namelist()
    classes = [n for n in names if n.endswith(".class")]
    assert classes and all(n.startswith("org/ldptelemetry/") for n in classes)
    assert not [n for n in classes if "Test" in n.rsplit("/", 1)[-1]]
