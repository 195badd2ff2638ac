// A gateway's side of Oblivious HTTP (RFC 9458 §4.3–4.4) for the SDK's own tests: it
// decapsulates what the client sends and encapsulates an answer, with an injectable
// response nonce for the RFC's known answers. The collector's gateway is the real one;
// tests/test_ohttp_js.py runs the SDK against it.

import { AEAD_AES128GCM, KDF_SHA256, KEM_X25519, NENC, concat, i2osp, importPrivateKey, setupBaseR } from "../src/hpke.js";
import { responseKeys } from "../src/ohttp.js";

export const hex = (/** @type {string} */ s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
export const toHex = (/** @type {Uint8Array} */ b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const utf8 = new TextEncoder();

/** A gateway key: its id, raw private and public keys. */
export class TestGateway {
  /** @param {number} keyId @param {Uint8Array} secret @param {Uint8Array} publicKey */
  constructor(keyId, secret, publicKey) {
    this.keyId = keyId;
    this.secret = secret;
    this.publicKey = publicKey;
  }

  /** This key's configuration (RFC 9458 §3.1), with (HKDF-SHA256, AES-128-GCM) and
   *  (HKDF-SHA256, ChaCha20-Poly1305) as the RFC's example lists them. */
  keyConfig() {
    return concat(Uint8Array.of(this.keyId), i2osp(KEM_X25519, 2), this.publicKey, i2osp(8, 2),
      i2osp(KDF_SHA256, 2), i2osp(AEAD_AES128GCM, 2), i2osp(KDF_SHA256, 2), i2osp(3, 2));
  }

  /** The ``application/ohttp-keys`` body with this key alone. */
  keys() {
    const c = this.keyConfig();
    return concat(i2osp(c.length, 2), c);
  }

  /**
   * Decapsulate an encapsulated request; ``respond`` encapsulates the answer.
   * @param {Uint8Array} body
   * @returns {Promise<{request: Uint8Array, respond: (response: Uint8Array, nonce?: Uint8Array) => Promise<Uint8Array>} | null>}
   *   null when the key id is not this key's
   */
  async decapsulate(body) {
    const header = body.subarray(0, 7);
    if (header[0] !== this.keyId) return null;
    const enc = body.subarray(7, 7 + NENC);
    const info = concat(utf8.encode("message/bhttp request"), Uint8Array.of(0), header);
    const receiver = await setupBaseR(enc, await importPrivateKey(this.secret), this.publicKey, info);
    const request = await receiver.context.open(new Uint8Array(0), body.subarray(7 + NENC));
    const secret = await receiver.context.export(utf8.encode("message/bhttp response"), 16);
    return {
      request,
      respond: async (response, nonce = globalThis.crypto.getRandomValues(new Uint8Array(16))) => {
        const { key, nonce: iv } = await responseKeys(secret, enc, nonce);
        const aes = await globalThis.crypto.subtle.importKey("raw", key, "AES-GCM", false, ["encrypt"]);
        return concat(nonce, new Uint8Array(await globalThis.crypto.subtle.encrypt({ name: "AES-GCM", iv }, aes, response)));
      },
    };
  }
}

/** A QUIC varint at ``at``: [value, next offset]. @param {Uint8Array} b @param {number} at */
function varintAt(b, at) {
  const size = 1 << (b[at] >> 6);
  let n = b[at] & 0x3f;
  for (let i = 1; i < size; i++) n = n * 256 + b[at + i];
  return [n, at + size];
}

/** A known-length Binary HTTP request (RFC 9292), truncated sections read as empty.
 *  @param {Uint8Array} b */
export function decodeRequest(b) {
  const text = new TextDecoder();
  let at = 0;
  const next = () => {
    if (at >= b.length) return new Uint8Array(0);
    const [n, start] = varintAt(b, at);
    at = start + n;
    return b.subarray(start, at);
  };
  const [framing, start] = varintAt(b, 0);
  if (framing !== 0) throw new Error("not a known-length request");
  at = start;
  const [method, scheme, authority, path] = [next(), next(), next(), next()].map((x) => text.decode(x));
  const section = next();
  const headers = [];
  for (let i = 0; i < section.length;) {
    const [nl, ns] = varintAt(section, i);
    const name = text.decode(section.subarray(ns, ns + nl));
    const [vl, vs] = varintAt(section, ns + nl);
    headers.push([name, text.decode(section.subarray(vs, vs + vl))]);
    i = vs + vl;
  }
  return { method, scheme, authority, path, headers, body: next() };
}

/** A known-length Binary HTTP response. @param {number} status
 *  @param {[string, string][]} headers @param {Uint8Array} body */
export function encodeResponse(status, headers, body) {
  const v = (/** @type {number} */ n) => n < 64 ? Uint8Array.of(n) : Uint8Array.of(0x40 | (n >> 8), n & 0xff);
  const lp = (/** @type {Uint8Array} */ x) => concat(v(x.length), x);
  const fields = concat(...headers.map(([n, x]) => concat(lp(utf8.encode(n)), lp(utf8.encode(x)))));
  return concat(v(1), v(status), lp(fields), lp(body), v(0));
}
