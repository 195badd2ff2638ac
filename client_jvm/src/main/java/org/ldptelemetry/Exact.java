package org.ldptelemetry;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Exact arithmetic the mechanisms need (docs/protocol.md §3): floats as exact rationals,
 * rationals rounded to floats, e^x and e^x − 1 correctly rounded, and Python's repr of a
 * float (the text a numeric payload carries).
 */
final class Exact {
  private Exact() {}

  static final BigInteger ZERO = BigInteger.ZERO;
  static final BigInteger ONE_B = BigInteger.ONE;
  static final Frac ONE = new Frac(BigInteger.ONE, BigInteger.ONE);

  /** A rational n/d in lowest terms, d > 0. */
  static final class Frac {
    final BigInteger n;
    final BigInteger d;

    private Frac(BigInteger n, BigInteger d) {
      this.n = n;
      this.d = d;
    }

    static Frac of(BigInteger n, BigInteger d) {
      if (d.signum() == 0) throw new ArithmeticException("division by zero");
      if (d.signum() < 0) {
        n = n.negate();
        d = d.negate();
      }
      BigInteger g = n.gcd(d);
      if (g.signum() == 0 || g.equals(BigInteger.ONE)) return new Frac(n, d);
      return new Frac(n.divide(g), d.divide(g));
    }

    static Frac of(long n, long d) {
      return of(BigInteger.valueOf(n), BigInteger.valueOf(d));
    }

    Frac add(Frac o) {
      return of(n.multiply(o.d).add(o.n.multiply(d)), d.multiply(o.d));
    }

    Frac sub(Frac o) {
      return of(n.multiply(o.d).subtract(o.n.multiply(d)), d.multiply(o.d));
    }

    Frac mul(Frac o) {
      return of(n.multiply(o.n), d.multiply(o.d));
    }

    Frac div(Frac o) {
      return of(n.multiply(o.d), d.multiply(o.n));
    }

    boolean gt(Frac o) {
      return n.multiply(o.d).compareTo(o.n.multiply(d)) > 0;
    }

    double toDouble() {
      return Exact.toDouble(n, d);
    }

    @Override
    public String toString() {
      return n + "/" + d;
    }
  }

  /** num and t of a finite float x = num / 2^t (num odd unless x is 0; t < 0 for large x). */
  static long dyadicNum(double x) {
    if (x == 0) return 0;
    long bits = Double.doubleToRawLongBits(x);
    long m = bits & 0xfffffffffffffL;
    int e = (int) ((bits >>> 52) & 0x7ff);
    if (e != 0) m |= 1L << 52;
    m >>>= Long.numberOfTrailingZeros(m);
    return bits < 0 ? -m : m;
  }

  /** The t of {@link #dyadicNum}. */
  static int dyadicExp(double x) {
    if (x == 0) return 0;
    long bits = Double.doubleToRawLongBits(x);
    long m = bits & 0xfffffffffffffL;
    int e = (int) ((bits >>> 52) & 0x7ff);
    int t;
    if (e == 0) {
      t = 1074;
    } else {
      m |= 1L << 52;
      t = 1075 - e;
    }
    return t - Long.numberOfTrailingZeros(m);
  }

  /** The float x as an exact rational. */
  static Frac frac(double x) {
    if (Double.isNaN(x) || Double.isInfinite(x)) throw new ArithmeticException("not finite");
    long num = dyadicNum(x);
    int t = dyadicExp(x);
    BigInteger n = BigInteger.valueOf(num);
    return t >= 0 ? new Frac(n, BigInteger.ONE.shiftLeft(t)) : new Frac(n.shiftLeft(-t), BigInteger.ONE);
  }

  /** n/d rounded to the nearest float, ties to even (Python's float(Fraction)); normal results. */
  static double toDouble(BigInteger n, BigInteger d) {
    if (n.signum() == 0) return 0.0;
    if (d.signum() < 0) {
      n = n.negate();
      d = d.negate();
    }
    boolean negative = n.signum() < 0;
    n = n.abs();
    int s = 53 - (n.bitLength() - d.bitLength());
    BigInteger q;
    BigInteger r;
    BigInteger den;
    while (true) {
      BigInteger num = s >= 0 ? n.shiftLeft(s) : n;
      den = s >= 0 ? d : d.shiftLeft(-s);
      BigInteger[] qr = num.divideAndRemainder(den);
      q = qr[0];
      r = qr[1];
      int bits = q.bitLength();
      if (bits > 53) {
        s -= 1;
        continue;
      }
      if (bits == 53) break;
      s += 1;
    }
    int cmp = r.shiftLeft(1).compareTo(den);
    long mant = q.longValue();
    if (cmp > 0 || (cmp == 0 && (mant & 1) == 1)) mant += 1;
    if (mant == 1L << 53) {
      mant >>= 1;
      s -= 1;
    }
    double out = scale((double) mant, -s);
    return negative ? -out : out;
  }

