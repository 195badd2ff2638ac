package org.ldptelemetry;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.ldptelemetry.Exact.Frac;
import org.ldptelemetry.Rng.Prob;

/**
 * A mechanism built from a definition's {@code mechanism} parameters, sampled exactly as
 * docs/protocol.md §3–§4 say. A payload is written as JSON text, its fields in the
 * protocol's order, straight into the report being built.
 */
abstract class Mechanism {
  final String name;
  final double epsilon;

  Mechanism(String name, double epsilon) {
    this.name = name;
    this.epsilon = epsilon;
  }

  /** The payload of a categorical value's report: {@code {"v": …}} and the like. */
  void perturb(int value, Rng rng, StringBuilder out) {
    out.append('{');
    fields(value, rng, out);
    out.append('}');
  }

  /** The payload's fields without braces (a joint group's oracle writes them after "g"). */
  void fields(int value, Rng rng, StringBuilder out) {
    throw new UnsupportedOperationException(name + " does not take a categorical value");
  }

  /** The size of the domain a categorical value indexes (0: not categorical). */
  int domainSize() {
    return 0;
  }

  // -- the numbers every probability is built on (§3) -------------------------------------

  static final double SAFETY = 1.0 - 1e-12;

  /** e^ε shaded down by 10⁻¹². */
  static double expEpsilon(double eps) {
    return Exact.exp(eps) * SAFETY;
  }

  /** B(ε): a rational certainly ≤ e^ε. */
  static Frac expLowerBound(double eps) {
    return Exact.frac(Exact.nextDown(Exact.nextDown(Exact.exp(eps))));
  }

  interface Ratio {
    Frac of(Frac p);
  }

  /** Lower {@code prob} ulp by ulp until ratio(prob) ≤ B(ε) exactly. */
  static double shadeDown(double prob, Ratio ratio, double eps) {
    Frac bound = expLowerBound(eps);
    while (ratio.of(Exact.frac(prob)).gt(bound)) prob = Exact.nextDown(prob);
    return prob;
  }

  /** GRR's keep probability over {@code size} values, e/(e + size − 1), shaded down to ε. */
  static double grrKeep(double e, int size, double eps) {
    return shadeDown(e / (e + size - 1), f -> f.mul(fr(size - 1)).div(Exact.ONE.sub(f)), eps);
  }

  static Frac fr(long n) {
    return Frac.of(n, 1);
  }

  // -- building ----------------------------------------------------------------------------

  /**
   * The mechanism of a definition's parameters.
   *
   * @throws IllegalArgumentException unknown or invalid parameters
   */
  static Mechanism build(Map<String, Object> params) {
    String name = Params.string(params, "mechanism");
    double eps = Params.positive(params, "epsilon");
    switch (name) {
      case "rr":
        {
          Object keep = params.get("keep_probability");
          return new Grr("rr", eps, 2, keep == null ? 0 : Params.probability(params, "keep_probability"));
        }
      case "grr":
        return new Grr("grr", eps, Params.domain(params), 0);
      case "sue":
        return Unary.sue(eps, Params.domain(params));
      case "oue":
        return Unary.oue(eps, Params.domain(params));
      case "olh":
        return new Olh("olh", eps, Params.domain(params), params.get("g") == null ? 0 : Params.integer(params, "g", 2, 1 << 20));
      case "blh":
        return new Olh("blh", eps, Params.domain(params), 2);
      case "hr":
        return new Hr(eps, Params.domain(params));
      case "ss":
        return new Ss(eps, Params.domain(params), params.get("s") == null ? 0 : Params.integer(params, "s", 1, 1 << 20));
      case "pram":
        return new Pram(eps, Params.domain(params), Params.list(params, "matrix"));
      case "memo-grr":
      case "memo-sue":
      case "memo-oue":
        return new Memo(name, eps, Params.domain(params), Params.positive(params, "permanent_epsilon"));
      case "duchi":
      case "pm":
      case "hybrid":
        return new Numeric(name, eps);
      case "string-sketch":
        return new Sketch(eps, params);
      case "joint":
        return new Joint(eps, params);
      case "hh":
        return new Histogram(eps, params);
      case "haar":
        return new Haar(eps, params);
      default:
        throw new IllegalArgumentException("unknown mechanism " + name);
    }
  }

  // -- frequency oracles -------------------------------------------------------------------

  /** GRR (and rr, k = 2): keep v, else another value uniformly. */
  static final class Grr extends Mechanism {
    final int k;
    final Prob keep;
    final double q;

    Grr(String name, double eps, int k, double keepProbability) {
      super(name, eps);
      this.k = k;
      double e = expEpsilon(eps);
      double kept = keepProbability > 0 ? keepProbability : grrKeep(e, k, eps);
      this.keep = new Prob(kept);
      this.q = Exact.ONE.sub(Exact.frac(kept)).div(fr(k - 1)).toDouble();
    }

    @Override
    int domainSize() {
      return k;
    }

