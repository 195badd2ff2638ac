// Oblivious HTTP (RFC 9458) for the web SDK: reports (and the definition fetches) reach
// the collector through a relay that sees the device's address but not the reports, while
// the collector (the gateway) sees the reports but not the address. An optional entry point
// (`ldp-telemetry-client/ohttp`): a page that sends directly does not load it.
// See docs/guides/web.md ("Through an Oblivious HTTP relay").

import { AEAD_AES128GCM, KDF_SHA256, KEM_X25519, NENC, NK, NN, concat, expand, extract, hmacKey, i2osp, setupBaseS } from "./hpke.js";
import { decodeResponse, encodeRequest } from "./bhttp.js";

/** @typedef {import("./hpke.js").Bytes} Bytes */

export const KEYS_TYPE = "application/ohttp-keys";
export const REQUEST_TYPE = "message/ohttp-req";
export const RESPONSE_TYPE = "message/ohttp-res";
/** The problem type of a request under a key the gateway does not have (RFC 9458 §5.3). */
export const KEY_PROBLEM = "https://iana.org/assignments/http-problem-types#ohttp-key";
/** Where the collector publishes its key configurations (and takes encapsulated requests). */
export const GATEWAY_PATH = "/.well-known/ohttp-gateway";

const utf8 = new TextEncoder();
const REQUEST_LABEL = utf8.encode("message/bhttp request");
const RESPONSE_LABEL = utf8.encode("message/bhttp response");
const RESPONSE_NONCE = Math.max(NN, NK);
const KEYS_TTL = 3_600_000; // a key config is used an hour unless its Cache-Control says otherwise
const KEYS_TTL_MAX = 86_400_000; // and at most a day: the gateway rotates its keys

/**
 * @typedef {object} KeyConfig  one key configuration (RFC 9458 §3.1)
 * @property {number} keyId
 * @property {number} kemId
 * @property {Uint8Array} publicKey
 * @property {{kdfId: number, aeadId: number}[]} suites
 */

/** One key configuration at the start of ``bytes``, with its length (0 when the KEM is
 *  not X25519: its key length is unknown here, and such a config is skipped).
 *  @param {Uint8Array} bytes @returns {{config: KeyConfig | null, length: number}} */
export function parseKeyConfig(bytes) {
  const u16 = (/** @type {number} */ at) => {
    if (at + 2 > bytes.length) throw new Error("ohttp-keys: truncated key configuration");
    return (bytes[at] << 8) | bytes[at + 1];
  };
  const keyId = bytes[0];
  const kemId = u16(1);
  if (kemId !== KEM_X25519) return { config: null, length: 0 };
  const publicKey = bytes.slice(3, 3 + NENC);
  const count = u16(3 + NENC);
  if (publicKey.length !== NENC || count % 4 || 5 + NENC + count > bytes.length) throw new Error("ohttp-keys: truncated key configuration");
  const suites = [];
  for (let at = 5 + NENC; at < 5 + NENC + count; at += 4) suites.push({ kdfId: u16(at), aeadId: u16(at + 2) });
  return { config: { keyId, kemId, publicKey, suites }, length: 5 + NENC + count };
}

/**
 * The key configurations of an ``application/ohttp-keys`` body (RFC 9458 §3.2: each one
 * preceded by its length in two bytes), those this client can use first.
 * @param {Uint8Array} bytes @returns {KeyConfig[]}
 */
export function parseKeyConfigs(bytes) {
  const out = [];
  for (let at = 0; at < bytes.length;) {
    if (at + 2 > bytes.length) throw new Error("ohttp-keys: truncated length");
    const length = (bytes[at] << 8) | bytes[at + 1];
    if (at + 2 + length > bytes.length) throw new Error("ohttp-keys: truncated key configuration");
    const { config } = parseKeyConfig(bytes.subarray(at + 2, at + 2 + length));
    if (config) out.push(config);
    at += 2 + length;
  }
  return out.filter(usable).concat(out.filter((c) => !usable(c)));
}

/** Whether this client can encapsulate to ``config`` (X25519, HKDF-SHA256, AES-128-GCM).
 *  @param {KeyConfig} config */
export const usable = (config) => config.kemId === KEM_X25519
  && config.suites.some((s) => s.kdfId === KDF_SHA256 && s.aeadId === AEAD_AES128GCM);

/**
 * Encapsulate a Binary HTTP request for ``config`` (RFC 9458 §4.3); ``open`` decapsulates
 * the gateway's answer to it (§4.4).
 * @param {KeyConfig} config
 * @param {Uint8Array} request  a Binary HTTP request
 * @param {import("./hpke.js").KeyPair} [ephemeral]  tests only (RFC 9458 Appendix A)
 * @returns {Promise<{body: Uint8Array, open: (response: Uint8Array) => Promise<Uint8Array>}>}
 */
