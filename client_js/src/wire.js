// The wire: a report built from a served definition, and its exact JSON (docs/protocol.md §1).

import { build, scale } from "./mechanisms.js";
import { pyRepr } from "./exact.js";
import { Rng, cryptoBytes } from "./randomness.js";

const MECHANISMS = new WeakMap();

/** The page's CSPRNG, buffered (one getRandomValues call per 64 KiB). @type {Rng | null} */
let defaultRng = null;

/** The mechanism of a definition (built once per definition object). @param {any} definition */
export function mechanismOf(definition) {
  let m = MECHANISMS.get(definition);
  if (!m) {
    m = build(definition.mechanism);
    MECHANISMS.set(definition, m);
  }
  return m;
}

let idBytes = /** @type {((n: number) => Uint8Array) | null} */ (null);

/** 16 fresh CSPRNG bytes as 32 lowercase hex digits. */
export function newReportId() {
  idBytes ??= cryptoBytes(); // its own buffer: ids never share bytes with the noise
  let id = "";
  for (const b of idBytes(16)) id += (b | 256).toString(16).slice(1);
  return id;
}

/** The index of a categorical value given as a label or an index. @param {any} definition
 *  @param {string | number} value */
export function indexOf(definition, value) {
  const domain = definition.domain;
  if (typeof value === "string") {
    const i = domain.indexOf(value);
    if (i < 0) throw new RangeError(`${JSON.stringify(value)} is not in the domain of ${definition.name}`);
    return i;
  }
  if (!Number.isInteger(value) || value < 0 || value >= domain.length) {
    throw new RangeError(`value ${value} is outside range(0, ${domain.length})`);
  }
  return value;
}

/** A joint metric's value as attribute indices: ``{attribute: label}`` naming every
 *  attribute, or the labels (or indices) in attribute order. @param {any} definition
 *  @param {any} value @returns {number[]} */
export function jointIndices(definition, value) {
  const attributes = /** @type {{name: string, domain: string[]}[]} */ (definition.attributes);
  const names = attributes.map((a) => a.name);
  const object = value !== null && typeof value === "object" && !Array.isArray(value);
  const items = /** @type {any[]} */ (object ? names.map((n) => value[n]) : value);
  if (object ? Object.keys(value).length !== names.length || !names.every((n) => Object.hasOwn(value, n)) : !Array.isArray(value) || value.length !== names.length) {
    throw new RangeError(`${definition.name} takes {attribute: label} for [${names}], or the labels in order`);
  }
  return items.map((item, j) => {
    const labels = attributes[j].domain;
    const i = typeof item === "string" ? labels.indexOf(item) : item;
    if (!Number.isInteger(i) || i < 0 || i >= labels.length) throw new RangeError(`attribute ${names[j]} of ${definition.name} has no such value`);
    return i;
  });
}

/** A report's public dimensions, checked against the definition's declared ones: every
 *  declared dimension with one of its values, nothing else (they are sent in the clear,
 *  NOT protected by ε). Returns them in declared order, or null for a metric without.
 *  @param {any} definition @param {Record<string, string> | undefined | null} given
 *  @returns {Record<string, string> | null} */
export function checkDimensions(definition, given) {
  const declared = /** @type {{name: string, values: string[]}[]} */ (definition.dimensions ?? []);
  const names = declared.map((d) => d.name);
  if (given == null && !names.length) return null;
  const unknown = given !== null && typeof given === "object" && !Array.isArray(given) ? Object.keys(given).filter((k) => !names.includes(k)) : [];
  if (unknown.length || !names.length || given == null) {
    throw new RangeError(`metric ${definition.name} takes the dimensions [${names}], not [${unknown}]`);
  }
  /** @type {Record<string, string>} */
  const out = {};
  for (const d of declared) {
    const value = given[d.name];
    if (typeof value !== "string" || !d.values.includes(value)) {
      throw new RangeError(`dimension ${d.name} of ${definition.name} takes one of ${d.values.join(", ")}`);
    }
    out[d.name] = value;
  }
  return out;
}

