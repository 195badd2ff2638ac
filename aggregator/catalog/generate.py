"""``ldp generate python|ts|java``: a typed API per registry, calling only the SDK's
public ``report(metric, value[, dimensions])``.

Each metric becomes a method whose value parameter is the metric's domain as a type: a
``Literal`` in Python (mypy), a union of string literals in TypeScript (tsc), an enum in
Java (javac). A method reports nothing after the metric's ``expires`` date (the device's
UTC day). See ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass

from aggregator.catalog.registry_file import MetricEntry, RegistryFile
from client_sdk.wire import MetricDefinition

__all__ = ["LANGUAGES", "Generated", "generate"]


@dataclass(frozen=True)
class Generated:
    """A generated source file: its name (relative to the output folder) and text."""

    path: str
    text: str


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^A-Za-z0-9]+", name) if w]


def snake(name: str) -> str:
    """``app.theme`` → ``app_theme`` (a keyword or a leading digit gets an underscore)."""
    text = "_".join(w.lower() for w in _words(name)) or "metric"
    if text[0].isdigit():
        text = "m_" + text
    return text + "_" if keyword.iskeyword(text) else text


def camel(name: str, upper: bool = False) -> str:
    """``app.theme`` → ``appTheme`` (``AppTheme`` with ``upper``)."""
    words = _words(name) or ["metric"]
    text = "".join(w[:1].upper() + w[1:] for w in words)
    if not upper:
        text = text[:1].lower() + text[1:]
    return ("M" if upper else "m") + text if text[0].isdigit() else text


def constant(label: str) -> str:
    """A Java enum constant for a label: ``high-contrast`` → ``HIGH_CONTRAST``, ``5.10`` →
    ``V5_10``."""
    text = "_".join(w.upper() for w in _words(label)) or "EMPTY"
    return "V" + text if text[0].isdigit() else text


def _unique(names: dict[str, str], what: str) -> None:
    """Two metrics (or labels) that map to one identifier cannot both be generated."""
    seen: dict[str, str] = {}
    for original, ident in names.items():
        if ident in seen:
            raise ValueError(
                f"{what} {seen[ident]!r} and {original!r} both become {ident!r} in the "
                "generated code: rename one"
            )
        seen[ident] = original


def _entries(
    reg: RegistryFile, ident: Callable[[str], str]
) -> list[tuple[MetricEntry, MetricDefinition]]:
    """Every metric with its definition; ``ident`` names each in the generated code.

    Raises:
        ValueError: a metric the server would refuse, or two metrics of one identifier.
    """
    bad = [f"{e.name} ({'; '.join(e.problems)})" for e in reg.entries if e.definition is None]
    if bad:
        raise ValueError(
            f"the registry has metrics the server would refuse (ldp lint says more): "
            f"{', '.join(bad)}"
        )
    _unique({e.name: ident(e.name) for e in reg.entries}, "metrics")
    return [(e, e.definition) for e in reg.entries if e.definition is not None]


def module_name(reg: RegistryFile) -> str:
    """The generated module's base name: the app's name and ``_metrics``."""
    app = reg.app.get("name")
    return snake(f"{app} metrics") if isinstance(app, str) and app else "metrics"


def _doc(entry: MetricEntry, d: MetricDefinition) -> list[str]:
    lines = [d.description or entry.name]
    lines.append(f"Metric {entry.name}: ε = {d.mechanism.epsilon:g} per report.")
    if entry.owners:
        lines.append(f"Owners: {', '.join(entry.owners)}.")
    if entry.expiry_date:
        lines.append(f"Expires {entry.expiry_date.isoformat()}: reports nothing after.")
    # Inside a docstring or a /** */ comment: nothing may end it early.
    return [line.replace("\\", "/").replace('"""', "'").replace("*/", "* /") for line in lines]


@dataclass(frozen=True)
class _Spelling:
    """How a language spells a metric's value type: a union of labels, a record of named
    fields (its name, and its (field, type) pairs), and a string and a number."""

    union: Callable[[tuple[str, ...]], str]
    record: Callable[[str, list[tuple[str, str]]], str]
    scalars: dict[str, str]
    """The type of each other kind's value, by kind (``number``: any other kind)."""

    def value_type(self, name: str, d: MetricDefinition) -> str:
        """The type of the value of ``d`` (named ``name`` if it needs a declaration)."""
        if d.kind == "categorical":
            return self.union(d.domain)
        if d.kind == "joint":
            return self.record(name, self.fields(d.attributes))
        return self.scalars.get(d.kind, self.scalars["number"])

    def fields(self, pairs: tuple[tuple[str, tuple[str, ...]], ...]) -> list[tuple[str, str]]:
        """Each named field's type: a union of its labels."""
        return [(field, self.union(labels)) for field, labels in pairs]