    static int step(Rng rng, Prob keep, int k, int v) {
      if (rng.bernoulli(keep)) return v;
      int other = (int) rng.randrange(k - 1);
      return other + (other >= v ? 1 : 0);
    }

    @Override
    void fields(int v, Rng rng, StringBuilder out) {
      out.append("\"v\":").append(step(rng, keep, k, v));
    }
  }

  private static final char[] B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".toCharArray();

  /** Standard base64 with padding. */
  static void base64(byte[] b, int n, StringBuilder out) {
    int i = 0;
    for (; i + 2 < n; i += 3) {
      int w = ((b[i] & 0xff) << 16) | ((b[i + 1] & 0xff) << 8) | (b[i + 2] & 0xff);
      out.append(B64[w >>> 18]).append(B64[(w >>> 12) & 63]).append(B64[(w >>> 6) & 63]).append(B64[w & 63]);
    }
    if (i + 1 == n) {
      int w = (b[i] & 0xff) << 16;
      out.append(B64[w >>> 18]).append(B64[(w >>> 12) & 63]).append("==");
    } else if (i + 2 == n) {
      int w = ((b[i] & 0xff) << 16) | ((b[i + 1] & 0xff) << 8);
      out.append(B64[w >>> 18]).append(B64[(w >>> 12) & 63]).append(B64[(w >>> 6) & 63]).append('=');
    }
  }

  /** Marks by value packed big-endian: value v is bit 7 − v mod 8 of byte ⌊v/8⌋. */
  static void pack(byte[] marks, int k, byte[] out) {
    java.util.Arrays.fill(out, (byte) 0);
    for (int v = 0; v < k; v++) if (marks[v] != 0) out[v >>> 3] |= (byte) (0x80 >>> (v & 7));
  }

  /** SUE and OUE: k bits, each flipped on with q, the value's own kept with p. */
  static final class Unary extends Mechanism {
    final int k;
    final int nbytes;
    final Prob p;
    final Prob q;

    private Unary(String name, double eps, int k, double p, double q) {
      super(name, eps);
      this.k = k;
      this.nbytes = (k + 7) >>> 3;
      this.p = new Prob(p);
      this.q = new Prob(q);
    }

    static Unary sue(double eps, int k) {
      double e = expEpsilon(eps / 2);
      double q = 1 / (e + 1);
      Frac qf = Exact.frac(q);
      double p = shadeDown(e / (e + 1), f -> f.mul(Exact.ONE.sub(qf)).div(qf.mul(Exact.ONE.sub(f))), eps);
      return new Unary("sue", eps, k, p, q);
    }

    static Unary oue(double eps, int k) {
      double q0 = 1 / (expEpsilon(eps) + 1);
      double q = 1 - shadeDown(1 - q0, f -> f.div(Exact.ONE.sub(f)), eps);
      return new Unary("oue", eps, k, 0.5, q);
    }

    @Override
    int domainSize() {
      return k;
    }

    /** The report's bits as bytes (a fresh array). */
    byte[] sample(int v, Rng rng) {
      byte[] marks = rng.laneMarks(q, k);
      marks[v] = (byte) (rng.bernoulli(p) ? 1 : 0);
      byte[] bytes = new byte[nbytes];
      pack(marks, k, bytes);
      return bytes;
    }

    @Override
    void fields(int v, Rng rng, StringBuilder out) {
      out.append("\"b\":\"");
      base64(sample(v, rng), nbytes, out);
      out.append('"');
    }
  }

  static boolean isPrime(long n) {
    if (n < 2) return false;
    if (n % 2 == 0) return n == 2;
    for (long f = 3; f * f <= n; f += 2) if (n % f == 0) return false;
    return true;
  }

  /** Local hashing (OLH, BLH): a random universal hash, then GRR over its g values. */
  static final class Olh extends Mechanism {
    final int k;
    final int g;
    final long prime;
    final Prob keep;
    final double q;

    Olh(String name, double eps, int k, int g) {
      super(name, eps);
      this.k = k;
      double e = expEpsilon(eps);
      if (g == 0) g = (int) Math.min(Exact.pyRound(e) + 1, 1 << 20);
      this.g = g;
      long pr = Math.max(k, g);
      while (!isPrime(pr)) pr++;
      this.prime = pr;
      double kept = grrKeep(e, g, eps);
      this.keep = new Prob(kept);
      BigInteger bp = BigInteger.valueOf(pr);
      BigInteger bg = BigInteger.valueOf(g);
      BigInteger m = bp.divide(bg);
      BigInteger t = bp.mod(bg);
      BigInteger one = BigInteger.ONE;
      Frac collision =
          Frac.of(
              t.multiply(m.add(one)).multiply(m).add(bg.subtract(t).multiply(m).multiply(m.subtract(one))),
              bp.multiply(bp.subtract(one)));
      Frac kf = Exact.frac(kept);
      this.q = kf.mul(collision).add(Exact.ONE.sub(kf).mul(Exact.ONE.sub(collision)).div(fr(g - 1))).toDouble();
    }

