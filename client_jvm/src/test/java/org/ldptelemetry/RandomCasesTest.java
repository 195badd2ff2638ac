package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.ldptelemetry.Vectors.hex;
import static org.ldptelemetry.Vectors.list;
import static org.ldptelemetry.Vectors.map;
import static org.ldptelemetry.Vectors.toHex;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Random cross-SDK cases (conformance/random_cases.py): the Python SDK draws random
 * definitions of every kind and mechanism, values and random bytes from a seed that
 * changes every run, and writes what it puts on the wire; this SDK replays the same bytes
 * and must write the same bytes: each report, the batch a real Client posts, each sealed
 * request. LDP_CONFORMANCE_SEED replays a run (the seed is printed); LDP_CONFORMANCE_COUNT
 * sets the number of definitions (300); LDP_PYTHON the interpreter (.venv/bin/python,
 * else python3).
 */
class RandomCasesTest {
  private static Map<String, Object> run;
  private static long seed;
  private static String replay;

  @BeforeAll
  static void generate() throws Exception {
    Path root = Vectors.root();
    Path generator = root.resolve("conformance").resolve("random_cases.py");
    Assumptions.assumeTrue(Files.exists(generator), "conformance/random_cases.py is not in this checkout yet");
    String given = System.getenv("LDP_CONFORMANCE_SEED");
    seed = given != null ? Long.parseLong(given) : new java.security.SecureRandom().nextInt(Integer.MAX_VALUE);
    String count = System.getenv().getOrDefault("LDP_CONFORMANCE_COUNT", "300");
    String python = System.getenv("LDP_PYTHON");
    if (python == null) python = new File(root.resolve(".venv/bin/python").toString()).exists() ? root.resolve(".venv/bin/python").toString() : "python3";
    replay = "(seed " + seed + ": LDP_CONFORMANCE_SEED=" + seed + " replays it)";
    System.out.println("random cross-SDK cases: seed " + seed + " " + replay + ", " + count + " definitions");
    Process p = new ProcessBuilder(python, generator.toString(), "--seed", Long.toString(seed), "--count", count).redirectErrorStream(false).start();
    byte[] out = p.getInputStream().readAllBytes();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) fail("random_cases.py failed: " + err);
    run = map(Json.parse(new String(out, StandardCharsets.UTF_8)));
  }

  /** Fail with where two texts first differ (a batch is tens of kB). */
  static void sameText(String actual, String expected, String where) {
    if (actual.equals(expected)) return;
    int i = 0;
    while (i < actual.length() && i < expected.length() && actual.charAt(i) == expected.charAt(i)) i++;
    int from = Math.max(0, i - 60);
    fail("differs at " + i + " of " + expected.length() + ": " + where + "\n  this SDK: "
        + actual.substring(from, Math.min(actual.length(), i + 60)) + "\n  Python:   "
        + expected.substring(from, Math.min(expected.length(), i + 60)));
  }

  private static String what(Map<String, Object> c) {
    Map<String, Object> d = map(c.get("definition"));
    String mech = Json.write(d.get("mechanism"));
    return d.get("kind") + " " + mech.substring(0, Math.min(160, mech.length())) + " value " + Json.write(c.get("value")) + " " + replay;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, String> dims(Map<String, Object> c) {
    return (Map<String, String>) c.get("dimensions");
  }

  @Test
  void eachReportsBytesEqualThePythonSdksEveryRandomByteConsumed() {
    List<Object> cases = list(run.get("cases"));
    assertTrue(cases.size() >= 200, "at least 200 random definitions a run, got " + cases.size());
    byte[] secret = hex((String) run.get("secret"));
    StringBuilder batch = new StringBuilder("{\"reports\":[");
    StringBuilder out = new StringBuilder();
    TreeSet<String> kinds = new TreeSet<>();
    for (int i = 0; i < cases.size(); i++) {
      Map<String, Object> c = map(cases.get(i));
      Definition d = Definition.parse(c.get("definition"));
      kinds.add(d.kind);
      RandomSource.Fixed source = RandomSource.fixed(hex((String) c.get("random")));
      out.setLength(0);
      d.writeReport(c.get("value"), dims(c), new Rng(source), secret, (String) c.get("id"), d.version, out);
      sameText(out.toString(), (String) c.get("report_json"), what(c));
      assertEquals(((String) c.get("random")).length() / 2, source.used(), "every random byte is consumed: " + what(c));
      if (i > 0) batch.append(',');
      batch.append(out);
    }
    batch.append("]}");
    sameText(batch.toString(), (String) run.get("batch"), replay);
    assertEquals("[categorical, distribution, joint, numeric, string]", kinds.toString(), replay);
    System.out.println("compared " + cases.size() + " random definitions' reports and their batch (" + batch.length() + " bytes), byte for byte");
  }

  @Test
  void aRealClientPostsThePythonSdksBatchButForTheIdsItDraws() throws Exception {
    List<Object> cases = list(run.get("cases"));
    Map<String, String> definitions = new HashMap<>();
    StringBuilder random = new StringBuilder();
    for (Object o : cases) {
      Map<String, Object> c = map(o);
      definitions.put((String) map(c.get("definition")).get("name"), Json.write(c.get("definition")));
      random.append((String) c.get("random"));
    }
    RandomSource.Fixed source = RandomSource.fixed(hex(random.toString()));
    List<String> posted = new ArrayList<>();
    Transport transport =
        (method, url, body, contentType, accept) -> {
          if (method.equals("POST")) {
            posted.add(new String(body, StandardCharsets.UTF_8));
            return new Transport.Response(202, Map.of(), ("{\"accepted\":" + cases.size() + "}").getBytes(StandardCharsets.UTF_8));
          }
          String name = url.substring(url.lastIndexOf('/') + 1);
          return new Transport.Response(200, Map.of("Content-Type", "application/json"), definitions.get(name).getBytes(StandardCharsets.UTF_8));
        };
    ClientOptions options = ClientOptions.builder().transport(transport).random(source).flushAt(100_000).flushIntervalMillis(86_400_000).maxBatchReports(100_000).maxBatchBytes(1 << 30).build();
    try (Client client = new Client("https://collector.example", options)) {
      client.store().setSecret(hex((String) run.get("secret")));
      for (Object o : cases) {
        Map<String, Object> c = map(o);
        assertTrue(client.report((String) map(c.get("definition")).get("name"), c.get("value"), dims(c)), what(c) + " " + client.stats());
      }
      assertEquals(random.length() / 2, source.used(), replay);
      assertTrue(client.flush(60_000));
    }
    assertEquals(1, posted.size());
    Matcher m = Pattern.compile("\"id\":\"([0-9a-f]{32})\"").matcher(posted.get(0));
    String body = posted.get(0);
    int i = 0;
    StringBuilder swapped = new StringBuilder();
    int last = 0;
    while (m.find()) {
      swapped.append(body, last, m.start(1)).append(map(cases.get(i++)).get("id"));
      last = m.end(1);
    }
    swapped.append(body.substring(last));
    assertEquals(cases.size(), i);
    sameText(swapped.toString(), (String) run.get("batch"), replay);
  }

  @Test
  void randomObliviousRequestsTheBinaryRequestAndItsSealedBodyEqualThePythonSdks() throws Exception {
    List<Object> requests = list(run.get("ohttp"));
    assertTrue(requests.size() >= 10);
    for (Object o : requests) {
      Map<String, Object> r = map(o);
      Oblivious.KeyConfig key = Oblivious.usable(hex((String) r.get("keys")));
      Object body = r.get("body");
      String url = ((String) r.get("collector")).replaceAll("/+$", "") + r.get("path");
      byte[] request = Oblivious.binaryRequest((String) r.get("method"), url, body == null ? null : ((String) body).getBytes(StandardCharsets.UTF_8));
      String where = r.get("method") + " " + url + " " + replay;
      sameText(toHex(request), (String) r.get("binary_request"), where);
      byte[][] ephemeral = {hex((String) r.get("ephemeral_private_key")), hex((String) r.get("ephemeral_public_key"))};
      sameText(toHex(Oblivious.encapsulate(key, request, ephemeral).body), (String) r.get("encapsulated_request"), where);
    }
  }
}
