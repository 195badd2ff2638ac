package org.ldptelemetry;

import java.math.BigInteger;

/**
 * The draws of docs/protocol.md §2 on a byte stream: getrandbits, randrange, exact
 * Bernoulli trials, Bernoulli lanes, uniform indices and subsets. {@code minusOne} selects
 * the permanent response's randrange (bitlen(n − 1) bits a try, §5) instead of the
 * CSPRNG's (bitlen(n)). Not thread-safe: one per caller, its scratch buffers reused.
 */
final class Rng {
  final RandomSource source;
  private final boolean minusOne;
  private final byte[] eight = new byte[8];
  private byte[] scratch = new byte[256];
  private byte[] marks = new byte[64];

  Rng(RandomSource source, boolean minusOne) {
    this.source = source;
    this.minusOne = minusOne;
  }

  Rng(RandomSource source) {
    this(source, false);
  }

  /** The next n bytes, into out[off ..). */
  void take(byte[] out, int off, int n) {
    source.nextBytes(out, off, n);
  }

  /** k ≤ 64 random bits as a long (unsigned for k = 64). */
  long bits(int k) {
    if (k <= 0) return 0;
    int n = (k + 7) >>> 3;
    source.nextBytes(eight, 0, n);
    long v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | (eight[i] & 0xff);
    return v >>> (8 * n - k);
  }

  /** k random bits as a BigInteger. */
  BigInteger bigBits(int k) {
    if (k <= 0) return BigInteger.ZERO;
    if (k <= 62) return BigInteger.valueOf(bits(k));
    int n = (k + 7) >>> 3;
    byte[] raw = new byte[n];
    source.nextBytes(raw, 0, n);
    return new BigInteger(1, raw).shiftRight(8 * n - k);
  }

  static int bitlen(long n) {
    return 64 - Long.numberOfLeadingZeros(n);
  }

  /** A uniform long in [0, n), n ≥ 1. */
  long randrange(long n) {
    if (n <= 0) throw new IllegalArgumentException("empty range");
    int b = bitlen(minusOne ? n - 1 : n);
    long r = bits(b);
    while (r >= n) r = bits(b);
    return r;
  }

  /** A uniform BigInteger in [0, n), n ≥ 1. */
  BigInteger bigRandrange(BigInteger n) {
    if (n.bitLength() <= 62) return BigInteger.valueOf(randrange(n.longValue()));
    int b = minusOne ? n.subtract(BigInteger.ONE).bitLength() : n.bitLength();
    BigInteger r = bigBits(b);
    while (r.compareTo(n) >= 0) r = bigBits(b);
    return r;
  }

  private static boolean unsignedLess(long a, long b) {
    return (a ^ Long.MIN_VALUE) < (b ^ Long.MIN_VALUE);
  }

  /** Exact Bernoulli(num / 2^t), 0 < num < 2^t: U's binary expansion against p's. */
  boolean bernoulli(long num, int t) {
    if (t <= 64) return unsignedLess(bits(t), num);
    for (int pos = 0; pos < t; ) {
      int w = Math.min(64, t - pos);
      long u = bits(w);
      int shift = t - pos - w;
      long chunk = shift >= 64 ? 0 : num >>> shift;
      if (w < 64) chunk &= (1L << w) - 1;
      if (u != chunk) return unsignedLess(u, chunk);
      pos += w;
    }
    return false;
  }

  boolean bernoulli(Prob p) {
    return bernoulli(p.num, p.t);
  }

  /** A probability in (0, 1) with its dyadic form num / 2^t, computed once. */
  static final class Prob {
    final double value;
    final long num;
    final int t;

    Prob(double value) {
      if (!(value > 0 && value < 1)) throw new IllegalArgumentException("a probability in (0, 1), got " + value);
      this.value = value;
      this.num = Exact.dyadicNum(value);
      this.t = Exact.dyadicExp(value);
    }
  }

  /**
   * {@code lanes} independent Bernoulli(p) marks: marks[c] (0/1) is bit lanes − 1 − c of the
   * protocol's integer, i.e. the bit of value c in a unary report. The array is this Rng's
   * scratch space, valid until the next call.
   */
  byte[] laneMarks(Prob p, int lanes) {
    if (marks.length < lanes) marks = new byte[Math.max(lanes, 2 * marks.length)];
    byte[] out = marks;
    if (lanes > 64) {
      byteLanes(p.num, p.t, lanes, out, 0);
      return out;
    }
    long ones = planeLanes(p.num, p.t, lanes);
    for (int c = 0; c < lanes; c++) out[c] = (byte) ((ones >>> (lanes - 1 - c)) & 1);
    return out;
  }