    @Override
    int domainSize() {
      return k;
    }

    @Override
    void fields(int v, Rng rng, StringBuilder out) {
      long a = 1 + rng.randrange(prime - 1);
      long b = rng.randrange(prime);
      int x = (int) (((mulMod(a, v, prime) + b) % prime) % g);
      int y;
      if (rng.bernoulli(keep)) {
        y = x;
      } else {
        y = (int) rng.randrange(g - 1);
        y += y >= x ? 1 : 0;
      }
      out.append("\"a\":").append(a).append(",\"b\":").append(b).append(",\"y\":").append(y);
    }
  }

  /** a·v mod p for a, v < p < 2^31 (the product fits a long). */
  static long mulMod(long a, long v, long p) {
    return (a * v) % p;
  }

  /** Hadamard response: an index of the K × K Hadamard matrix. */
  static final class Hr extends Mechanism {
    final int k;
    final Prob p;
    final long order;

    Hr(double eps, int k) {
      super("hr", eps);
      this.k = k;
      double e = expEpsilon(eps);
      this.p = new Prob(shadeDown(e / (e + 1), f -> f.div(Exact.ONE.sub(f)), eps));
      this.order = 1L << Rng.bitlen(k);
    }

    @Override
    int domainSize() {
      return k;
    }

    @Override
    void fields(int v, Rng rng, StringBuilder out) {
      long row = v + 1;
      long j = rng.randrange(order);
      boolean inside = Long.bitCount(row & j) % 2 == 0;
      if (inside != rng.bernoulli(p)) j ^= row & -row;
      out.append("\"j\":").append(j);
    }
  }

  /** Subset selection: s values, the true one among them with probability keep. */
  static final class Ss extends Mechanism {
    final int k;
    final int s;
    final Prob keep;
    final boolean dense;
    final double q;

    Ss(double eps, int k, int s) {
      super("ss", eps);
      this.k = k;
      if (s == 0) s = (int) Math.max(1, Exact.pyRound(k / (Exact.exp(eps) + 1)));
      if (s >= k) throw new IllegalArgumentException("ss: s must be below the domain size");
      this.s = s;
      final int ss = s;
      double se = s * expEpsilon(eps);
      double kept = shadeDown(se / (se + k - s), f -> f.div(Exact.ONE.sub(f)).mul(Frac.of(k - ss, ss)), eps);
      this.keep = new Prob(kept);
      this.dense = s >= 0.1 * k;
      Frac kf = Exact.frac(kept);
      this.q = kf.mul(fr(s - 1)).add(Exact.ONE.sub(kf).mul(fr(s))).div(fr(k - 1)).toDouble();
    }

    @Override
    int domainSize() {
      return k;
    }

    @Override
    void fields(int v, Rng rng, StringBuilder out) {
      boolean include = rng.bernoulli(keep);
      int others = include ? s - 1 : s;
      out.append("\"v\":[");
      boolean first = true;
      if (dense) {
        byte[] marks = rng.subsetMarks(k - 1, others);
        for (int i = 0, u = 0; u < k; u++) {
          boolean on = u == v ? include : marks[i++] != 0;
          if (on) {
            if (!first) out.append(',');
            first = false;
            out.append(u);
          }
        }
      } else {
        java.util.TreeSet<Integer> picked = new java.util.TreeSet<>();
        picked.add(v);
        if (others > 0) {
          Rng.Indices draw = rng.new Indices(k, others + others / 8);
          while (picked.size() <= others) picked.add(draw.next());
        }
        if (!include) picked.remove(v);
        for (int u : picked) {
          if (!first) out.append(',');
          first = false;
          out.append(u);
        }
      }
      out.append(']');
    }
  }

  /** A number or string entry of a PRAM matrix as an exact rational (Fraction(repr(x))). */
  static Frac parseRational(Object x) {
    String text;
    if (x instanceof Double || x instanceof Float) {
      text = Exact.pyRepr(((Number) x).doubleValue());
    } else if (x instanceof Number) {
      text = x.toString();
    } else if (x instanceof String) {
      text = ((String) x).trim();
    } else {
      throw new IllegalArgumentException("pram: a matrix entry is a number or a string");
    }
    int slash = text.indexOf('/');
    if (slash >= 0) {
      return Frac.of(new BigInteger(text.substring(0, slash).trim()), new BigInteger(text.substring(slash + 1).trim()));
    }
    java.math.BigDecimal d = new java.math.BigDecimal(text);
    BigInteger unscaled = d.unscaledValue();
    int scale = d.scale();
    return scale >= 0 ? Frac.of(unscaled, BigInteger.TEN.pow(scale)) : Frac.of(unscaled.multiply(BigInteger.TEN.pow(-scale)), BigInteger.ONE);
  }

