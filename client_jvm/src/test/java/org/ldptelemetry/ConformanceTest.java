package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.ldptelemetry.Vectors.hex;
import static org.ldptelemetry.Vectors.i;
import static org.ldptelemetry.Vectors.list;
import static org.ldptelemetry.Vectors.load;
import static org.ldptelemetry.Vectors.map;
import static org.ldptelemetry.Vectors.maps;
import static org.ldptelemetry.Vectors.rat;
import static org.ldptelemetry.Vectors.replay;
import static org.ldptelemetry.Vectors.toHex;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Every conformance vector (conformance/vectors/*.json, written from the Python SDK): the
 * same parameters and random bytes must give the same payload, compared as JSON text (the
 * bytes a report carries), with no random byte left over.
 */
class ConformanceTest {
  private final StringBuilder out = new StringBuilder();

  /** The payload's exact JSON: the vector's own text when it has one, else its object written. */
  private static String expected(Map<String, Object> c) {
    Object text = c.get("payload_json");
    return text instanceof String ? (String) text : Json.write(c.get("payload"));
  }

  @Test
  void expTheFloatsEveryProbabilityIsBuiltOnAtAwkwardEpsilonToo() {
    Map<String, Object> v = load("exp.json");
    assertTrue(list(v.get("awkward")).size() >= 5);
    int n = 0;
    for (String table : new String[] {"table", "awkward"}) {
      for (Map<String, Object> row : maps(v.get(table))) {
        double eps = ((Number) row.get("epsilon")).doubleValue();
        assertEquals(row.get("exp"), rat(Exact.exp(eps)), "exp(" + eps + ")");
        assertEquals(row.get("exp_epsilon"), rat(Mechanism.expEpsilon(eps)));
        assertEquals(row.get("exp_upper_bound"), Mechanism.expLowerBound(eps).toString());
        assertEquals(row.get("exp_half"), rat(Exact.exp(eps / 2)), "exp(" + eps + " / 2)");
        assertEquals(row.get("expm1_half"), rat(Exact.expm1(eps / 2)), "expm1(" + eps + " / 2)");
        assertEquals(row.get("hybrid_alpha"), rat(-Exact.expm1(-eps / 2)), "-expm1(-" + eps + " / 2)");
        n++;
      }
    }
    assertTrue(n >= 20);
  }

  @Test
  void frequencyOraclesProbabilities() {
    for (Map<String, Object> entry : maps(load("oracles.json").get("mechanisms"))) {
      Mechanism m = Mechanism.build(map(entry.get("params")));
      Map<String, Object> probs = map(entry.get("probabilities"));
      String what = Json.write(entry.get("params"));
      if (probs.containsKey("p")) {
        double[] pq = pq(m);
        assertEquals(probs.get("p"), rat(pq[0]), "p of " + what);
        assertEquals(probs.get("q"), rat(pq[1]), "q of " + what);
      }
      if (probs.containsKey("irr_keep")) assertEquals(probs.get("irr_keep"), rat(((Mechanism.Memo) m).irrKeep), what);
      if (probs.containsKey("p_star_exact")) assertEquals(probs.get("p_star_exact"), ((Mechanism.Memo) m).pStar.toString(), what);
      if (probs.containsKey("thresholds")) {
        Mechanism.Pram pram = (Mechanism.Pram) m;
        List<Object> rows = list(probs.get("thresholds"));
        for (int r = 0; r < rows.size(); r++) {
          Map<String, Object> row = map(rows.get(r));
          assertEquals(row.get("denominator"), pram.denominators[r].toString(), what);
          List<Object> cum = list(row.get("cumulative"));
          for (int c = 0; c < cum.size(); c++) assertEquals(cum.get(c), pram.cumulative[r][c].toString(), what);
        }
      }
      if (probs.containsKey("g")) {
        Mechanism.Olh olh = (Mechanism.Olh) m;
        assertEquals(i(probs.get("g")), olh.g, what);
        assertEquals(((Number) probs.get("prime")).longValue(), olh.prime, what);
      }
      if (probs.containsKey("s")) {
        Mechanism.Ss ss = (Mechanism.Ss) m;
        assertEquals(i(probs.get("s")), ss.s, what);
        assertEquals(probs.get("dense"), ss.dense, what);
      }
      if (probs.containsKey("order")) assertEquals(((Number) probs.get("order")).longValue(), ((Mechanism.Hr) m).order);
    }
  }

  /** p and q of a frequency oracle as floats (memoized: of the composed p*, q*). */
  static double[] pq(Mechanism m) {
    if (m instanceof Mechanism.Grr) return new double[] {((Mechanism.Grr) m).keep.value, ((Mechanism.Grr) m).q};
    if (m instanceof Mechanism.Unary) return new double[] {((Mechanism.Unary) m).p.value, ((Mechanism.Unary) m).q.value};
    if (m instanceof Mechanism.Olh) return new double[] {((Mechanism.Olh) m).keep.value, ((Mechanism.Olh) m).q};
    if (m instanceof Mechanism.Hr) return new double[] {((Mechanism.Hr) m).p.value, 0.5};
    if (m instanceof Mechanism.Ss) return new double[] {((Mechanism.Ss) m).keep.value, ((Mechanism.Ss) m).q};
    if (m instanceof Mechanism.Memo) return new double[] {((Mechanism.Memo) m).pStar.toDouble(), ((Mechanism.Memo) m).qStar.toDouble()};
    throw new AssertionError("no p and q: " + m.name);
  }

  @Test
  void frequencyOraclesEveryCaseByteForByte() {
    int n = 0;
    for (Map<String, Object> entry : maps(load("oracles.json").get("mechanisms"))) {
      Mechanism m = Mechanism.build(map(entry.get("params")));
      for (Object co : list(entry.get("cases"))) {
        Map<String, Object> c = map(co);
        String got = replay((String) c.get("random"), rng -> m.perturb(i(c.get("value")), rng, out), out);
        assertEquals(expected(c), got, Json.write(entry.get("params")) + " value " + c.get("value"));
        n++;
      }
    }
    assertTrue(n > 250, "cases: " + n);
  }

  @Test
  void jointMechanismsEveryCaseByteForByte() {
    int n = 0;
    for (Map<String, Object> entry : maps(load("joint.json").get("mechanisms"))) {
      Mechanism.Joint m = (Mechanism.Joint) Mechanism.build(map(entry.get("params")));
      for (Object co : list(entry.get("cases"))) {
        Map<String, Object> c = map(co);
        List<Object> values = list(c.get("values"));
        int[] tuple = new int[values.size()];
        for (int j = 0; j < tuple.length; j++) tuple[j] = i(values.get(j));
        String got = replay((String) c.get("random"), rng -> m.perturbTuple(tuple, rng, out), out);
        assertEquals(expected(c), got, "joint " + entry.get("method") + " " + values);
        n++;
      }
    }
    assertTrue(n >= 36);
  }

  @Test
  void memoizedSeedStreamPermanentResponseAndReports() {
    for (Map<String, Object> entry : maps(load("memoized.json").get("mechanisms"))) {
      Mechanism.Memo m = (Mechanism.Memo) Mechanism.build(map(entry.get("params")));
      for (Object co : list(entry.get("cases"))) {
        Map<String, Object> c = map(co);
        String metric = (String) c.get("metric");
        long version = ((Number) c.get("version")).longValue();
        int value = i(c.get("value"));
        byte[] secret = hex((String) c.get("secret"));
        byte[] info = Mechanism.prrInfo(metric, version, value);
        assertEquals(c.get("info"), toHex(info));
        byte[] seed = Mechanism.prrSeed(secret, info);
        assertEquals(c.get("seed"), toHex(seed));
        byte[] head = new byte[64];
        new Hashes.Shake256(seed).nextBytes(head, 0, 64);
        assertEquals(c.get("stream_head"), toHex(head));
        out.setLength(0);
        m.permanentResponse(value, secret, metric, version, out);
        assertEquals(Json.write(c.get("permanent_response")), out.toString());
        String irr = (String) map(c.get("irr")).get("random");
        String got = replay(irr, rng -> m.perturbMemoized(value, secret, metric, version, rng, out), out);
        assertEquals(expected(c), got, Json.write(entry.get("params")));
      }
    }
  }

  @Test
  void numericScalingConstantsAndPayloadsAsText() {
    Map<String, Object> v = load("numeric.json");
    for (Map<String, Object> s : maps(v.get("scaling"))) {
      List<Object> range = list(s.get("range"));
      double x = Mechanism.scale(((Number) s.get("value")).doubleValue(), ((Number) range.get(0)).doubleValue(), ((Number) range.get(1)).doubleValue());
      assertEquals(s.get("x_exact"), rat(x));
    }
    int n = 0;
    for (Map<String, Object> entry : maps(v.get("mechanisms"))) {
      Mechanism.Numeric m = (Mechanism.Numeric) Mechanism.build(map(entry.get("params")));
      Map<String, Object> constants = map(entry.get("constants"));
      if (constants.containsKey("window")) assertEquals(constants.get("window"), m.window.toString());
      if (!m.name.equals("pm")) {
        Object k = constants.containsKey("duchi_bound_units") ? constants.get("duchi_bound_units") : constants.get("bound_units");
        assertEquals(k, m.boundUnits.toString());
      }
      if (constants.containsKey("alpha")) assertEquals(constants.get("alpha"), rat(m.alpha));
      for (Object co : list(entry.get("cases"))) {
        Map<String, Object> c = map(co);
        double x = ((Number) c.get("x")).doubleValue();
        String got = replay((String) c.get("random"), rng -> m.perturbScaled(x, rng, out), out);
        assertEquals(c.get("payload_json"), got, m.name + " x " + x);
        n++;
      }
    }
    assertTrue(n > 50);
  }

  @Test
  void stringsNormalisationSaltsCoefficientsCellsAndPayloads() {
    Map<String, Object> v = load("strings.json");
    for (Map<String, Object> c : maps(v.get("normalise"))) {
      assertEquals(c.get("padded"), toHex(Mechanism.normalise((String) c.get("value"), i(c.get("max_length")))), (String) c.get("value"));
    }
    for (Map<String, Object> c : maps(v.get("refused"))) {
      assertThrows(IllegalArgumentException.class, () -> Mechanism.normalise((String) c.get("value"), i(c.get("max_length"))));
    }
    for (Map<String, Object> s : maps(v.get("derived_salts"))) {
      byte[] salt = Hashes.blake2b(("ldp-string:" + s.get("name")).getBytes(StandardCharsets.UTF_8), new byte[0], 16);
      assertEquals(s.get("salt"), toHex(salt));
    }
    for (Map<String, Object> entry : maps(v.get("sketches"))) {
      Mechanism.Sketch m = (Mechanism.Sketch) Mechanism.build(map(entry.get("params")));
      assertEquals(map(entry.get("inner")).get("p"), rat(m.inner.keep.value));
      Map<String, Object> coefficients = map(entry.get("coefficients"));
      List<Object> a = list(coefficients.get("a"));
      for (int r = 0; r < m.rows; r++) assertEquals(((Number) a.get(r)).longValue(), m.coefA(r));
      List<Object> cb = list(coefficients.get("c_b"));
      for (int g = 0; g < m.levels * m.rows; g++) {
        List<Object> pair = list(cb.get(g));
        assertEquals(((Number) pair.get(0)).longValue(), m.coefC(g / m.rows, g % m.rows));
        assertEquals(((Number) pair.get(1)).longValue(), m.coefB(g / m.rows, g % m.rows));
      }
      for (Object co : list(entry.get("cells"))) {
        Map<String, Object> c = map(co);
        byte[] padded = Mechanism.normalise((String) c.get("value"), m.levels);
        assertEquals(c.get("padded"), toHex(padded));
        List<Object> cells = list(c.get("cells"));
        for (int l = 0; l < m.levels; l++) {
          for (int r = 0; r < m.rows; r++) assertEquals(i(list(cells.get(l)).get(r)), m.cell(padded, l, r));
        }
      }
      for (Object co : list(entry.get("cases"))) {
        Map<String, Object> c = map(co);
        byte[] padded = Mechanism.normalise((String) c.get("value"), m.levels);
        String got = replay((String) c.get("random"), rng -> m.perturbPadded(padded, rng, out), out);
        assertEquals(expected(c), got);
      }
    }
  }

  @Test
  void wireReportsBuiltFromServedDefinitionsAndABatchsExactBody() {
    Map<String, Object> v = load("wire.json");
    StringBuilder batch = new StringBuilder("{\"reports\":[");
    boolean first = true;
    for (Map<String, Object> item : maps(v.get("reports"))) {
      Definition d = Definition.parse(item.get("definition"));
      byte[] secret = item.get("secret") == null ? null : hex((String) item.get("secret"));
      @SuppressWarnings("unchecked")
      Map<String, String> dims = (Map<String, String>) item.get("dimensions");
      Object value = item.get("value");
      String id = (String) item.get("id");
      String got = replay((String) item.get("random"), rng -> d.writeReport(value, dims, rng, secret, id, d.version, out), out);
      assertEquals(item.get("report_json"), got, d.name);
      assertEquals(Json.write(item.get("report")), got, d.name);
      if (!first) batch.append(',');
      first = false;
      batch.append(got);
    }
    batch.append("]}");
    assertEquals(v.get("batch"), batch.toString());
  }
}