export async function encapsulate(config, request, ephemeral) {
  if (!usable(config)) throw new Error("ohttp: no supported HPKE suite in the key configuration");
  const header = concat(Uint8Array.of(config.keyId), i2osp(KEM_X25519, 2), i2osp(KDF_SHA256, 2), i2osp(AEAD_AES128GCM, 2));
  const sender = await setupBaseS(config.publicKey, concat(REQUEST_LABEL, Uint8Array.of(0), header), ephemeral);
  const body = concat(header, sender.enc, await sender.context.seal(new Uint8Array(0), request));
  const secret = await sender.context.export(RESPONSE_LABEL, RESPONSE_NONCE);
  return {
    body,
    open: async (response) => {
      if (response.length < RESPONSE_NONCE + 16) throw new Error("ohttp: the encapsulated response is too short");
      const { key, nonce } = await responseKeys(secret, sender.enc, response.subarray(0, RESPONSE_NONCE));
      const aes = await globalThis.crypto.subtle.importKey("raw", key, "AES-GCM", false, ["decrypt"]);
      const sealed = /** @type {Bytes} */ (response.subarray(RESPONSE_NONCE));
      return new Uint8Array(await globalThis.crypto.subtle.decrypt({ name: "AES-GCM", iv: nonce }, aes, sealed));
    },
  };
}

/** The response's AEAD key and nonce (RFC 9458 §4.4).
 *  @param {Uint8Array} secret @param {Uint8Array} enc @param {Uint8Array} responseNonce */
export async function responseKeys(secret, enc, responseNonce) {
  const prk = await hmacKey(await extract(concat(enc, responseNonce), secret));
  const [key, nonce] = await Promise.all([expand(prk, utf8.encode("key"), NK), expand(prk, utf8.encode("nonce"), NN)]);
  return { key, nonce };
}

/** An error the caller retries (the client's uploader: with its backoff). */
class Retry extends Error {}

/**
 * @typedef {object} RelayOptions
 * @property {string} [keysUrl]  where the gateway's ``application/ohttp-keys`` are fetched;
 *   default the collector's GATEWAY_PATH
 * @property {Uint8Array} [keys]  the ``application/ohttp-keys`` shipped with the app (then
 *   never fetched: every copy of the app uses the same keys)
 * @property {typeof fetch} [fetch]
 * @property {() => number} [now]  wall clock in ms
 */

/**
 * An Oblivious Relay Resource to send requests through, with the gateway's keys: give it
 * to ``new Client(url, {relay})``. Its ``fetch`` has ``fetch``'s shape.
 */
export class Relay {
  /** @param {string} url  the relay resource (it forwards to the collector's gateway)
   *  @param {RelayOptions} [options] */
  constructor(url, options = {}) {
    this.url = url;
    this.keysUrl = options.keysUrl ?? null;
    this.pinned = options.keys ? parseKeyConfigs(options.keys) : null;
    if (this.pinned && !this.pinned.some(usable)) throw new TypeError("Relay: no usable key configuration in keys");
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.now = options.now ?? Date.now;
    /** @type {{config: KeyConfig, expires: number} | null} */
    this.cached = null;
    /** @type {Promise<KeyConfig> | null} */ this.pending = null;
    /** @type {any} */ this.refreshTimer = null;
    this.refreshDelay = [10_000, 60_000]; // ms: an expired configuration is refreshed after 10–70 s
    /** @type {string | undefined} */ this.target = undefined;
    this.counts = { requests: 0, keyFetches: 0, keyRetries: 0 };
  }

  /** Whether this browser's Web Crypto has X25519 (every current one does; older ones do
   *  not): without it every sealed upload fails and waits in the queue, so an app may send
   *  directly instead. @returns {Promise<boolean>} */
  static async supported() {
    try {
      await globalThis.crypto.subtle.generateKey({ name: "X25519" }, false, ["deriveBits"]);
      return true;
    } catch {
      return false;
    }
  }

  /** Fetch the gateway's keys now, off the upload path: the client calls this when it is
   *  made. The collector sees who fetches its keys and when, so a fetch just before a sealed
   *  upload would tie that upload to the address. @param {string} target  the collector's URL */
  prepare(target) {
    this.target ??= target;
    if (!this.pinned && !this.cached && !this.pending) this._fetchKeys(false).catch(() => {});
  }

  /** The key configuration to use: pinned; cached (once expired it is still used while a
   *  refresh runs at a random moment 10–70 s later, apart from the upload at hand); or
   *  fetched, when there is none yet or ``refresh`` (the gateway no longer has the key), from
   *  keysUrl, by default the GATEWAY_PATH of the collector.
   *  @param {boolean} [refresh] @param {string} [target]  a URL of the collector's API
   *  @returns {Promise<KeyConfig>} */
  async keyConfig(refresh = false, target) {
    if (this.pinned) return /** @type {KeyConfig} */ (this.pinned.find(usable));
    this.target ??= target;
    if (!refresh && this.cached) {
      if (this.now() >= this.cached.expires && !this.refreshTimer) {
        const [least, spread] = this.refreshDelay;
        const delay = least + globalThis.crypto.getRandomValues(new Uint32Array(1))[0] / 2 ** 32 * spread;
        this.refreshTimer = setTimeout(() => { this._fetchKeys(false).catch(() => {}).finally(() => { this.refreshTimer = null; }); }, delay);
        this.refreshTimer?.unref?.();
      }
      return this.cached.config;
    }
    if (!refresh && this.pending) return this.pending;
    return this._fetchKeys(refresh);
  }