  /** PRAM: row v of a k × k transition matrix, sampled with exact integer thresholds. */
  static final class Pram extends Mechanism {
    final int k;
    final BigInteger[] denominators;
    final BigInteger[][] cumulative;

    Pram(double eps, int k, List<Object> matrix) {
      super("pram", eps);
      this.k = k;
      if (matrix.size() != k) throw new IllegalArgumentException("pram: the matrix must have k rows");
      denominators = new BigInteger[k];
      cumulative = new BigInteger[k][];
      for (int r = 0; r < k; r++) {
        Object rowObject = matrix.get(r);
        if (!(rowObject instanceof List) || ((List<?>) rowObject).size() != k) {
          throw new IllegalArgumentException("pram: each row has k entries");
        }
        List<?> row = (List<?>) rowObject;
        Frac[] entries = new Frac[k];
        Frac total = Frac.of(0, 1);
        for (int c = 0; c < k; c++) {
          entries[c] = parseRational(row.get(c));
          if (entries[c].n.signum() < 0) throw new IllegalArgumentException("pram: entries are ≥ 0");
          total = total.add(entries[c]);
        }
        if (total.n.signum() <= 0) throw new IllegalArgumentException("pram: a row sums to more than 0");
        BigInteger d = BigInteger.ONE;
        for (int c = 0; c < k; c++) {
          entries[c] = entries[c].div(total);
          d = d.divide(d.gcd(entries[c].d)).multiply(entries[c].d);
        }
        BigInteger run = BigInteger.ZERO;
        cumulative[r] = new BigInteger[k];
        for (int c = 0; c < k; c++) {
          run = run.add(entries[c].n.multiply(d.divide(entries[c].d)));
          cumulative[r][c] = run;
        }
        denominators[r] = d;
      }
    }

    @Override
    int domainSize() {
      return k;
    }

    @Override
    void fields(int v, Rng rng, StringBuilder out) {
      BigInteger r = rng.bigRandrange(denominators[v]);
      BigInteger[] c = cumulative[v];
      int y = 0;
      while (y < c.length && c[y].compareTo(r) <= 0) y++;
      out.append("\"v\":").append(y);
    }
  }

  // -- memoized: the permanent response from the device's stream --------------------------

  static final String PRR_LABEL = "ldp-telemetry/prr/v1";

  /** The HMAC input of one permanent response (§5). */
  static byte[] prrInfo(String metric, long version, int value) {
    if (metric.indexOf('\0') >= 0) throw new IllegalArgumentException("metric must not contain NUL");
    return (PRR_LABEL + '\0' + metric + '\0' + version + '\0' + value).getBytes(StandardCharsets.UTF_8);
  }

  private static final ThreadLocal<javax.crypto.Mac> HMAC =
      new ThreadLocal<javax.crypto.Mac>() {
        @Override
        protected javax.crypto.Mac initialValue() {
          try {
            return javax.crypto.Mac.getInstance("HmacSHA256");
          } catch (java.security.GeneralSecurityException e) {
            throw new IllegalStateException("HMAC-SHA256 is unavailable", e);
          }
        }
      };

  /** HMAC-SHA256(secret, info). */
  static byte[] prrSeed(byte[] secret, byte[] info) {
    if (secret.length < 16) throw new IllegalArgumentException("the device secret has at least 16 bytes");
    try {
      javax.crypto.Mac mac = HMAC.get(); // a provider lookup costs more than the MAC
      mac.init(new javax.crypto.spec.SecretKeySpec(secret, "HmacSHA256"));
      return mac.doFinal(info);
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException("HMAC-SHA256 is unavailable", e);
    }
  }

  /** memo-grr, memo-sue, memo-oue: a permanent response at ε∞, a fresh instantaneous one at ε. */
  static final class Memo extends Mechanism {
    final int k;
    final double permanentEpsilon;
    final Mechanism permanent;
    final double irrKeep;
    final Prob irrKeepProb;
    final Prob irrFlip;
    final Frac pStar;
    final Frac qStar;
    final int nbytes;
    private final boolean grr;