# -- Python ------------------------------------------------------------------------------------


def _py_literal(labels: tuple[str, ...]) -> str:
    return "Literal[" + ", ".join(json.dumps(label) for label in labels) + "]"


def _typed_dict(name: str, fields: list[tuple[str, str]]) -> str:
    pairs = ", ".join(f"{json.dumps(field)}: {kind}" for field, kind in fields)
    return f'TypedDict("{name}", {{{pairs}}})'


_PYTHON = _Spelling(_py_literal, _typed_dict, {"string": "str", "number": "float"})


def python(reg: RegistryFile, source: str) -> list[Generated]:
    """The Python module: ``Literal`` value types and a ``Metrics`` class over a ``Client``."""
    entries = _entries(reg, snake)
    out = [
        f'"""Typed metrics of {reg.app.get("name", "the app")}: generated by `ldp generate '
        f'python` from {source}; do not edit."""',
        "",
        "from __future__ import annotations",
        "",
        "import datetime",
        "from typing import Literal, TypedDict",
        "",
        "from client_sdk import Client",
        "",
        '__all__ = ["Metrics"]',
        "",
    ]
    methods = []
    for e, d in entries:
        ident = snake(e.name)
        value_type = camel(e.name, upper=True)
        out.append(f"{value_type} = {_PYTHON.value_type(value_type, d)}")
        params = f"self, value: {value_type}"
        call = f"self._client.report({json.dumps(e.name)}, value"
        if d.dimensions:
            dims = f"{value_type}Dimensions"
            out.append(f"{dims} = {_typed_dict(dims, _PYTHON.fields(d.dimensions))}")
            params += f", dimensions: {dims}"
            call += ", {k: str(v) for k, v in dimensions.items()}"
        body = [f"    def {ident}({params}) -> bool:", '        """' + _doc(e, d)[0]]
        body += ["", *(f"        {line}" for line in _doc(e, d)[1:]), '        """']
        if e.expiry_date:
            day = json.dumps(e.expiry_date.isoformat())
            body.append(f"        if _today() > datetime.date.fromisoformat({day}):")
            body.append("            return False")
        body.append(f"        return {call})")
        methods.append("\n".join(body))
    out += [
        "",
        "",
        "def _today() -> datetime.date:",
        "    return datetime.datetime.now(datetime.timezone.utc).date()",
        "",
        "",
        "class Metrics:",
        '    """One method per metric of the registry; each returns what ``Client.report``',
        '    returns (False after the metric expired)."""',
        "",
        "    def __init__(self, client: Client) -> None:",
        "        self._client = client",
        "",
        "\n\n".join(methods),
        "",
    ]
    return [Generated(f"{module_name(reg)}.py", "\n".join(out))]


# -- TypeScript ---------------------------------------------------------------------------------


def _ts_union(labels: tuple[str, ...]) -> str:
    return " | ".join(json.dumps(label) for label in labels)


def _ts_object(name: str, fields: list[tuple[str, str]]) -> str:
    """An object type (``name`` unused: TypeScript's type declares it)."""
    pairs = "; ".join(f"{json.dumps(field)}: {kind}" for field, kind in fields)
    return f"{{ {pairs} }}"


_TYPESCRIPT = _Spelling(_ts_union, _ts_object, {"string": "string", "number": "number"})


def typescript(reg: RegistryFile, source: str) -> list[Generated]:
    """A TypeScript module for the browser SDK (``ldp-telemetry-client``)."""
    entries = _entries(reg, camel)
    out = [
        f"// Typed metrics of {reg.app.get('name', 'the app')}: generated by `ldp generate ts` "
        f"from {source}; do not edit.",
        'import type { Client } from "ldp-telemetry-client";',
        "",
        "function today(): string {",
        "  return new Date().toISOString().slice(0, 10);",
        "}",
        "",
    ]
    methods = []
    for e, d in entries:
        value_type = camel(e.name, upper=True)
        out.append(f"export type {value_type} = {_TYPESCRIPT.value_type(value_type, d)};")
        params = f"value: {value_type}"
        call = f"this.client.report({json.dumps(e.name)}, value"
        if d.dimensions:
            fields = _ts_object(value_type, _TYPESCRIPT.fields(d.dimensions))
            out.append(f"export type {value_type}Dimensions = {fields};")
            params += f", dimensions: {value_type}Dimensions"
            call += ", dimensions"
        body = ["  /**", *(f"   * {line}" for line in _doc(e, d)), "   */"]
        body.append(f"  {camel(e.name)}({params}): Promise<boolean> {{")
        if e.expiry_date:
            body.append(
                f"    if (today() > {json.dumps(e.expiry_date.isoformat())}) "
                "return Promise.resolve(false);"
            )
        body += [f"    return {call});", "  }"]
        methods.append("\n".join(body))
    out += [
        "",
        "/** One method per metric of the registry; each resolves as `Client.report` does. */",
        "export class Metrics {",
        "  readonly client: Client;",
        "  constructor(client: Client) {",
        "    this.client = client;",
        "  }",
        "",
        "\n\n".join(methods),
        "}",
        "",
    ]
    return [Generated(f"{module_name(reg)}.ts", "\n".join(out))]


