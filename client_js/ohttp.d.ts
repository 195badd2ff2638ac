// Type declarations of ldp-telemetry-client/ohttp: Oblivious HTTP (RFC 9458) with HPKE
// (RFC 9180) DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM on Web Crypto.

export const KEYS_TYPE: "application/ohttp-keys";
export const REQUEST_TYPE: "message/ohttp-req";
export const RESPONSE_TYPE: "message/ohttp-res";
/** The problem type of a request under a key the gateway does not have (RFC 9458 §5.3). */
export const KEY_PROBLEM: "https://iana.org/assignments/http-problem-types#ohttp-key";
/** Where the collector publishes its key configurations and takes encapsulated requests. */
export const GATEWAY_PATH: "/.well-known/ohttp-gateway";

/** One key configuration (RFC 9458 §3.1). */
export interface KeyConfig {
  keyId: number;
  kemId: number;
  publicKey: Uint8Array;
  suites: { kdfId: number; aeadId: number }[];
}

/** The key configurations of an `application/ohttp-keys` body, usable ones first. */
export function parseKeyConfigs(bytes: Uint8Array): KeyConfig[];
/** One key configuration at the start of `bytes`, and its length (null and 0 for a KEM
 *  other than X25519). */
export function parseKeyConfig(bytes: Uint8Array): { config: KeyConfig | null; length: number };
/** The response's AEAD key and nonce (RFC 9458 §4.4). */
export function responseKeys(
  secret: Uint8Array,
  enc: Uint8Array,
  responseNonce: Uint8Array,
): Promise<{ key: Uint8Array; nonce: Uint8Array }>;
/** The Binary HTTP request `Relay.fetch(url, init)` seals (RFC 9292, known length). */
export function binaryRequest(
  url: string,
  init?: { method?: string; headers?: Record<string, string>; body?: string },
): Uint8Array;
/** Whether this SDK can encapsulate to the configuration. */
export function usable(config: KeyConfig): boolean;
/** Encapsulate a Binary HTTP request; `open` decapsulates the gateway's answer. */
export function encapsulate(
  config: KeyConfig,
  request: Uint8Array,
): Promise<{ body: Uint8Array; open(response: Uint8Array): Promise<Uint8Array> }>;

export interface RelayOptions {
  /** Where the gateway's `application/ohttp-keys` are fetched; default the collector's
   *  `GATEWAY_PATH` (the base URL the client was given, followed by it). */
  keysUrl?: string;
  /** The `application/ohttp-keys` shipped with the app: then never fetched. */
  keys?: Uint8Array;
  fetch?: typeof fetch;
  /** Wall clock in ms. */
  now?: () => number;
}

/** An Oblivious Relay Resource and the gateway's keys: `new Client(url, { relay })`. */
export class Relay {
  constructor(url: string, options?: RelayOptions);
  /** Whether this browser's Web Crypto has X25519 (without it, sealed uploads wait in the queue). */
  static supported(): Promise<boolean>;
  readonly url: string;
  /** Requests sent, key configurations fetched, requests resent after the gateway's key problem. */
  readonly counts: { requests: number; keyFetches: number; keyRetries: number };
  /** Fetch the gateway's keys now, off the upload path (the client calls it when made). */
  prepare(collectorUrl: string): void;
  /** The key configuration in use (pinned, cached, or fetched; again when `refresh`). */
  keyConfig(refresh?: boolean, target?: string): Promise<KeyConfig>;
  /** `fetch` through the relay: the request encapsulated, the answer decapsulated. */
  fetch(url: string, init?: RequestInit): Promise<Response>;
}
