// Binary HTTP (RFC 9292), known-length messages: the request an Oblivious HTTP client
// encapsulates and the response it gets back. A request is written with all its sections,
// the empty ones at its end too, as the Python SDK writes it (RFC 9292 §3.8 lets a sender
// leave them out, as RFC 9458's example does; a reader takes either).
// See docs/guides/web.md ("Through an Oblivious HTTP relay").

import { concat } from "./hpke.js";

const utf8 = new TextEncoder();
const text = new TextDecoder();

/** A QUIC variable-length integer (RFC 9000 §16). @param {number} n */
export function varint(n) {
  if (n < 0x40) return Uint8Array.of(n);
  if (n < 0x4000) return Uint8Array.of(0x40 | (n >> 8), n & 0xff);
  if (n < 0x40000000) return Uint8Array.of(0x80 | (n >>> 24), (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
  throw new RangeError(`${n} is too large for this encoder`);
}

/** @param {Uint8Array} bytes */
const withLength = (bytes) => concat(varint(bytes.length), bytes);

/** @param {[string, string][]} fields */
const fieldSection = (fields) =>
  withLength(concat(...fields.map(([n, v]) => concat(withLength(utf8.encode(n.toLowerCase())), withLength(utf8.encode(v))))));

/**
 * A known-length request (framing indicator 0).
 * @param {{method: string, scheme: string, authority: string, path: string,
 *   headers?: [string, string][], body?: Uint8Array}} request
 */
export function encodeRequest(request) {
  const control = [request.method, request.scheme, request.authority, request.path].map((s) => withLength(utf8.encode(s)));
  return concat(varint(0), ...control, fieldSection(request.headers ?? []), withLength(request.body ?? new Uint8Array(0)), varint(0));
}

/** A reader of a message's bytes; the end of the data reads as empty sections (§3.8). */
class Reader {
  /** @param {Uint8Array} bytes */
  constructor(bytes) { this.b = bytes; this.at = 0; }
  get done() { return this.at >= this.b.length; }
  varint() {
    if (this.done) return 0;
    const first = this.b[this.at];
    const size = 1 << (first >> 6);
    if (this.at + size > this.b.length) throw new Error("Binary HTTP: truncated integer");
    let n = first & 0x3f;
    for (let i = 1; i < size; i++) n = n * 256 + this.b[this.at + i];
    this.at += size;
    return n;
  }
  /** @param {number} n */
  take(n) {
    if (this.at + n > this.b.length) throw new Error("Binary HTTP: truncated message");
    const out = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  /** @returns {[string, string][]} */
  fields() {
    const section = new Reader(this.take(this.varint()));
    /** @type {[string, string][]} */
    const out = [];
    while (!section.done) out.push([text.decode(section.take(section.varint())), text.decode(section.take(section.varint()))]);
    return out;
  }
}

/**
 * A known-length response (framing indicator 1): informational responses skipped.
 * @param {Uint8Array} bytes
 * @returns {{status: number, headers: [string, string][], body: Uint8Array}}
 */
export function decodeResponse(bytes) {
  const r = new Reader(bytes);
  if (r.varint() !== 1) throw new Error("Binary HTTP: not a known-length response");
  let status = r.varint();
  while (status >= 100 && status < 200) { r.fields(); status = r.varint(); }
  if (status < 200 || status > 599) throw new Error(`Binary HTTP: status ${status}`);
  const headers = r.fields();
  const body = r.take(r.varint());
  return { status, headers, body: body.slice() };
}
