// HPKE (RFC 9180) base mode for the one suite Oblivious HTTP uses here:
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM — on Web Crypto alone (X25519,
// HMAC-SHA256, AES-GCM; Node 20 and current browsers), no dependency. HKDF is composed
// from HMAC because HPKE needs Extract and Expand apart (Web Crypto's HKDF does both in
// one call). The sender side is what the SDK uses; the receiver side is there for the
// tests (RFC 9180 vectors, a gateway in Node) and is tree-shaken out of a page's bundle.
// See docs/guides/web.md ("Through an Oblivious HTTP relay").

export const KEM_X25519 = 0x0020;
export const KDF_SHA256 = 0x0001;
export const AEAD_AES128GCM = 0x0001;
export const NK = 16; // AES-128-GCM key bytes
export const NN = 12; // AES-128-GCM nonce bytes
export const NENC = 32; // an X25519 public key (the encapsulated key)

const subtle = () => globalThis.crypto.subtle;
const utf8 = (/** @type {string} */ s) => new TextEncoder().encode(s);
/** @param {number} n @param {number} width @returns {Uint8Array} big-endian */
export const i2osp = (n, width) => {
  const out = new Uint8Array(width);
  for (let i = width - 1, v = n; i >= 0 && v > 0; i--, v = Math.floor(v / 256)) out[i] = v % 256;
  return out;
};
/** @param {...Uint8Array} parts */
export const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
};

const HPKE_V1 = utf8("HPKE-v1");
const KEM_SUITE = concat(utf8("KEM"), i2osp(KEM_X25519, 2));
const HPKE_SUITE = concat(utf8("HPKE"), i2osp(KEM_X25519, 2), i2osp(KDF_SHA256, 2), i2osp(AEAD_AES128GCM, 2));
// PKCS #8 wrapping of a raw X25519 private key (RFC 8410): Web Crypto imports no raw one.
const PKCS8_X25519 = Uint8Array.from([48, 46, 2, 1, 0, 48, 5, 6, 3, 43, 101, 110, 4, 34, 4, 32]);
const EMPTY = new Uint8Array(0);
// An empty HMAC key equals HashLen zero bytes (HMAC pads keys with zeros), and Web Crypto
// refuses empty keys: RFC 5869's default salt.
const ZERO_SALT = new Uint8Array(32);

/** What Web Crypto takes: bytes over an ArrayBuffer, as every Uint8Array here is (the
 *  casts to it only tell TypeScript so). @typedef {Uint8Array<ArrayBuffer>} Bytes */

/** An HMAC-SHA256 key. @param {Uint8Array} key */
export const hmacKey = (key) =>
  subtle().importKey("raw", /** @type {Bytes} */ (key.length ? key : ZERO_SALT), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);

/** HMAC-SHA256. @param {Uint8Array | CryptoKey} key @param {Uint8Array} data */
async function hmac(key, data) {
  const k = key instanceof Uint8Array ? await hmacKey(key) : key;
  return new Uint8Array(await subtle().sign("HMAC", k, /** @type {Bytes} */ (data)));
}

/** HKDF-Extract (RFC 5869). @param {Uint8Array} salt @param {Uint8Array} ikm */
export const extract = (salt, ikm) => hmac(salt, ikm);

/** HKDF-Expand (RFC 5869). @param {Uint8Array | CryptoKey} prk  the bytes, or imported once
 *  for several expansions @param {Uint8Array} info @param {number} length */
export async function expand(prk, info, length) {
  const key = prk instanceof Uint8Array ? await hmacKey(prk) : prk;
  const out = new Uint8Array(length);
  let t = EMPTY;
  for (let i = 1, at = 0; at < length; i++, at += 32) {
    t = await hmac(key, concat(t, info, Uint8Array.of(i)));
    out.set(t.subarray(0, Math.min(32, length - at)), at);
  }
  return out;
}

