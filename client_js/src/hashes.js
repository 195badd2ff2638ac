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

// BLAKE2b with 64-bit words as pairs of 32-bit halves (low first), as in RFC 7693's
// reference code: a string metric draws ~2 coefficients per (level, row) with it.
const IV32 = new Uint32Array([
  0xf3bcc908, 0x6a09e667, 0x84caa73b, 0xbb67ae85, 0xfe94f82b, 0x3c6ef372, 0x5f1d36f1, 0xa54ff53a,
  0xade682d1, 0x510e527f, 0x2b3e6c1f, 0x9b05688c, 0xfb41bd6b, 0x1f83d9ab, 0x137e2179, 0x5be0cd19,
]);
const SIGMA = [
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
  14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3,
  11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4,
  7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8,
  9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13,
  2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9,
  12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11,
  13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10,
  6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5,
  10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0,
].map((x) => 2 * x);
const V = new Uint32Array(32);
const MW = new Uint32Array(32);

/** v[a] += v[b] (64-bit). @param {number} a @param {number} b */
function add64(a, b) {
  const lo = V[a] + V[b];
  V[a + 1] = V[a + 1] + V[b + 1] + (lo >= 0x100000000 ? 1 : 0);
  V[a] = lo;
}

/** v[a] += m[i]. @param {number} a @param {number} i */
function add64m(a, i) {
  const lo = V[a] + MW[i];
  V[a + 1] = V[a + 1] + MW[i + 1] + (lo >= 0x100000000 ? 1 : 0);
  V[a] = lo;
}

/** @param {number} a @param {number} b @param {number} c @param {number} d
 *  @param {number} x @param {number} y */
function g(a, b, c, d, x, y) {
  add64(a, b); add64m(a, x);
  let x0 = V[d] ^ V[a], x1 = V[d + 1] ^ V[a + 1];
  V[d] = x1; V[d + 1] = x0; // rotr 32
  add64(c, d);
  x0 = V[b] ^ V[c]; x1 = V[b + 1] ^ V[c + 1];
  V[b] = (x0 >>> 24) ^ (x1 << 8); V[b + 1] = (x1 >>> 24) ^ (x0 << 8); // rotr 24
  add64(a, b); add64m(a, y);
  x0 = V[d] ^ V[a]; x1 = V[d + 1] ^ V[a + 1];
  V[d] = (x0 >>> 16) ^ (x1 << 16); V[d + 1] = (x1 >>> 16) ^ (x0 << 16); // rotr 16
  add64(c, d);
  x0 = V[b] ^ V[c]; x1 = V[b + 1] ^ V[c + 1];
  V[b] = (x1 >>> 31) ^ (x0 << 1); V[b + 1] = (x0 >>> 31) ^ (x1 << 1); // rotr 63
}

/** @param {Uint32Array} h @param {Uint8Array} block @param {number} t @param {boolean} last */
function compress(h, block, t, last) {
  for (let i = 0; i < 16; i++) { V[i] = h[i]; V[i + 16] = IV32[i]; }
  V[24] ^= t; // byte counts here stay far below 2^32
  if (last) { V[28] = ~V[28]; V[29] = ~V[29]; }
  for (let i = 0; i < 32; i++) {
    MW[i] = block[4 * i] | (block[4 * i + 1] << 8) | (block[4 * i + 2] << 16) | (block[4 * i + 3] << 24);
  }
  for (let r = 0; r < 12; r++) {
    const s = 16 * (r % 10);
    g(0, 8, 16, 24, SIGMA[s], SIGMA[s + 1]);
    g(2, 10, 18, 26, SIGMA[s + 2], SIGMA[s + 3]);
    g(4, 12, 20, 28, SIGMA[s + 4], SIGMA[s + 5]);
    g(6, 14, 22, 30, SIGMA[s + 6], SIGMA[s + 7]);
    g(0, 10, 20, 30, SIGMA[s + 8], SIGMA[s + 9]);
    g(2, 12, 22, 24, SIGMA[s + 10], SIGMA[s + 11]);
    g(4, 14, 16, 26, SIGMA[s + 12], SIGMA[s + 13]);
    g(6, 8, 18, 28, SIGMA[s + 14], SIGMA[s + 15]);
  }
  for (let i = 0; i < 16; i++) h[i] ^= V[i] ^ V[i + 16];
}

/** BLAKE2b of ``data`` with ``key`` (up to 64 bytes) and a digest of ``size`` bytes.
 *  @param {Uint8Array} data @param {Uint8Array} key @param {number} size */
export function blake2b(data, key, size) {
  const h = new Uint32Array(IV32);
  h[0] ^= 0x01010000 ^ (key.length << 8) ^ size;
  const input = new Uint8Array((key.length ? 128 : 0) + data.length);
  input.set(key);
  input.set(data, key.length ? 128 : 0);
  const blocks = Math.max(1, Math.ceil(input.length / 128));
  for (let i = 0; i < blocks; i++) {
    const block = new Uint8Array(128);
    block.set(input.subarray(128 * i, 128 * (i + 1)));
    const last = i === blocks - 1;
    compress(h, block, last ? input.length : 128 * (i + 1), last);
  }
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (h[i >> 2] >>> (8 * (i & 3))) & 0xff;
  return out;
}