  /** x · 2^e, exact for results in the normal range (the two steps keep each exact). */
  private static double scale(double x, int e) {
    while (e > 1000) {
      x *= 0x1p1000;
      e -= 1000;
    }
    while (e < -1000) {
      x *= 0x1p-1000;
      e += 1000;
    }
    return x * Double.longBitsToDouble((long) (e + 1023) << 52);
  }

  /** The next float below a positive x (nextafter(x, 0)). */
  static double nextDown(double x) {
    return Double.longBitsToDouble(Double.doubleToRawLongBits(x) - 1);
  }

  /** Python's round() of a float to an int: half to even. */
  static long pyRound(double x) {
    double f = Math.floor(x);
    double diff = x - f;
    if (diff > 0.5) return (long) f + 1;
    if (diff < 0.5) return (long) f;
    return ((long) f) % 2 == 0 ? (long) f : (long) f + 1;
  }

  // -- e^x and e^x − 1, correctly rounded ------------------------------------------------

  private static final int FIRST_PREC = 320;
  private static final ConcurrentHashMap<Integer, BigInteger> LN2 = new ConcurrentHashMap<>();
  private static final ConcurrentHashMap<Double, Double> EXP = new ConcurrentHashMap<>();
  private static final ConcurrentHashMap<Double, Double> EXPM1 = new ConcurrentHashMap<>();

  /** ln 2 · 2^P, truncated: Σ_{k≥1} ⌊2^P/(k·2^k)⌋, within P + 8 units of the truth. */
  private static BigInteger ln2(int p) {
    BigInteger out = LN2.get(p);
    if (out == null) {
      BigInteger scale = BigInteger.ONE.shiftLeft(p);
      out = BigInteger.ZERO;
      for (int k = 1; k < p + 8; k++) out = out.add(scale.divide(BigInteger.valueOf(k).shiftLeft(k)));
      LN2.put(p, out);
    }
    return out;
  }

  /** e^x ≈ num/den within ± err/den at P bits: {num, den, err}. */
  private static BigInteger[] expFixed(double x, int p) {
    BigInteger scale = BigInteger.ONE.shiftLeft(p);
    Frac f = frac(x);
    BigInteger big = f.n.multiply(scale).divide(f.d); // x·2^P within 1 unit
    BigInteger l = ln2(p);
    BigInteger[] kr = big.divideAndRemainder(l);
    BigInteger k = kr[0];
    if (big.signum() < 0 && kr[1].signum() != 0) k = k.subtract(BigInteger.ONE);
    BigInteger r = big.subtract(k.multiply(l)); // 0 ≤ r < ln 2 (in units)
    BigInteger term = scale;
    BigInteger sum = scale;
    long terms = 0;
    for (long i = 1; term.signum() != 0; i++) {
      term = term.multiply(r).divide(scale.multiply(BigInteger.valueOf(i)));
      sum = sum.add(term);
      terms++;
    }
    long kAbs = k.abs().longValueExact();
    BigInteger err =
        BigInteger.valueOf(4)
            .multiply(BigInteger.ONE.add(BigInteger.valueOf(kAbs).multiply(BigInteger.valueOf(p + 8L))))
            .add(BigInteger.valueOf(3 * (terms + 2)));
    int ki = k.intValueExact();
    if (ki >= 0) return new BigInteger[] {sum.shiftLeft(ki), scale, err.shiftLeft(ki)};
    return new BigInteger[] {sum, scale.shiftLeft(-ki), err};
  }

  /** e^x (− 1 if minusOne) correctly rounded, uncached; firstPrec only for tests. */
  static double roundedExp(double x, boolean minusOne, int firstPrec) {
    if (Double.isNaN(x) || Double.isInfinite(x) || Math.abs(x) > 709) {
      throw new IllegalArgumentException("x must be finite and in [-709, 709], got " + x);
    }
    if (x == 0) return minusOne ? x : 1.0;
    for (int p = firstPrec; ; p *= 2) {
      BigInteger[] e = expFixed(x, p);
      BigInteger centre = minusOne ? e[0].subtract(e[1]) : e[0];
      double low = toDouble(centre.subtract(e[2]), e[1]);
      if (low == toDouble(centre.add(e[2]), e[1])) return low;
    }
  }

  private static double cached(ConcurrentHashMap<Double, Double> cache, double x, boolean minusOne) {
    Double hit = cache.get(x);
    if (hit != null) return hit;
    double out = roundedExp(x, minusOne, FIRST_PREC);
    if (cache.size() > 256) cache.clear();
    cache.put(x, out);
    return out;
  }

  /** e^x rounded to the nearest float, |x| ≤ 709. */
  static double exp(double x) {
    return cached(EXP, x, false);
  }

