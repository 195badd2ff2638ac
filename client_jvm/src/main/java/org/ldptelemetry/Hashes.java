package org.ldptelemetry;

/**
 * The two hashes the protocol needs that the JDK (and Android) lack: SHAKE-256 (FIPS 202),
 * the permanent response's stream (docs/protocol.md §5), and keyed BLAKE2b (RFC 7693), the
 * string sketch's hash coefficients (§6).
 */
final class Hashes {
  private Hashes() {}

  private static final long[] RC = {
    0x0000000000000001L, 0x0000000000008082L, 0x800000000000808aL, 0x8000000080008000L,
    0x000000000000808bL, 0x0000000080000001L, 0x8000000080008081L, 0x8000000000008009L,
    0x000000000000008aL, 0x0000000000000088L, 0x0000000080008009L, 0x000000008000000aL,
    0x000000008000808bL, 0x800000000000008bL, 0x8000000000008089L, 0x8000000000008003L,
    0x8000000000008002L, 0x8000000000000080L, 0x000000000000800aL, 0x800000008000000aL,
    0x8000000080008081L, 0x8000000000008080L, 0x0000000080000001L, 0x8000000080008008L,
  };
  private static final int[] RHO = {
    0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14,
  };
  private static final int[] PI = new int[25];

  static {
    for (int x = 0; x < 5; x++) for (int y = 0; y < 5; y++) PI[x + 5 * y] = y + 5 * ((2 * x + 3 * y) % 5);
  }

  private static void keccak(long[] s) {
    long[] b = new long[25];
    long[] c = new long[5];
    for (int round = 0; round < 24; round++) {
      for (int x = 0; x < 5; x++) c[x] = s[x] ^ s[x + 5] ^ s[x + 10] ^ s[x + 15] ^ s[x + 20];
      for (int x = 0; x < 5; x++) {
        long d = c[(x + 4) % 5] ^ Long.rotateLeft(c[(x + 1) % 5], 1);
        for (int y = 0; y < 25; y += 5) s[x + y] ^= d;
      }
      for (int i = 0; i < 25; i++) b[PI[i]] = Long.rotateLeft(s[i], RHO[i]);
      for (int y = 0; y < 25; y += 5) {
        for (int x = 0; x < 5; x++) s[x + y] = b[x + y] ^ (~b[(x + 1) % 5 + y] & b[(x + 2) % 5 + y]);
      }
      s[0] ^= RC[round];
    }
  }

  /** SHAKE-256 of {@code input} as an endless stream of bytes. */
  static final class Shake256 implements RandomSource {
    private static final int RATE = 136;
    private final long[] state = new long[25];
    private final byte[] block = new byte[RATE];
    private int pos;

    Shake256(byte[] input) {
      byte[] pad = new byte[RATE];
      int off = 0;
      while (input.length - off >= RATE) {
        absorb(input, off);
        off += RATE;
      }
      int rest = input.length - off;
      System.arraycopy(input, off, pad, 0, rest);
      pad[rest] ^= 0x1f;
      pad[RATE - 1] ^= (byte) 0x80;
      absorb(pad, 0);
      squeeze();
    }

    private void absorb(byte[] data, int off) {
      for (int i = 0; i < RATE / 8; i++) {
        long lane = 0;
        for (int j = 7; j >= 0; j--) lane = (lane << 8) | (data[off + 8 * i + j] & 0xff);
        state[i] ^= lane;
      }
      keccak(state);
    }

    private void squeeze() {
      for (int i = 0; i < RATE / 8; i++) {
        long lane = state[i];
        for (int j = 0; j < 8; j++) block[8 * i + j] = (byte) (lane >>> (8 * j));
      }
      pos = 0;
    }

    @Override
    public void nextBytes(byte[] out, int off, int len) {
      while (len > 0) {
        if (pos == RATE) {
          keccak(state);
          squeeze();
        }
        int n = Math.min(len, RATE - pos);
        System.arraycopy(block, pos, out, off, n);
        pos += n;
        off += n;
        len -= n;
      }
    }
  }

  // -- BLAKE2b ----------------------------------------------------------------------------

  private static final long[] IV = {
    0x6a09e667f3bcc908L, 0xbb67ae8584caa73bL, 0x3c6ef372fe94f82bL, 0xa54ff53a5f1d36f1L,
    0x510e527fade682d1L, 0x9b05688c2b3e6c1fL, 0x1f83d9abfb41bd6bL, 0x5be0cd19137e2179L,
  };
  private static final byte[][] SIGMA = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
  };

  private static void compress(long[] h, byte[] block, long counter, boolean last) {
    long[] m = new long[16];
    for (int i = 0; i < 16; i++) {
      long w = 0;
      for (int j = 7; j >= 0; j--) w = (w << 8) | (block[8 * i + j] & 0xff);
      m[i] = w;
    }
    long[] v = new long[16];
    System.arraycopy(h, 0, v, 0, 8);
    System.arraycopy(IV, 0, v, 8, 8);
    v[12] ^= counter;
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
      byte[] s = SIGMA[r % 10];
      mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
      mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
      mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
      mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
      mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
      mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
      mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
      mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
  }

  private static void mix(long[] v, int a, int b, int c, int d, long x, long y) {
    v[a] = v[a] + v[b] + x;
    v[d] = Long.rotateRight(v[d] ^ v[a], 32);
    v[c] = v[c] + v[d];
    v[b] = Long.rotateRight(v[b] ^ v[c], 24);
    v[a] = v[a] + v[b] + y;
    v[d] = Long.rotateRight(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];
    v[b] = Long.rotateRight(v[b] ^ v[c], 63);
  }

  /** BLAKE2b of {@code data} keyed with {@code key} (≤ 64 bytes; empty: unkeyed), digest 1..64 bytes. */
  static byte[] blake2b(byte[] data, byte[] key, int digest) {
    if (digest < 1 || digest > 64 || key.length > 64) throw new IllegalArgumentException("BLAKE2b sizes");
    long[] h = IV.clone();
    h[0] ^= 0x01010000L ^ ((long) key.length << 8) ^ digest;
    byte[] block = new byte[128];
    long counter = 0;
    byte[] input = data;
    if (key.length > 0) {
      input = new byte[128 + data.length];
      System.arraycopy(key, 0, input, 0, key.length);
      System.arraycopy(data, 0, input, 128, data.length);
    }
    int off = 0;
    while (input.length - off > 128) {
      System.arraycopy(input, off, block, 0, 128);
      counter += 128;
      compress(h, block, counter, false);
      off += 128;
    }
    java.util.Arrays.fill(block, (byte) 0);
    System.arraycopy(input, off, block, 0, input.length - off);
    counter += input.length - off;
    compress(h, block, counter, true);
    byte[] out = new byte[digest];
    for (int i = 0; i < digest; i++) out[i] = (byte) (h[i / 8] >>> (8 * (i % 8)));
    return out;
  }
}
