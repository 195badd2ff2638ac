// SHAKE-256 (FIPS 202) and keyed BLAKE2b (RFC 7693): the two hashes the protocol needs
// that Web Crypto lacks (docs/protocol.md §5, §6). Lanes as pairs of 32-bit words.

const RHO = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];
const PI = new Array(25); // destination of lane x + 5y: y + 5((2x + 3y) mod 5)
for (let x = 0; x < 5; x++) for (let y = 0; y < 5; y++) PI[x + 5 * y] = y + 5 * ((2 * x + 3 * y) % 5);
const RC = new Uint32Array(48);
{
  let r = 1;
  for (let i = 0; i < 24; i++) {
    let lo = 0, hi = 0;
    for (let j = 0; j < 7; j++) {
      if (r & 1) {
        const bit = (1 << j) - 1;
        if (bit < 32) lo |= 1 << bit; else hi |= 1 << (bit - 32);
      }
      r = r & 0x80 ? ((r << 1) ^ 0x171) & 0xff : (r << 1) & 0xff;
    }
    RC[2 * i] = lo >>> 0;
    RC[2 * i + 1] = hi >>> 0;
  }
}

/** Keccak-f[1600] on 25 lanes, s[2i] the low and s[2i+1] the high word of lane i.
 *  @param {Uint32Array} s */
function keccakF(s) {
  const c = new Uint32Array(10);
  const b = new Uint32Array(50);
  for (let round = 0; round < 24; round++) {
    for (let x = 0; x < 5; x++) {
      c[2 * x] = s[2 * x] ^ s[2 * x + 10] ^ s[2 * x + 20] ^ s[2 * x + 30] ^ s[2 * x + 40];
      c[2 * x + 1] = s[2 * x + 1] ^ s[2 * x + 11] ^ s[2 * x + 21] ^ s[2 * x + 31] ^ s[2 * x + 41];
    }
    for (let x = 0; x < 5; x++) {
      const n = (x + 1) % 5, p = (x + 4) % 5;
      const lo = c[2 * p] ^ ((c[2 * n] << 1) | (c[2 * n + 1] >>> 31));
      const hi = c[2 * p + 1] ^ ((c[2 * n + 1] << 1) | (c[2 * n] >>> 31));
      for (let y = 0; y < 25; y += 5) {
        s[2 * (x + y)] ^= lo;
        s[2 * (x + y) + 1] ^= hi;
      }
    }
    for (let i = 0; i < 25; i++) {
      const r = RHO[i];
      let lo = s[2 * i], hi = s[2 * i + 1];
      if (r >= 32) [lo, hi] = [hi, lo];
      const k = r % 32;
      const nlo = k ? (lo << k) | (hi >>> (32 - k)) : lo;
      const nhi = k ? (hi << k) | (lo >>> (32 - k)) : hi;
      b[2 * PI[i]] = nlo;
      b[2 * PI[i] + 1] = nhi;
    }
    for (let y = 0; y < 25; y += 5) {
      for (let x = 0; x < 5; x++) {
        const i = x + y, i1 = ((x + 1) % 5) + y, i2 = ((x + 2) % 5) + y;
        s[2 * i] = b[2 * i] ^ (~b[2 * i1] & b[2 * i2]);
        s[2 * i + 1] = b[2 * i + 1] ^ (~b[2 * i1 + 1] & b[2 * i2 + 1]);
      }
    }
    s[0] ^= RC[2 * round];
    s[1] ^= RC[2 * round + 1];
  }
}

const RATE = 136; // SHAKE-256

/** The SHAKE-256 output stream of ``data``: a function returning its next n bytes.
 *  @param {Uint8Array} data @returns {(n: number) => Uint8Array} */