  /** e^x − 1 rounded to the nearest float, |x| ≤ 709. */
  static double expm1(double x) {
    return cached(EXPM1, x, true);
  }

  // -- Python's repr of a float ----------------------------------------------------------

  /**
   * A float as Python's repr writes it: the shortest digits that read back as x (the
   * nearest such when several), exponent form below 1e-4 and from 1e16 on, always a '.' or
   * an 'e'. Appended to {@code out}.
   */
  static void pyRepr(double x, StringBuilder out) {
    if (Double.isNaN(x) || Double.isInfinite(x)) throw new IllegalArgumentException("not finite");
    if (x == 0) {
      out.append((Double.doubleToRawLongBits(x) < 0) ? "-0.0" : "0.0");
      return;
    }
    if (x < 0) {
      out.append('-');
      x = -x;
    }
    // The shortest digits that read back, the nearest such (Python's repr): at most the
    // length of the JDK's own round-tripping Double.toString, so search down from there
    // (JDK 17's is not always the shortest; 2 or 3 checks where 17 would do).
    BigDecimal exact = new BigDecimal(x);
    // x's rounding interval: halfway to each neighbour; its ends read back as x when x's
    // mantissa is even (ties to even). Comparing with it is exact, and cheaper than parsing.
    long bits = Double.doubleToRawLongBits(x);
    BigDecimal half = BigDecimal.valueOf(5, 1);
    BigDecimal low = exact.add(new BigDecimal(Double.longBitsToDouble(bits - 1))).multiply(half);
    double up = Double.longBitsToDouble(bits + 1);
    BigDecimal high = Double.isInfinite(up) ? exact.add(exact.subtract(low)) : exact.add(new BigDecimal(up)).multiply(half);
    boolean even = (bits & 1) == 0;
    int jdk = significantDigits(Double.toString(x));
    BigDecimal shortest = null;
    for (int p = Math.min(17, jdk); p >= 1; p--) {
      BigDecimal found = readsBackAt(exact, p, low, high, even);
      if (found == null) break;
      shortest = found;
    }
    if (shortest == null) { // the JDK's digits were not the nearest of their length
      for (int p = Math.min(17, jdk); p <= 17 && shortest == null; p++) shortest = readsBackAt(exact, p, low, high, even);
    }
    if (shortest == null) throw new AssertionError("17 digits always read back");
    BigDecimal stripped = shortest.stripTrailingZeros();
    String digits = stripped.unscaledValue().toString();
    int decpt = digits.length() - stripped.scale(); // x = 0.digits × 10^decpt
    if (decpt <= -4 || decpt > 16) {
      out.append(digits.charAt(0));
      if (digits.length() > 1) out.append('.').append(digits, 1, digits.length());
      int e = decpt - 1;
      out.append('e').append(e < 0 ? '-' : '+');
      if (Math.abs(e) < 10) out.append('0');
      out.append(Math.abs(e));
    } else if (decpt <= 0) {
      out.append("0.");
      for (int i = 0; i < -decpt; i++) out.append('0');
      out.append(digits);
    } else if (decpt >= digits.length()) {
      out.append(digits);
      for (int i = digits.length(); i < decpt; i++) out.append('0');
      out.append(".0");
    } else {
      out.append(digits, 0, decpt).append('.').append(digits, decpt, digits.length());
    }
  }

  static String pyRepr(double x) {
    StringBuilder out = new StringBuilder(24);
    pyRepr(x, out);
    return out.toString();
  }

  /** The nearest p-digit decimal to {@code exact} that reads back as x (or the other neighbour), or null. */
  private static BigDecimal readsBackAt(BigDecimal exact, int p, BigDecimal low, BigDecimal high, boolean even) {
    BigDecimal near = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
    if (inside(near, low, high, even)) return near;
    // At a power of two the interval below x is half the one above: the other neighbour may.
    BigDecimal down = exact.round(new MathContext(p, RoundingMode.DOWN));
    BigDecimal other = down.compareTo(near) == 0 ? exact.round(new MathContext(p, RoundingMode.UP)) : down;
    return inside(other, low, high, even) ? other : null;
  }

  private static boolean inside(BigDecimal d, BigDecimal low, BigDecimal high, boolean even) {
    int a = d.compareTo(low);
    int b = d.compareTo(high);
    return (a > 0 || (a == 0 && even)) && (b < 0 || (b == 0 && even));
  }

  /** Significant digits of a Double.toString text (its exponent and zeros aside). */
  private static int significantDigits(String text) {
    int n = 0;
    int trailingZeros = 0;
    boolean started = false;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == 'E') break;
      if (c < '0' || c > '9') continue;
      if (c == '0' && !started) continue;
      started = true;
      n++;
      trailingZeros = c == '0' ? trailingZeros + 1 : 0;
    }
    return Math.max(1, n - trailingZeros);
  }

}