    Memo(String name, double eps, int k, double pe) {
      super(name, eps);
      this.k = k;
      this.permanentEpsilon = pe;
      this.nbytes = (k + 7) >>> 3;
      String base = name.substring(5);
      this.grr = base.equals("grr");
      this.permanent = grr ? new Grr("grr", pe, k, 0) : base.equals("sue") ? Unary.sue(pe, k) : Unary.oue(pe, k);
      final Frac p1;
      final Frac q1;
      double estimate;
      if (grr) {
        p1 = Exact.frac(((Grr) permanent).keep.value);
        q1 = Exact.ONE.sub(p1).div(fr(k - 1));
        double e = expEpsilon(eps);
        double p1f = p1.toDouble();
        double q1f = q1.toDouble();
        estimate = (e / (e + k - 1) - q1f) / (p1f - q1f);
      } else {
        Unary u = (Unary) permanent;
        p1 = Exact.frac(u.p.value);
        q1 = Exact.frac(u.q.value);
        double p1f = u.p.value;
        double q1f = u.q.value;
        if (base.equals("sue")) {
          double e = expEpsilon(eps / 2);
          estimate = (1 + (2 * (e / (e + 1)) - 1) / (2 * p1f - 1)) / 2;
        } else {
          double target = 1 / (expEpsilon(eps) + 1);
          estimate = (1 - q1f - target) / (1 - 2 * q1f);
        }
      }
      this.irrKeep = shadeDown(estimate, p2 -> ratio(compose(p1, q1, p2)), eps);
      this.irrKeepProb = new Prob(irrKeep);
      this.irrFlip = new Prob(Exact.ONE.sub(Exact.frac(irrKeep)).toDouble());
      Frac[] star = compose(p1, q1, Exact.frac(irrKeep));
      this.pStar = star[0];
      this.qStar = star[1];
    }

    private Frac[] compose(Frac p1, Frac q1, Frac p2) {
      if (grr) {
        Frac p = p1.mul(p2).add(Exact.ONE.sub(p1).mul(Exact.ONE.sub(p2)).div(fr(k - 1)));
        return new Frac[] {p, Exact.ONE.sub(p).div(fr(k - 1))};
      }
      return new Frac[] {
        p1.mul(p2).add(Exact.ONE.sub(p1).mul(Exact.ONE.sub(p2))),
        q1.mul(p2).add(Exact.ONE.sub(q1).mul(Exact.ONE.sub(p2))),
      };
    }

    private Frac ratio(Frac[] pq) {
      if (grr) return pq[0].div(pq[1]);
      return pq[0].mul(Exact.ONE.sub(pq[1])).div(pq[1].mul(Exact.ONE.sub(pq[0])));
    }

    @Override
    int domainSize() {
      return k;
    }

    /** The permanent response's stream for (secret, metric, version, v). */
    Rng stream(int v, byte[] secret, String metric, long version) {
      return new Rng(new Hashes.Shake256(prrSeed(secret, prrInfo(metric, version, v))), true);
    }

    /** The PRR of v: grr's value, or the unary bits. */
    int permanentValue(int v, Rng stream) {
      return Grr.step(stream, ((Grr) permanent).keep, k, v);
    }

    /** The PRR's payload (tests). */
    void permanentResponse(int v, byte[] secret, String metric, long version, StringBuilder out) {
      permanent.perturb(v, stream(v, secret, metric, version), out);
    }

    /** A report of v: the device's PRR with a fresh instantaneous response from rng. */
    void perturbMemoized(int v, byte[] secret, String metric, long version, Rng rng, StringBuilder out) {
      Rng stream = stream(v, secret, metric, version);
      out.append('{');
      if (grr) {
        int y = permanentValue(v, stream);
        out.append("\"v\":").append(Grr.step(rng, irrKeepProb, k, y));
      } else {
        byte[] bits = ((Unary) permanent).sample(v, stream);
        byte[] flips = new byte[nbytes];
        pack(rng.laneMarks(irrFlip, k), k, flips);
        for (int i = 0; i < nbytes; i++) bits[i] ^= flips[i];
        out.append("\"b\":\"");
        base64(bits, nbytes, out);
        out.append('"');
      }
      out.append('}');
    }

    /** A fresh device's report (the ε audit's view): secret = 32 bytes of rng, then the same. */
    @Override
    void perturb(int v, Rng rng, StringBuilder out) {
      byte[] secret = new byte[32];
      rng.take(secret, 0, 32);
      perturbMemoized(v, secret, "", 0, rng, out);
    }
  }

  // -- numeric -----------------------------------------------------------------------------

  static final int SCALE_BITS = 30;
  static final BigInteger M = BigInteger.ONE.shiftLeft(SCALE_BITS);

  /** value ∈ [low, high] mapped to [−1, 1] in floats. */
  static double scale(double value, double low, double high) {
    double x = (value - low) / (high - low) * 2.0 - 1.0;
    return Math.min(1.0, Math.max(-1.0, x));
  }

  /** duchi, pm, hybrid on a grid of 2^30 units. */
  static final class Numeric extends Mechanism {
    final BigInteger boundUnits; // duchi's K
    final BigInteger window; // pm's L
    final double alpha;
    private final Prob alphaProb;

    Numeric(String name, double eps) {
      super(name, eps);
      Frac b = expLowerBound(eps);
      if (name.equals("pm")) {
        boundUnits = BigInteger.ZERO;
      } else {
        BigInteger top = M.multiply(b.n.add(b.d));
        BigInteger bottom = b.n.subtract(b.d);
        boundUnits = top.add(bottom).subtract(BigInteger.ONE).divide(bottom);
      }
      window = name.equals("duchi") ? BigInteger.ZERO : pmWindow(eps, b);
      alpha = name.equals("hybrid") ? (eps <= 0.61 ? 0 : -Exact.expm1(-eps / 2)) : name.equals("pm") ? 1 : 0;
      alphaProb = name.equals("hybrid") && alpha > 0 ? new Prob(alpha) : null;
    }

