"""The JVM SDK's own tests (client_jvm/src/test/java, JUnit 5 from Debian's ``junit5``), run
from pytest so that they count in the suite's summary and fail the test command when one
fails: the conformance vectors byte for byte, the random cross-SDK cases, Oblivious HTTP
against RFC 9180 and RFC 9458, and the client against a real HTTP server. One JUnit class
per pytest test, so the workers share them out."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from jvm_helpers import ROOT, built

CLASSES = sorted(
    p.stem for p in (ROOT / "client_jvm" / "src" / "test" / "java").rglob("*Test.java")
)


def test_the_junit_classes_are_found() -> None:
    assert {
        "ConformanceTest",
        "ClientConformanceTest",
        "ClientTest",
        "OhttpTest",
        "NumbersTest",
        "RandomCasesTest",
    } <= set(CLASSES)


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


ANDROID_PACKAGES = frozenset(
    {
        "java/io",
        "java/lang",
        "java/lang/invoke",
        "java/math",
        "java/net",
        "java/nio/channels",
        "java/nio/charset",
        "java/security",
        "java/security/spec",
        "java/text",
        "java/util",
        "java/util/concurrent",
        "java/util/function",
        "java/util/regex",
        "java/util/zip",
        "javax/crypto",
        "javax/crypto/spec",
        "org/ldptelemetry",
    }
)
"""Packages Android has had since API 24 (Android 7.0) that the SDK's core may use."""

ABOVE_API_24 = (
    "java/lang/ThreadLocal.withInitial",
    "java/lang/String.repeat",
    "java/lang/String.isBlank",
    "java/lang/String.strip",
    "java/lang/String.lines",
    "java/lang/String.join",
    "java/lang/Long.compareUnsigned",
    "java/lang/Long.remainderUnsigned",
    "java/lang/Long.divideUnsigned",
    "java/lang/Integer.parseUnsignedInt",
    "java/util/List.of",
    "java/util/List.copyOf",
    "java/util/Map.of",
    "java/util/Map.copyOf",
    "java/util/Set.of",
    "java/util/Objects.requireNonNullElse",
    "java/io/InputStream.readAllBytes",
    "java/io/InputStream.transferTo",
    "java/util/Base64",
    "java/nio/file",
    "java/time",
)
"""Members and packages Android only has from API 26 on or later (a denylist of the usual
Java 9–17 conveniences: javap cannot know every API level, the list names what a Java 17
writer reaches for)."""


def test_the_core_keeps_to_what_android_api_24_has() -> None:
    """Every class but HttpClientTransport (java.net.http, never loaded on Android) refers
    only to packages Android has had since API 24, and to none of the newer members."""
    import shutil
    import zipfile

    build = built()
    javap = shutil.which("javap")
    if javap is None:
        pytest.skip("the JDK's javap is not installed")
    names = [
        n[: -len(".class")].replace("/", ".")
        for n in zipfile.ZipFile(Path(build.JAR)).namelist()
        if n.endswith(".class") and "HttpClientTransport" not in n
    ]
    text = subprocess.run(
        [javap, "-v", "-cp", str(build.JAR), *names], capture_output=True, text=True, check=True
    ).stdout
    pool = re.findall(
        r"= (Class|Methodref|InterfaceMethodref|Fieldref)\s+\S+\s+// (.+)$", text, re.M
    )
    classes = {
        v.strip('"').lstrip("[").removeprefix("L").rstrip(";") for k, v in pool if k == "Class"
    }
    members = {v.split(":", 1)[0].replace('"', "") for k, v in pool if k != "Class"}
    owners = {m.rsplit(".", 1)[0] for m in members}
    packages = {c.rsplit("/", 1)[0] for c in classes | owners if "/" in c}
    assert packages <= ANDROID_PACKAGES, sorted(packages - ANDROID_PACKAGES)
    used = members | classes
    newer = sorted(m for m in used for bad in ABOVE_API_24 if m.startswith(bad))
    assert not newer, newer