export function shake256(data) {
  const s = new Uint32Array(50);
  const bytes = new Uint8Array(s.buffer); // little-endian platforms (every browser, Node)
  let off = 0;
  for (const x of data) {
    bytes[off++] ^= x;
    if (off === RATE) { keccakF(s); off = 0; }
  }
  bytes[off] ^= 0x1f;
  bytes[RATE - 1] ^= 0x80;
  keccakF(s);
  let pos = 0;
  return (n) => {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      if (pos === RATE) { keccakF(s); pos = 0; }
      out[i] = bytes[pos++];
    }
    return out;
  };
}

// BLAKE2b with BigInt words: used once per string metric for its hash coefficients.
const M64 = (1n << 64n) - 1n;
const IV = [
  0x6a09e667f3bcc908n, 0xbb67ae8584caa73bn, 0x3c6ef372fe94f82bn, 0xa54ff53a5f1d36f1n,
  0x510e527fade682d1n, 0x9b05688c2b3e6c1fn, 0x1f83d9abfb41bd6bn, 0x5be0cd19137e2179n,
];
const SIGMA = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
  [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
  [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
  [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
  [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
  [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
  [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
  [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];
const rotr = (/** @type {bigint} */ x, /** @type {bigint} */ n) => ((x >> n) | (x << (64n - n))) & M64;

/** @param {bigint[]} h @param {Uint8Array} block @param {bigint} t @param {boolean} last */
function compress(h, block, t, last) {
  const m = [];
  for (let i = 0; i < 16; i++) {
    let w = 0n;
    for (let j = 7; j >= 0; j--) w = (w << 8n) | BigInt(block[8 * i + j]);
    m.push(w);
  }
  const v = [...h, ...IV];
  v[12] ^= t & M64;
  v[13] ^= t >> 64n;
  if (last) v[14] ^= M64;
  const g = (/** @type {number} */ a, /** @type {number} */ b, /** @type {number} */ c,
    /** @type {number} */ d, /** @type {bigint} */ x, /** @type {bigint} */ y) => {
    v[a] = (v[a] + v[b] + x) & M64; v[d] = rotr(v[d] ^ v[a], 32n);
    v[c] = (v[c] + v[d]) & M64; v[b] = rotr(v[b] ^ v[c], 24n);
    v[a] = (v[a] + v[b] + y) & M64; v[d] = rotr(v[d] ^ v[a], 16n);
    v[c] = (v[c] + v[d]) & M64; v[b] = rotr(v[b] ^ v[c], 63n);
  };
  for (let r = 0; r < 12; r++) {
    const s = SIGMA[r % 10];
    g(0, 4, 8, 12, m[s[0]], m[s[1]]); g(1, 5, 9, 13, m[s[2]], m[s[3]]);
    g(2, 6, 10, 14, m[s[4]], m[s[5]]); g(3, 7, 11, 15, m[s[6]], m[s[7]]);
    g(0, 5, 10, 15, m[s[8]], m[s[9]]); g(1, 6, 11, 12, m[s[10]], m[s[11]]);
    g(2, 7, 8, 13, m[s[12]], m[s[13]]); g(3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
  for (let i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/** BLAKE2b of ``data`` with ``key`` (up to 64 bytes) and a digest of ``size`` bytes.
 *  @param {Uint8Array} data @param {Uint8Array} key @param {number} size */
export function blake2b(data, key, size) {
  const h = [...IV];
  h[0] ^= 0x01010000n ^ (BigInt(key.length) << 8n) ^ BigInt(size);
  const input = new Uint8Array((key.length ? 128 : 0) + data.length);
  input.set(key);
  input.set(data, key.length ? 128 : 0);
  const blocks = Math.max(1, Math.ceil(input.length / 128));
  for (let i = 0; i < blocks; i++) {
    const block = new Uint8Array(128);
    block.set(input.subarray(128 * i, 128 * (i + 1)));
    const last = i === blocks - 1;
    compress(h, block, BigInt(last ? input.length : 128 * (i + 1)), last);
  }
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = Number((h[i >> 3] >> BigInt(8 * (i & 7))) & 0xffn);
  return out;
}