/** @param {Uint8Array} suite @param {Uint8Array} salt @param {string} label @param {Uint8Array} ikm */
const labeledExtract = (suite, salt, label, ikm) => extract(salt, concat(HPKE_V1, suite, utf8(label), ikm));
/** @param {Uint8Array} suite @param {Uint8Array | CryptoKey} prk @param {string} label @param {Uint8Array} info @param {number} length */
const labeledExpand = (suite, prk, label, info, length) =>
  expand(prk, concat(i2osp(length, 2), HPKE_V1, suite, utf8(label), info), length);

/** An X25519 public key from its 32 bytes. @param {Uint8Array} raw */
export const importPublicKey = (raw) => subtle().importKey("raw", /** @type {Bytes} */ (raw), { name: "X25519" }, true, []);
/** An X25519 private key from its 32 bytes. @param {Uint8Array} raw */
export const importPrivateKey = (raw) =>
  subtle().importKey("pkcs8", concat(PKCS8_X25519, raw), { name: "X25519" }, false, ["deriveBits"]);

/**
 * @typedef {object} KeyPair  an X25519 key pair: the private key and the raw public key
 * @property {CryptoKey} privateKey
 * @property {Uint8Array} publicKey
 */

/** A fresh ephemeral key pair (Web Crypto's key generation: its CSPRNG). @returns {Promise<KeyPair>} */
export async function generateKeyPair() {
  const pair = /** @type {CryptoKeyPair} */ (await subtle().generateKey({ name: "X25519" }, true, ["deriveBits"]));
  return { privateKey: pair.privateKey, publicKey: new Uint8Array(await subtle().exportKey("raw", pair.publicKey)) };
}

/** DeriveKeyPair (RFC 9180 §7.1.3): the key pair of a seed (tests, known answers).
 *  @param {Uint8Array} ikm @returns {Promise<KeyPair & {secret: Uint8Array}>} */