    private static boolean fits(BigInteger l, Frac b) {
      BigInteger ml = M.add(l);
      return ml.multiply(ml).multiply(b.d).compareTo(b.n.multiply(l).multiply(l)) <= 0;
    }

    static BigInteger pmWindow(double eps, Frac b) {
      BigInteger l = BigInteger.valueOf((long) Math.max(1, Math.ceil((double) (1L << SCALE_BITS) / Exact.expm1(eps / 2))));
      while (!fits(l, b)) l = l.add(BigInteger.ONE);
      while (l.compareTo(BigInteger.ONE) > 0 && fits(l.subtract(BigInteger.ONE), b)) l = l.subtract(BigInteger.ONE);
      return l;
    }

    /** x = a/b exactly, b a power of two: {a, b}. */
    private static BigInteger[] ratioOf(double x) {
      if (x == 0) return new BigInteger[] {BigInteger.ZERO, BigInteger.ONE};
      return new BigInteger[] {BigInteger.valueOf(Exact.dyadicNum(x)), BigInteger.ONE.shiftLeft(Exact.dyadicExp(x))};
    }

    private BigInteger duchi(double x, Rng rng) {
      BigInteger[] ab = ratioOf(x);
      BigInteger kb = boundUnits.multiply(ab[1]);
      boolean up = rng.bigRandrange(kb.shiftLeft(1)).compareTo(kb.add(ab[0].multiply(M))) < 0;
      return up ? boundUnits : boundUnits.negate();
    }

    private BigInteger pm(double x, Rng rng) {
      BigInteger[] ab = ratioOf(x);
      BigInteger ml = M.add(window);
      BigInteger whole = ab[0].add(ab[1]).multiply(ml);
      BigInteger twoB = ab[1].shiftLeft(1);
      BigInteger[] ir = whole.divideAndRemainder(twoB);
      BigInteger i = ir[0];
      if (ir[1].signum() > 0 && rng.bigRandrange(twoB).compareTo(ir[1]) < 0) i = i.add(BigInteger.ONE);
      BigInteger n = M.add(window.shiftLeft(1));
      BigInteger j;
      if (BigInteger.valueOf(rng.randrange(n.longValue())).compareTo(ml) < 0) {
        j = i.add(BigInteger.valueOf(rng.randrange(window.longValue())));
      } else {
        j = BigInteger.valueOf(rng.randrange(ml.longValue()));
        if (j.compareTo(i) >= 0) j = j.add(window);
      }
      return j.shiftLeft(1).add(BigInteger.ONE).subtract(n);
    }

    /** The report in grid units. */
    BigInteger units(double x, Rng rng) {
      if (!(x >= -1 && x <= 1)) throw new IllegalArgumentException("a scaled value is in [-1, 1]");
      if (name.equals("pm")) return pm(x, rng);
      if (alphaProb != null && rng.bernoulli(alphaProb)) return pm(x, rng);
      return duchi(x, rng);
    }

    /** The payload {"y": units / 2^30} of a value already scaled to [−1, 1]. */
    void perturbScaled(double x, Rng rng, StringBuilder out) {
      double y = units(x, rng).doubleValue() / (double) (1L << SCALE_BITS);
      out.append("{\"y\":");
      Exact.pyRepr(y, out);
      out.append('}');
    }
  }

  // -- strings -----------------------------------------------------------------------------

  static final long HASH_PRIME = (1L << 31) - 1;