  private long planeLanes(long num, int t, int lanes) {
    long full = lanes == 64 ? -1L : (1L << lanes) - 1;
    long undecided = full;
    long ones = 0;
    for (int j = 0; j < t; j++) {
      int remaining = t - j;
      if (undecided == 0) break;
      if (remaining < 64 && (num & ((1L << remaining) - 1)) == 0) break;
      long plane = bits(lanes);
      boolean bit = remaining - 1 < 64 && ((num >>> (remaining - 1)) & 1) == 1;
      if (bit) {
        ones |= undecided & ~plane & full;
        undecided &= plane;
      } else {
        undecided &= ~plane & full;
      }
    }
    return ones;
  }

  private static final byte TIE = 2;

  /** lanes marks, each 1 with probability num / 2^t, into out[at ..). */
  private void byteLanes(long num, int t, int lanes, byte[] out, int at) {
    if (num == 0 || lanes == 0) {
      java.util.Arrays.fill(out, at, at + lanes, (byte) 0);
      return;
    }
    int size = lanes + 2 + lanes / 128;
    // The scratch buffer: a nested draw (below) overwrites it only after its caller is done
    // reading it.
    if (scratch.length < size) scratch = new byte[Math.max(size, 2 * scratch.length)];
    byte[] raw = scratch;
    source.nextBytes(raw, 0, size);
    compareDigits(num, t, raw, 0, size, lanes, out, at);
  }

  private void compareDigits(long num, int t, byte[] raw, int from, int to, int lanes, byte[] out, int at) {
    int digit;
    long rest;
    int restBits;
    if (t <= 8) {
      restBits = 0;
      digit = (int) (num << (8 - t));
      rest = 0;
    } else {
      restBits = t - 8;
      digit = restBits >= 64 ? 0 : (int) (num >>> restBits);
      rest = restBits >= 64 ? num : num & ((1L << restBits) - 1);
    }
    int undecided = 0;
    for (int i = 0; i < lanes; i++) {
      int b = raw[from + i] & 0xff;
      byte m = 0;
      if (b < digit) {
        m = 1;
      } else if (b == digit && rest != 0) {
        m = TIE;
        undecided++;
      }
      out[at + i] = m;
    }
    if (undecided == 0) return;
    byte[] fill = new byte[undecided];
    int spare = to - from - lanes;
    if (spare >= undecided) {
      compareDigits(rest, restBits, raw, from + lanes, to, undecided, fill, 0);
    } else {
      byteLanes(rest, restBits, undecided, fill, 0);
    }
    int k = 0;
    for (int i = 0; i < lanes; i++) if (out[at + i] == TIE) out[at + i] = fill[k++];
  }

  /**
   * Uniform ints in [0, n), n ≤ 2^16, drawn in blocks of 16-bit words (the uniform_indices
   * of §2): {@link #next()} returns the next one.
   */
  final class Indices {
    private final int n;
    private final int mask;
    private final byte[] block;
    private int pos;

    Indices(int n, int batch) {
      this.n = n;
      this.mask = (1 << bitlen(n - 1)) - 1;
      int size = 2 * ((int) (((long) batch * (mask + 1)) / n) + 4);
      this.block = new byte[size];
      this.pos = size;
    }

    int next() {
      while (true) {
        if (pos == block.length) {
          source.nextBytes(block, 0, block.length);
          pos = 0;
        }
        int w = ((block[pos] & 0xff) | ((block[pos + 1] & 0xff) << 8)) & mask;
        pos += 2;
        if (w < n) return w;
      }
    }
  }

  /** A uniform size-subset of [0, population) as 0/1 marks (subset_marks of §2). */
  byte[] subsetMarks(int population, int size) {
    byte[] out = new byte[population];
    if (size == 0) return out;
    if (size == population) {
      java.util.Arrays.fill(out, (byte) 1);
      return out;
    }
    int t = (int) ((256L * size + population / 2) / population);
    if (scratch.length < population) scratch = new byte[Math.max(population, 2 * scratch.length)];
    source.nextBytes(scratch, 0, population);
    int have = 0;
    for (int i = 0; i < population; i++) {
      if ((scratch[i] & 0xff) < t) {
        out[i] = 1;
        have++;
      }
    }
    if (have == size) return out;
    byte old = (byte) (have > size ? 1 : 0);
    byte now = (byte) (have > size ? 0 : 1);
    int todo = have > size ? have - size : size - have;
    int candidates = old == 1 ? have : population - have;
    int mask = (1 << bitlen(population - 1)) - 1;
    int nbytes = 2 * ((int) ((((long) todo * (mask + 1)) / candidates) * 5 / 4) + 4);
    byte[] batch = new byte[nbytes];
    while (true) {
      source.nextBytes(batch, 0, nbytes);
      for (int j = 0; j < nbytes; j += 2) {
        int i = ((batch[j] & 0xff) | ((batch[j + 1] & 0xff) << 8)) & mask;
        if (i < population && out[i] == old) {
          out[i] = now;
          if (--todo == 0) return out;
        }
      }
    }
  }
}
