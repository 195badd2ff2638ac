// Randomness: one stream of bytes and the draws built on it, exactly as the Python SDK's
// client_sdk/mechanisms/randomness.py builds them (docs/protocol.md §2).

import { bitlen, bitlenNumber, dyadic } from "./exact.js";

const BLOCK = 65536; // getRandomValues' most per call: its cost is per call

/** Bytes from crypto.getRandomValues, read in blocks of 4 KiB (at most 65,536 a call). */
export function cryptoBytes() {
  let buf = new Uint8Array(0);
  let pos = 0;
  /** @param {number} n */
  return (n) => {
    if (pos + n > buf.length) {
      const tail = buf.subarray(pos);
      const fresh = new Uint8Array(Math.max(BLOCK, n - tail.length));
      for (let i = 0; i < fresh.length; i += 65536) {
        globalThis.crypto.getRandomValues(fresh.subarray(i, Math.min(fresh.length, i + 65536)));
      }
      const next = new Uint8Array(tail.length + fresh.length);
      next.set(tail);
      next.set(fresh, tail.length);
      buf = next;
      pos = 0;
    }
    const out = buf.slice(pos, pos + n);
    pos += n;
    return out;
  };
}

/** Bytes from a fixed array (the conformance vectors); throws when they run out.
 *  @param {Uint8Array} data */
export function fixedBytes(data) {
  let pos = 0;
  const take = (/** @type {number} */ n) => {
    if (pos + n > data.length) throw new Error(`random bytes ran out: ${pos}+${n} > ${data.length}`);
    const out = data.slice(pos, pos + n);
    pos += n;
    return out;
  };
  take.used = () => pos;
  return take;
}

/** @param {Uint8Array} bytes @returns {bigint} */
export function bigFromBytes(bytes) {
  let hex = "0x0";
  for (const b of bytes) hex += b.toString(16).padStart(2, "0");
  return BigInt(hex);
}

/**
 * The draws of docs/protocol.md §2 on a byte source. ``randrangeBits`` is "n" for the
 * CSPRNG (Python's random.Random: bitlen(n) bits a try) and "n-1" for the permanent
 * response's stream (HmacShakeRandom: bitlen(n - 1)).
 */
export class Rng {
  /** @param {(n: number) => Uint8Array} take @param {"n" | "n-1"} [randrangeBits] */
  constructor(take, randrangeBits = "n") {
    this.take = take;
    this.minusOne = randrangeBits === "n-1";
  }

  /** k random bits as a bigint. @param {number} k */
  bits(k) {
    if (k <= 0) return 0n;
    const n = (k + 7) >> 3;
    return bigFromBytes(this.take(n)) >> BigInt(8 * n - k);
  }

  /** k ≤ 48 random bits as a number. @param {number} k */
  smallBits(k) {
    if (k <= 0) return 0;
    const n = (k + 7) >> 3;
    const b = this.take(n);
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 256 + b[i];
    return Math.floor(v / 2 ** (8 * n - k));
  }

  /** A uniform int in [0, n) (n a positive safe integer). @param {number} n */
  randrange(n) {
    if (n > 2 ** 48) return Number(this.bigRandrange(BigInt(n)));
    const b = bitlenNumber(this.minusOne ? n - 1 : n);
    let r = this.smallBits(b);
    while (r >= n) r = this.smallBits(b);
    return r;
  }

  /** A uniform bigint in [0, n). @param {bigint} n */
  bigRandrange(n) {
    const b = this.minusOne ? bitlen(n - 1n) : bitlen(n);
    let r = this.bits(b);
    while (r >= n) r = this.bits(b);
    return r;
  }
}

/** Exact Bernoulli(p) for a float p in (0, 1). @param {Rng} rng @param {number} p */
export function bernoulli(rng, p) {
  const [num, t] = dyadic(p);
  if (t <= 48) {
    // one draw of t ≤ 48 bits decides: U < p iff its t bits are below num
    return rng.smallBits(t) < Number(num);
  }
  if (t <= 64) {
    // one draw of t bits decides too; its first 32 bits almost always suffice
    const n = (t + 7) >> 3;
    const b = rng.take(n);
    const top = ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
    const numTop = Number(num >> BigInt(t - 32));
    if (top !== numTop) return top < numTop;
    return bigFromBytes(b) >> BigInt(8 * n - t) < num;
  }
  let pos = 0;
  while (pos < t) {
    const w = Math.min(64, t - pos);
    const u = rng.bits(w);
    const chunk = (num >> BigInt(t - pos - w)) & ((1n << BigInt(w)) - 1n);
    if (u !== chunk) return u < chunk;
    pos += w;
  }
  return false;
}