  /** @param {boolean} refresh @returns {Promise<KeyConfig>} */
  _fetchKeys(refresh) {
    const run = this._download(refresh);
    this.pending = run;
    run.then(() => { this.pending = null; }, () => { this.pending = null; });
    return run;
  }

  /** @param {boolean} refresh @returns {Promise<KeyConfig>} */
  async _download(refresh) {
    this.counts.keyFetches++;
    let response;
    try {
      response = await this.fetchImpl(this.keysUrl ?? gatewayOf(/** @type {string} */ (this.target)), { credentials: "omit", cache: refresh ? "no-cache" : "default" });
    } catch (e) {
      throw new Retry(`ohttp: the key configuration is unreachable (${/** @type {any} */ (e)?.name ?? e})`);
    }
    if (!response.ok) throw new Retry(`ohttp: the key configuration answered HTTP ${response.status}`);
    const config = parseKeyConfigs(new Uint8Array(await response.arrayBuffer())).find(usable);
    if (!config) throw new Retry("ohttp: the gateway offers no key configuration this client can use");
    const age = /max-age=(\d+)/.exec(response.headers.get("cache-control") ?? "");
    const ttl = age ? Math.min(Number(age[1]) * 1000, KEYS_TTL_MAX) : KEYS_TTL;
    this.cached = { config, expires: this.now() + ttl };
    return config;
  }

  /**
   * Send a request through the relay: encapsulated for the gateway, the answer
   * decapsulated into a ``Response``. A request under a key the gateway does not have
   * fetches the key configuration again and is sent once more. Rejects (as ``fetch`` does
   * on a network error) when it cannot learn the outcome; the relay's own refusals
   * (429, 5xx, …) come back as they are.
   * @param {string} url  the target: the collector's URL
   * @param {{method?: string, headers?: Record<string, string>, body?: string, keepalive?: boolean}} [init]
   * @returns {Promise<Response>}
   */
  async fetch(url, init = {}) {
    const request = binaryRequest(url, init);
    for (let attempt = 0; ; attempt++) {
      const config = await this.keyConfig(attempt > 0, url);
      const { body, open } = await encapsulate(config, request);
      this.counts.requests++;
      const response = await this.fetchImpl(this.url, {
        method: "POST", headers: { "Content-Type": REQUEST_TYPE }, body: /** @type {Bytes} */ (body), credentials: "omit", keepalive: init.keepalive,
      });
      const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
      if (response.ok && type === RESPONSE_TYPE) {
        let inner;
        try {
          inner = decodeResponse(await open(new Uint8Array(await response.arrayBuffer())));
        } catch {
          throw new Retry("ohttp: the response could not be decapsulated"); // resent: the collector drops duplicates
        }
        const noBody = inner.status === 204 || inner.status === 304;
        return new Response(noBody ? null : /** @type {Bytes} */ (inner.body), { status: inner.status, headers: inner.headers });
      }
      if (response.ok) throw new Retry(`ohttp: the relay answered ${type || "no content type"}, not ${RESPONSE_TYPE}`);
      if (!await isKeyProblem(response)) return response;
      if (this.pinned || attempt > 0) throw new Retry("ohttp: the gateway does not have the key configuration's key");
      this.counts.keyRetries++;
    }
  }
}

/** The Binary HTTP request ``fetch(url, init)`` seals (conformance/vectors/ohttp.json pins
 *  its bytes). @param {string} url
 *  @param {{method?: string, headers?: Record<string, string>, body?: string}} [init] */
export function binaryRequest(url, init = {}) {
  const target = new URL(url);
  return encodeRequest({
    method: init.method ?? "GET",
    scheme: target.protocol.slice(0, -1),
    authority: target.host,
    path: target.pathname + target.search,
    headers: Object.entries(init.headers ?? {}),
    body: init.body == null ? undefined : utf8.encode(init.body),
  });
}

/** The gateway of the collector whose API ``url`` is: its base URL (what precedes
 *  ``/v1/``) followed by GATEWAY_PATH. @param {string} url */
const gatewayOf = (url) => {
  const at = url.indexOf("/v1/");
  return (at < 0 ? new URL(url).origin : url.slice(0, at)) + GATEWAY_PATH;
};

/** Whether ``response`` says the gateway does not have the key (RFC 9458 §5.3: a 400 with
 *  a problem document of type KEY_PROBLEM). @param {Response} response */
async function isKeyProblem(response) {
  if (response.status !== 400) return false;
  try {
    const problem = await response.clone().json();
    return problem?.type === KEY_PROBLEM;
  } catch {
    return false;
  }
}