# -- Java ---------------------------------------------------------------------------------------


def _java_enum(name: str, labels: tuple[str, ...], indent: str = "  ") -> list[str]:
    constants = {label: constant(label) for label in labels}
    _unique(constants, f"values of {name}:")
    body = [f"{indent}public enum {name} {{"]
    body += [
        f"{indent}  {ident}({json.dumps(label)}){',' if i < len(labels) - 1 else ';'}"
        for i, (label, ident) in enumerate(constants.items())
    ]
    body += [
        "",
        f"{indent}  /** The label the metric's domain holds. */",
        f"{indent}  public final String label;",
        "",
        f"{indent}  {name}(String label) {{",
        f"{indent}    this.label = label;",
        f"{indent}  }}",
        f"{indent}}}",
    ]
    return body


def java(reg: RegistryFile, source: str, package: str = "ldp.generated") -> list[Generated]:
    """A Java class over the JVM SDK's ``org.ldptelemetry.Client``, enums for domains."""
    entries = _entries(reg, camel)
    cls = camel(module_name(reg), upper=True)
    out = [
        f"// Typed metrics of {reg.app.get('name', 'the app')}: generated by `ldp generate "
        f"java` from {source}; do not edit.",
        f"package {package};",
        "",
        "import java.time.LocalDate;",
        "import java.time.ZoneOffset;",
        "import java.util.LinkedHashMap;",
        "import java.util.Map;",
        "import org.ldptelemetry.Client;",
        "",
        "/** One method per metric of the registry, each returning what {@code report} does. */",
        f"public final class {cls} {{",
        "  private final Client client;",
        "",
        f"  public {cls}(Client client) {{",
        "    this.client = client;",
        "  }",
        "",
        "  private static boolean expired(String day) {",
        "    return LocalDate.now(ZoneOffset.UTC).isAfter(LocalDate.parse(day));",
        "  }",
    ]
    for e, d in entries:
        value_type = camel(e.name, upper=True)
        params: list[str]
        if d.kind == "categorical":
            out += ["", *_java_enum(value_type, d.domain)]
            params, value = [f"{value_type} value"], "value.label"
        elif d.kind == "joint":
            params = []
            for attribute, labels in d.attributes:
                enum = value_type + camel(attribute, upper=True)
                out += ["", *_java_enum(enum, labels)]
                params.append(f"{enum} {camel(attribute)}")
            value = "joint"
        else:
            params, value = [f"{'String' if d.kind == 'string' else 'double'} value"], "value"
        dims = "null"
        if d.dimensions:
            params.append("Map<String, String> dimensions")
            dims = "dimensions"
        out += ["", "  /**", *(f"   * {line}" for line in _doc(e, d)), "   */"]
        out.append(f"  public boolean {camel(e.name)}({', '.join(params)}) {{")
        if e.expiry_date:
            out.append(f"    if (expired({json.dumps(e.expiry_date.isoformat())})) return false;")
        if d.kind == "joint":
            out.append("    Map<String, Object> joint = new LinkedHashMap<>();")
            for attribute, _ in d.attributes:
                out.append(f"    joint.put({json.dumps(attribute)}, {camel(attribute)}.label);")
        out += [f"    return client.report({json.dumps(e.name)}, {value}, {dims});", "  }"]
    out += ["}", ""]
    folder = package.replace(".", "/")
    return [Generated(f"{folder}/{cls}.java", "\n".join(out))]


LANGUAGES: dict[str, Callable[[RegistryFile, str], list[Generated]]] = {
    "python": python,
    "ts": typescript,
    "java": java,
}


def generate(language: str, reg: RegistryFile, source: str) -> list[Generated]:
    """The files of ``language`` for a registry (``source``: its name, for the header).

    Raises:
        ValueError: an unknown language, a refused spec, or two names that become one
            identifier.
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
    return LANGUAGES[language](reg, source)