/**
 * L independent exact Bernoulli(p) marks, as Python's bernoulli_lanes draws them, indexed
 * so that marks[c] is bit L - 1 - c of Python's integer: for a unary report, the bit of
 * value c. @param {Rng} rng @param {number} p @param {number} lanes @returns {Uint8Array}
 */
export function laneMarks(rng, p, lanes) {
  const [num, t] = dyadic(p);
  if (lanes > 64) return byteLanes(rng, num, t, lanes);
  const ones = planeLanes(rng, num, t, lanes);
  const marks = new Uint8Array(lanes);
  for (let c = 0; c < lanes; c++) marks[c] = Number((ones >> BigInt(lanes - 1 - c)) & 1n);
  return marks;
}

/** @param {Rng} rng @param {bigint} num @param {number} t @param {number} lanes */
function planeLanes(rng, num, t, lanes) {
  let undecided = (1n << BigInt(lanes)) - 1n;
  let ones = 0n;
  const full = undecided;
  for (let j = 0; j < t; j++) {
    const remaining = t - j;
    if (!undecided || !(num & ((1n << BigInt(remaining)) - 1n))) break;
    const plane = rng.bits(lanes);
    if ((num >> BigInt(remaining - 1)) & 1n) {
      ones |= undecided & (~plane & full);
      undecided &= plane;
    } else {
      undecided &= ~plane & full;
    }
  }
  return ones;
}

/** ``lanes`` marks 0/1, each 1 with probability num/2^t. @param {Rng} rng
 *  @param {bigint} num @param {number} t @param {number} lanes @returns {Uint8Array} */
function byteLanes(rng, num, t, lanes) {
  if (!num || !lanes) return new Uint8Array(lanes);
  const size = lanes + 2 + Math.floor(lanes / 128);
  return compareDigits(rng, num, t, rng.take(size), lanes);
}

const TIE = 2;

/** @param {Rng} rng @param {bigint} num @param {number} t @param {Uint8Array} raw
 *  @param {number} lanes @returns {Uint8Array} */
function compareDigits(rng, num, t, raw, lanes) {
  let digit, rest, restBits;
  if (t <= 8) {
    restBits = 0;
    digit = Number(num << BigInt(8 - t));
    rest = 0n;
  } else {
    restBits = t - 8;
    digit = Number(num >> BigInt(restBits));
    rest = num & ((1n << BigInt(restBits)) - 1n);
  }
  const marks = new Uint8Array(lanes);
  let undecided = 0;
  for (let i = 0; i < lanes; i++) {
    const b = raw[i];
    if (b < digit) marks[i] = 1;
    else if (b === digit && rest) { marks[i] = TIE; undecided++; }
  }
  if (!undecided) return marks;
  const spare = raw.subarray(lanes);
  const fill = spare.length >= undecided
    ? compareDigits(rng, rest, restBits, spare, undecided)
    : byteLanes(rng, rest, restBits, undecided);
  let k = 0;
  for (let i = 0; i < lanes; i++) if (marks[i] === TIE) marks[i] = fill[k++];
  return marks;
}

/** An endless stream of uniform ints in [0, n), n ≤ 2^16. @param {Rng} rng
 *  @param {number} n @param {number} batch */
export function* uniformIndices(rng, n, batch) {
  const mask = 2 ** bitlenNumber(n - 1) - 1;
  const size = 2 * (Math.floor((batch * (mask + 1)) / n) + 4);
  for (;;) {
    const raw = rng.take(size);
    for (let i = 0; i < size; i += 2) {
      const w = (raw[i] | (raw[i + 1] << 8)) & mask;
      if (w < n) yield w;
    }
  }
}

/** A uniform size-subset of [0, population) as 0/1 marks. @param {Rng} rng
 *  @param {number} population @param {number} size @returns {Uint8Array} */
export function subsetMarks(rng, population, size) {
  if (size === 0) return new Uint8Array(population);
  if (size === population) return new Uint8Array(population).fill(1);
  const t = Math.floor((256 * size + Math.floor(population / 2)) / population);
  const raw = rng.take(population);
  const marks = new Uint8Array(population);
  let have = 0;
  for (let i = 0; i < population; i++) if (raw[i] < t) { marks[i] = 1; have++; }
  if (have === size) return marks;
  const [old, now] = have > size ? [1, 0] : [0, 1];
  let todo = have > size ? have - size : size - have;
  const candidates = old ? have : population - have;
  const mask = 2 ** bitlenNumber(population - 1) - 1;
  const nbytes = 2 * (Math.floor((Math.floor((todo * (mask + 1)) / candidates) * 5) / 4) + 4);
  for (;;) {
    const batch = rng.take(nbytes);
    for (let j = 0; j < nbytes; j += 2) {
      const i = (batch[j] | (batch[j + 1] << 8)) & mask;
      if (i < population && marks[i] === old) {
        marks[i] = now;
        if (!--todo) return marks;
      }
    }
  }
}