export async function deriveKeyPair(ikm) {
  const prk = await labeledExtract(KEM_SUITE, EMPTY, "dkp_prk", ikm);
  const secret = await labeledExpand(KEM_SUITE, prk, "sk", EMPTY, 32);
  const key = await subtle().importKey("pkcs8", concat(PKCS8_X25519, secret), { name: "X25519" }, true, ["deriveBits"]);
  const x = /** @type {string} */ ((await subtle().exportKey("jwk", key)).x);
  const publicKey = Uint8Array.from(atob(x.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  return { privateKey: await importPrivateKey(secret), publicKey, secret };
}

/** DH(sk, pk), refusing the all-zero output of a small-order point (RFC 9180 §7.1.4).
 *  @param {CryptoKey} sk @param {Uint8Array} pk */
async function dh(sk, pk) {
  const bits = new Uint8Array(await subtle().deriveBits({ name: "X25519", public: await importPublicKey(pk) }, sk, 256));
  if (bits.every((b) => b === 0)) throw new Error("HPKE: the public key is of small order");
  return bits;
}

/** DHKEM's ExtractAndExpand. @param {Uint8Array} dhOut @param {Uint8Array} kemContext */
async function sharedSecret(dhOut, kemContext) {
  const prk = await labeledExtract(KEM_SUITE, EMPTY, "eae_prk", dhOut);
  return labeledExpand(KEM_SUITE, prk, "shared_secret", kemContext, 32);
}

/**
 * An HPKE context (RFC 9180 §5.2): seal or open in sequence, and export secrets.
 */
export class Context {
  /** @param {CryptoKey} key @param {Uint8Array} baseNonce @param {Uint8Array} exporterSecret */
  constructor(key, baseNonce, exporterSecret) {
    this.key = key;
    this.baseNonce = baseNonce;
    this.exporterSecret = exporterSecret;
    this.seq = 0;
  }

  _nonce() {
    const nonce = this.baseNonce.slice();
    const s = i2osp(this.seq++, NN);
    for (let i = 0; i < NN; i++) nonce[i] ^= s[i];
    return nonce;
  }

  /** @param {Uint8Array} aad @param {Uint8Array} plaintext */
  async seal(aad, plaintext) {
    const iv = this._nonce();
    const additionalData = /** @type {Bytes} */ (aad);
    return new Uint8Array(await subtle().encrypt({ name: "AES-GCM", iv, additionalData }, this.key, /** @type {Bytes} */ (plaintext)));
  }

  /** @param {Uint8Array} aad @param {Uint8Array} ciphertext */
  async open(aad, ciphertext) {
    const iv = this._nonce();
    const additionalData = /** @type {Bytes} */ (aad);
    return new Uint8Array(await subtle().decrypt({ name: "AES-GCM", iv, additionalData }, this.key, /** @type {Bytes} */ (ciphertext)));
  }

  /** @param {Uint8Array} exporterContext @param {number} length */
  export(exporterContext, length) {
    return labeledExpand(HPKE_SUITE, this.exporterSecret, "sec", exporterContext, length);
  }
}

// The key schedule's hashes of the (empty) PSK id and of the info: the same for every
// request under one key configuration, computed once (two HMACs of the ~ten a request costs).
/** @type {Promise<Uint8Array> | null} */
let pskIdHash = null;
/** @type {Map<string, Promise<Uint8Array>>} */
const infoHashes = new Map();

/** The base mode's key schedule (RFC 9180 §5.1). @param {Uint8Array} shared @param {Uint8Array} info */
export async function keySchedule(shared, info) {
  pskIdHash ??= labeledExtract(HPKE_SUITE, EMPTY, "psk_id_hash", EMPTY);
  const id = info.join();
  let infoHash = infoHashes.get(id);
  if (!infoHash) {
    if (infoHashes.size > 16) infoHashes.clear();
    infoHashes.set(id, infoHash = labeledExtract(HPKE_SUITE, EMPTY, "info_hash", info));
  }
  const context = concat(Uint8Array.of(0), await pskIdHash, await infoHash);
  const secret = await hmacKey(await labeledExtract(HPKE_SUITE, shared, "secret", EMPTY));
  const [key, baseNonce, exporterSecret] = await Promise.all([
    labeledExpand(HPKE_SUITE, secret, "key", context, NK),
    labeledExpand(HPKE_SUITE, secret, "base_nonce", context, NN),
    labeledExpand(HPKE_SUITE, secret, "exp", context, 32),
  ]);
  const aes = await subtle().importKey("raw", key, "AES-GCM", false, ["encrypt", "decrypt"]);
  return { context: new Context(aes, baseNonce, exporterSecret), key, baseNonce, exporterSecret, shared, scheduleContext: context };
}

/**
 * SetupBaseS: encapsulate to the recipient's public key.
 * @param {Uint8Array} pkR  the recipient's raw X25519 public key
 * @param {Uint8Array} info
 * @param {KeyPair} [ephemeral]  tests only (known-answer vectors); default a fresh pair
 * @returns {Promise<{enc: Uint8Array, context: Context, key: Uint8Array, baseNonce: Uint8Array, exporterSecret: Uint8Array, shared: Uint8Array, scheduleContext: Uint8Array}>}
 */
export async function setupBaseS(pkR, info, ephemeral) {
  const e = ephemeral ?? await generateKeyPair();
  const shared = await sharedSecret(await dh(e.privateKey, pkR), concat(e.publicKey, pkR));
  return { enc: e.publicKey, ...await keySchedule(shared, info) };
}

/**
 * SetupBaseR: the recipient's side (tests and test gateways).
 * @param {Uint8Array} enc @param {CryptoKey} skR @param {Uint8Array} pkR @param {Uint8Array} info
 */
export async function setupBaseR(enc, skR, pkR, info) {
  const shared = await sharedSecret(await dh(skR, enc), concat(enc, pkR));
  return keySchedule(shared, info);
}
