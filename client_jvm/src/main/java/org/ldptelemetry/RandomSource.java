package org.ldptelemetry;

/**
 * Where a mechanism's random bytes come from: the CSPRNG in production ({@link
 * #secure()}), a fixed stream in tests (the conformance vectors). Every draw of every
 * mechanism is built on these bytes exactly as docs/protocol.md §2 says.
 */
public interface RandomSource {
  /** Fill {@code out[off .. off + len)} with the next bytes of the stream. */
  void nextBytes(byte[] out, int off, int len);

  /**
   * The platform's CSPRNG, read in blocks of 4 KiB: on a JVM its NIST SP 800-90A DRBG
   * (Hash_DRBG over SHA-256, seeded by the OS), which allocates nothing per block and is
   * several times faster than the default NativePRNG mix; elsewhere (Android) the default
   * {@code java.security.SecureRandom}.
   */
  static RandomSource secure() {
    return new SecureSource();
  }

  /** The given bytes, in order; throws when they run out (tests). */
  static Fixed fixed(byte[] bytes) {
    return new Fixed(bytes);
  }

  /** A fixed stream of bytes that says how many were used. */
  final class Fixed implements RandomSource {
    private final byte[] data;
    private int pos;

    Fixed(byte[] data) {
      this.data = data.clone();
    }

    @Override
    public void nextBytes(byte[] out, int off, int len) {
      if (pos + len > data.length) {
        throw new IllegalStateException("random bytes ran out: " + pos + "+" + len + " > " + data.length);
      }
      System.arraycopy(data, pos, out, off, len);
      pos += len;
    }

    /** Bytes consumed so far. */
    public int used() {
      return pos;
    }
  }
}

/** SecureRandom, buffered: one call per 4 KiB instead of one per draw. */
final class SecureSource implements RandomSource {
  private final java.security.SecureRandom random = platform();

  private static java.security.SecureRandom platform() {
    try {
      return java.security.SecureRandom.getInstance("DRBG");
    } catch (java.security.NoSuchAlgorithmException e) {
      return new java.security.SecureRandom();
    }
  }
  private final byte[] buffer = new byte[4096];
  private int pos = buffer.length;

  @Override
  public synchronized void nextBytes(byte[] out, int off, int len) {
    while (len > 0) {
      if (pos == buffer.length) {
        random.nextBytes(buffer);
        pos = 0;
      }
      int n = Math.min(len, buffer.length - pos);
      System.arraycopy(buffer, pos, out, off, n);
      java.util.Arrays.fill(buffer, pos, pos + n, (byte) 0); // used bytes do not linger
      pos += n;
      off += n;
      len -= n;
    }
  }
}