/**
 * Perturb ``value`` and wrap it as the report sent in ``{"reports": [...]}``.
 * @param {any} definition  as ``GET /v1/metrics/<name>`` serves it
 * @param {any} value  a label or index; a number in range; a string; a joint metric's
 *   ``{attribute: label}``
 * @param {{rng?: Rng, secret?: Uint8Array, id?: string, dimensions?: Record<string, string>}} [options]
 *   ``dimensions``: the metric's public dimensions (checked first; sent in the clear)
 */
export async function buildReport(definition, value, options = {}) {
  const dimensions = checkDimensions(definition, options.dimensions);
  const rng = options.rng ?? (defaultRng ??= new Rng(cryptoBytes()));
  const m = mechanismOf(definition);
  let payload;
  if (definition.range) { // numeric, or a distribution (whose mechanism finds the bin)
    const [lo, hi] = definition.range;
    if (typeof value !== "number" || !(value >= lo && value <= hi)) {
      throw new RangeError(`value ${value} is outside the range [${lo}, ${hi}] of ${definition.name}`);
    }
    payload = m.perturb(m.bins ? [value, lo, hi] : scale(value, lo, hi), rng);
  } else if (definition.kind === "string") {
    payload = m.perturb(/** @type {string} */ (value), rng);
  } else if (definition.kind === "joint") {
    payload = m.perturb(jointIndices(definition, value), rng);
  } else if (m.permanentResponse) {
    if (!options.secret) throw new Error(`metric ${definition.name} is longitudinal: it needs the secret`);
    payload = await m.perturbMemoized(indexOf(definition, value), options.secret, definition.name, definition.version, rng);
  } else {
    payload = m.perturb(indexOf(definition, value), rng);
  }
  const report = { metric: definition.name, version: definition.version, id: options.id ?? newReportId(), payload };
  return dimensions ? { ...report, dimensions } : report;
}

/** JSON as Python's compact encoder writes it (non-ASCII escaped, floats as repr).
 *  @param {any} x @returns {string} */
export function encode(x) {
  if (typeof x === "number") return Number.isInteger(x) ? String(x) : pyRepr(x);
  if (typeof x === "string") return JSON.stringify(x).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  if (Array.isArray(x)) return `[${x.map(encode).join(",")}]`;
  if (x === null) return "null";
  if (typeof x === "boolean") return String(x);
  return `{${Object.entries(x).map(([k, v]) => `${encode(k)}:${encode(v)}`).join(",")}}`;
}

/** Payload fields the reference writes as floats, by kind (a JS number either way): a
 *  numeric report's ``y`` is never an integer literal (docs/protocol.md §1). Every other
 *  payload field is an integer, a string or a list of integers. */
const FLOAT_FIELDS = /** @type {Record<string, string[]>} */ ({ numeric: ["y"] });

/** A payload's exact JSON, for a metric of ``kind``. @param {Record<string, any>} payload
 *  @param {string} kind */
export function encodePayload(payload, kind) {
  const floats = FLOAT_FIELDS[kind] ?? [];
  return `{${Object.entries(payload).map(([k, v]) => `${encode(k)}:${floats.includes(k) ? pyRepr(v) : encode(v)}`).join(",")}}`;
}

/** One report's exact JSON, as the Python SDK writes it: the payload's floats as Python's
 *  repr, the dimensions in the definition's declared order (an object's own order puts
 *  integer-like names such as ``"10"`` first).
 *  @param {any} report  as ``buildReport`` made it @param {any} definition  the one it was built from */
export function encodeReport(report, definition) {
  let dims = "";
  if (report.dimensions) {
    const declared = /** @type {{name: string}[]} */ (definition.dimensions ?? []);
    dims = `,"dimensions":{${declared.map(({ name }) => `${encode(name)}:${encode(report.dimensions[name])}`).join(",")}}`;
  }
  return `{"metric":${encode(report.metric)},"version":${report.version},"id":${encode(report.id)},"payload":${encodePayload(report.payload, definition.kind)}${dims}}`;
}

/** A batch's exact body: the reports' encodings joined. @param {string[]} encoded */
export function encodeBatch(encoded) {
  return `{"reports":[${encoded.join(",")}]}`;
}