  /**
   * A string value's padded bytes: NFC, UTF-8, cut at a character boundary to maxLength
   * bytes, NUL-padded (§6).
   *
   * @throws IllegalArgumentException a NUL character or a lone surrogate (not UTF-8)
   */
  static byte[] normalise(String value, int maxLength) {
    if (value.indexOf('\0') >= 0) throw new IllegalArgumentException("a string metric's value must not contain NUL");
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= value.length() || !Character.isLowSurrogate(value.charAt(i + 1))) {
          throw new IllegalArgumentException("a lone surrogate is not UTF-8");
        }
        i++;
      } else if (Character.isLowSurrogate(c)) {
        throw new IllegalArgumentException("a lone surrogate is not UTF-8");
      }
    }
    byte[] raw = java.text.Normalizer.normalize(value, java.text.Normalizer.Form.NFC).getBytes(StandardCharsets.UTF_8);
    int length = raw.length;
    if (length > maxLength) {
      int cut = maxLength;
      while (cut > 0 && (raw[cut] & 0xc0) == 0x80) cut--;
      length = cut;
    }
    byte[] out = new byte[maxLength];
    System.arraycopy(raw, 0, out, 0, length);
    return out;
  }

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  static String toHex(byte[] bytes) {
    char[] out = new char[2 * bytes.length];
    for (int i = 0; i < bytes.length; i++) {
      out[2 * i] = HEX[(bytes[i] >>> 4) & 15];
      out[2 * i + 1] = HEX[bytes[i] & 15];
    }
    return new String(out);
  }

  static byte[] hex(String text) {
    if (text.length() % 2 != 0) throw new IllegalArgumentException("hex of odd length");
    byte[] out = new byte[text.length() / 2];
    for (int i = 0; i < out.length; i++) {
      int hi = Character.digit(text.charAt(2 * i), 16);
      int lo = Character.digit(text.charAt(2 * i + 1), 16);
      if (hi < 0 || lo < 0) throw new IllegalArgumentException("not hex");
      out[i] = (byte) ((hi << 4) | lo);
    }
    return out;
  }

  /** The string sketch: a random (level, row), the prefix's cell there through GRR. */
  static final class Sketch extends Mechanism {
    final int levels;
    final int rows;
    final int cells;
    final Grr inner;
    private final byte[] salt;
    private final long[] a;
    private final long[] c;
    private final long[] b;

    Sketch(double eps, Map<String, Object> params) {
      super("string-sketch", eps);
      levels = Params.integer(params, "max_length", 1, 64);
      rows = Params.integer(params, "rows", 1, 1 << 16);
      cells = Params.integer(params, "cells", 2, 1 << 16);
      salt = hex(Params.string(params, "salt"));
      if (salt.length > 64) throw new IllegalArgumentException("string-sketch: a salt of at most 64 bytes");
      inner = new Grr("grr", eps, cells, 0);
      a = new long[rows];
      c = new long[levels * rows];
      b = new long[levels * rows];
      java.util.Arrays.fill(a, -1);
      java.util.Arrays.fill(c, -1);
      java.util.Arrays.fill(b, -1);
    }

    private long draw(String label, long low) {
      byte[] h = Hashes.blake2b(label.getBytes(StandardCharsets.UTF_8), salt, 8);
      long x = 0;
      for (int i = 0; i < 8; i++) x = (x << 8) | (h[i] & 0xff);
      long m = HASH_PRIME - low;
      long rem = (((x >>> 1) % m) * 2 + (x & 1)) % m; // x unsigned mod m
      return low + rem;
    }

    synchronized long coefA(int row) {
      if (a[row] < 0) a[row] = draw("A:" + row, 2);
      return a[row];
    }

    synchronized long coefC(int level, int row) {
      int i = level * rows + row;
      if (c[i] < 0) c[i] = draw("C:" + level + ":" + row, 1);
      return c[i];
    }

    synchronized long coefB(int level, int row) {
      int i = level * rows + row;
      if (b[i] < 0) b[i] = draw("B:" + level + ":" + row, 0);
      return b[i];
    }

    int cell(byte[] padded, int level, int row) {
      long mult = coefA(row);
      long phi = 0;
      for (int i = 0; i <= level; i++) phi = (phi * mult + (padded[i] & 0xff) + 1) % HASH_PRIME;
      return (int) (((coefC(level, row) * phi + coefB(level, row)) % HASH_PRIME) % cells);
    }

    void perturbPadded(byte[] padded, Rng rng, StringBuilder out) {
      int group = (int) rng.randrange((long) levels * rows);
      int level = group / rows;
      int row = group % rows;
      out.append("{\"l\":").append(level).append(",\"r\":").append(row).append(',');
      inner.fields(cell(padded, level, row), rng, out);
      out.append('}');
    }
  }

  // -- joint -------------------------------------------------------------------------------

  /** A joint metric: a uniform group, the tuple's row-major cell in it through its oracle. */
  static final class Joint extends Mechanism {
    final int[] sizes;
    final int[][] groups;
    final Mechanism[] oracles;

    Joint(double eps, Map<String, Object> params) {
      super("joint", eps);
      List<Object> s = Params.list(params, "sizes");
      sizes = new int[s.size()];
      for (int i = 0; i < sizes.length; i++) sizes[i] = Params.asInt(s.get(i), "sizes", 2, 1 << 20);
      List<Object> g = Params.list(params, "groups");
      List<Object> o = Params.list(params, "oracles");
      if (g.isEmpty() || g.size() != o.size()) throw new IllegalArgumentException("joint: one oracle per group");
      groups = new int[g.size()][];
      oracles = new Mechanism[g.size()];
      for (int i = 0; i < groups.length; i++) {
        if (!(g.get(i) instanceof List)) throw new IllegalArgumentException("joint: a group lists attributes");
        List<?> members = (List<?>) g.get(i);
        groups[i] = new int[members.size()];
        long product = 1;
        for (int j = 0; j < groups[i].length; j++) {
          groups[i][j] = Params.asInt(members.get(j), "groups", 0, sizes.length - 1);
          product *= sizes[groups[i][j]];
        }
        oracles[i] = build(Params.map(o.get(i), "oracles"));
        if (!oracles[i].name.equals("grr") && !oracles[i].name.equals("olh")) {
          throw new IllegalArgumentException("a joint group uses grr or olh, got " + oracles[i].name);
        }
        if (oracles[i].domainSize() != product) throw new IllegalArgumentException("joint: an oracle's domain is its group's product");
      }
    }

    void perturbTuple(int[] values, Rng rng, StringBuilder out) {
      if (values.length != sizes.length) throw new IllegalArgumentException("a joint value is a tuple of " + sizes.length);
      for (int j = 0; j < values.length; j++) {
        if (values[j] < 0 || values[j] >= sizes[j]) throw new IllegalArgumentException("value #" + j + " out of range");
      }
      int g = groups.length > 1 ? (int) rng.randrange(groups.length) : 0;
      int cell = 0;
      for (int a : groups[g]) cell = cell * sizes[a] + values[a];
      out.append("{\"g\":").append(g).append(',');
      oracles[g].fields(cell, rng, out);
      out.append('}');
    }
  }

  // -- distribution ------------------------------------------------------------------------

  /**
   * A distribution metric's mechanism: the value's bin (client_sdk/mechanisms/bins.py), then
   * the mechanism's report of it.
   */
  abstract static class Binned extends Mechanism {
    final int bins;
    final boolean log;

    Binned(String name, double eps, Map<String, Object> params) {
      super(name, eps);
      bins = Params.integer(params, "bins", 4, 4096);
      String scale = Params.string(params, "scale");
      if (!scale.equals("linear") && !scale.equals("log")) throw new IllegalArgumentException(name + ": scale is linear or log");
      log = scale.equals("log");
      if (Integer.bitCount(bins) != 1) throw new IllegalArgumentException(name + ": bins is a power of two");
    }

    /**
     * client_sdk's bin_of: the same operations in the same order (StrictMath.log is fdlibm's,
     * as the browser's).
     */
    int bin(double v, double lo, double hi) {
      double t = log ? StrictMath.log(v / lo) / StrictMath.log(hi / lo) * bins : (v - lo) / (hi - lo) * bins;
      return (int) Math.min(bins - 1, Math.max(0, Math.floor(t)));
    }

    /** The payload of a report of v ∈ [lo, hi]. */
    abstract void perturbValue(double v, double lo, double hi, Rng rng, StringBuilder out);
  }

  /**
   * The hierarchical histogram: the value's bin, a uniform level l in 1..h (a draw only when
   * h > 1), the bin's node at l through OUE over B^l.
   */
  static final class Histogram extends Binned {
    final int branching;
    final int height;
    private final Unary[] levels;

    Histogram(double eps, Map<String, Object> params) {
      super("hh", eps, params);
      branching = Params.integer(params, "branching", 2, 4096);
      int h = 0;
      for (long d = 1; d < bins; d *= branching) h++;
      if (Integer.bitCount(branching) != 1 || Math.pow(branching, h) != bins) {
        throw new IllegalArgumentException("hh: bins is a power of the branching factor, both powers of two");
      }
      height = h;
      levels = new Unary[h];
      for (int l = 1; l <= h; l++) levels[l - 1] = Unary.oue(eps, (int) Math.pow(branching, l));
    }

    @Override
    void perturbValue(double v, double lo, double hi, Rng rng, StringBuilder out) {
      int leaf = bin(v, lo, hi);
      int l = height > 1 ? 1 + (int) rng.randrange(height) : 1;
      out.append("{\"l\":").append(l).append(',');
      levels[l - 1].fields(leaf / (int) Math.pow(branching, height - l), rng, out);
      out.append('}');
    }
  }

  /**
   * HaarHRR (client_sdk/mechanisms/haar.py): the value's bin, a uniform level l in 0..h−1 (a
   * draw only when h > 1) and row r in range(2^l) (a draw only when l > 0), then the sign of
   * the bin's Haar coefficient at its node (y = 1: +1, the left half) through Hadamard row r,
   * (−1)^popcount(r &amp; node), kept with p = e^ε/(e^ε + 1) (HR's p over two values).
   */
  static final class Haar extends Binned {
    final int height;
    private final Prob p;

    Haar(double eps, Map<String, Object> params) {
      super("haar", eps, params);
      height = Integer.numberOfTrailingZeros(bins);
      p = new Hr(eps, 2).p;
    }

    @Override
    void perturbValue(double v, double lo, double hi, Rng rng, StringBuilder out) {
      int leaf = bin(v, lo, hi);
      int l = height > 1 ? (int) rng.randrange(height) : 0;
      long r = l > 0 ? rng.randrange(1L << l) : 0;
      int node = leaf >> (height - l);
      int y = (Long.bitCount(r & node) ^ (leaf >> (height - l - 1)) ^ 1) & 1;
      if (!rng.bernoulli(p)) y ^= 1;
      out.append("{\"l\":").append(l).append(",\"r\":").append(r).append(",\"y\":").append(y).append('}');
    }
  }
}
