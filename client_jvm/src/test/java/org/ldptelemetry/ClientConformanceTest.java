package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.ldptelemetry.Vectors.hex;
import static org.ldptelemetry.Vectors.list;
import static org.ldptelemetry.Vectors.map;
import static org.ldptelemetry.Vectors.toHex;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The real Client against the vectors: wire.json's values reported (their definitions
 * fetched, the perturbation fed the vectors' bytes in order, the device secret theirs)
 * post wire.json's batch byte for byte, directly and sealed through a relay, whose gateway
 * (TestGateway) opens ohttp.json's Binary HTTP requests byte for byte.
 */
class ClientConformanceTest {
  private final Map<String, Object> wire = Vectors.load("wire.json");

  private Map<String, String> definitions() {
    Map<String, String> out = new HashMap<>();
    for (Object o : list(wire.get("reports"))) {
      Map<String, Object> d = map(map(o).get("definition"));
      out.put((String) d.get("name"), Json.write(d));
    }
    return out;
  }

  /** Report every wire vector's value through a real Client, flush and shut it down. */
  private void reportAll(ClientOptions.Builder options) throws Exception {
    StringBuilder random = new StringBuilder();
    String secret = null;
    for (Object o : list(wire.get("reports"))) {
      random.append((String) map(o).get("random"));
      if (map(o).get("secret") != null) secret = (String) map(o).get("secret");
    }
    RandomSource.Fixed source = RandomSource.fixed(hex(random.toString()));
    try (Client client = new Client("https://collector.example", options.random(source).flushAt(1000).flushIntervalMillis(86_400_000).build())) {
      client.store().setSecret(hex(secret));
      for (Object o : list(wire.get("reports"))) {
        Map<String, Object> item = map(o);
        @SuppressWarnings("unchecked")
        Map<String, String> dims = (Map<String, String>) item.get("dimensions");
        String name = (String) map(item.get("definition")).get("name");
        assertTrue(client.report(name, item.get("value"), dims), name + " " + client.stats());
      }
      assertEquals(random.length() / 2, source.used(), "every random byte is consumed");
      assertTrue(client.flush(60_000));
    }
  }

  /** {@code text} with the vectors' report ids in place of those the client drew. */
  private String withVectorIds(String text) {
    List<Object> reports = list(wire.get("reports"));
    Matcher m = Pattern.compile("\"id\":\"([0-9a-f]{32})\"").matcher(text);
    StringBuilder out = new StringBuilder();
    int last = 0;
    int i = 0;
    while (m.find()) {
      out.append(text, last, m.start(1)).append((String) map(reports.get(i++)).get("id"));
      last = m.end(1);
    }
    assertEquals(reports.size(), i);
    return out.append(text.substring(last)).toString();
  }

  @Test
  void aRealClientPostsTheVectorsBatchByteForByteButForTheIdsItDraws() throws Exception {
    Map<String, String> definitions = definitions();
    List<String> posted = new ArrayList<>();
    Transport collector =
        (method, url, body, type, accept) -> {
          if (method.equals("POST")) {
            posted.add(new String(body, StandardCharsets.UTF_8));
            return new Transport.Response(202, Map.of(), "{\"accepted\":26}".getBytes(StandardCharsets.UTF_8));
          }
          String name = url.substring(url.lastIndexOf('/') + 1);
          return new Transport.Response(200, Map.of(), definitions.get(name).getBytes(StandardCharsets.UTF_8));
        };
    reportAll(ClientOptions.builder().transport(collector));
    assertEquals(1, posted.size());
    assertEquals(wire.get("batch"), withVectorIds(posted.get(0)));
  }

  @Test
  void aRealClientThroughARelaySealsTheVectorsRequestsTheGatewayOpensThemByteForByte() throws Exception {
    Map<String, Object> o = Vectors.load("ohttp.json");
    byte[] keys = hex((String) o.get("keys"));
    TestGateway gateway = new TestGateway(hex((String) o.get("gateway_private_key")), Oblivious.usable(keys).publicKey);
    Map<String, String> definitions = definitions();
    List<byte[]> inner = new ArrayList<>();
    List<String> direct = new ArrayList<>();
    Transport network =
        (method, url, body, type, accept) -> {
          if (!url.equals("https://relay.example/relay")) {
            direct.add(method + " " + url);
            throw new java.io.IOException("only the relay is reachable");
          }
          assertEquals(Oblivious.REQUEST_TYPE, type);
          try {
            TestGateway.Opened opened = gateway.open(body);
            inner.add(opened.request);
            String text = new String(opened.request, StandardCharsets.ISO_8859_1);
            Matcher name = Pattern.compile("/v1/metrics/([a-z0-9_.-]+)").matcher(text);
            byte[] answer =
                name.find()
                    ? TestGateway.response(200, definitions.get(name.group(1)).getBytes(StandardCharsets.UTF_8))
                    : TestGateway.response(202, "{\"accepted\":26}".getBytes(StandardCharsets.UTF_8));
            return new Transport.Response(200, Map.of("Content-Type", Oblivious.RESPONSE_TYPE), opened.respond(answer));
          } catch (java.security.GeneralSecurityException e) {
            throw new AssertionError("not sealed to the pinned key", e);
          }
        };
    reportAll(ClientOptions.builder().transport(network).relay("https://relay.example/relay").relayKeys(keys));
    assertEquals(List.of(), direct, "nothing went to the collector directly");
    Map<String, String> expected = new HashMap<>();
    for (Object r : list(o.get("requests"))) {
      Map<String, Object> req = map(r);
      if (req.get("collector").equals("https://collector.example")) expected.put((String) req.get("path"), (String) req.get("binary_request"));
    }
    byte[] definition = null;
    List<byte[]> uploads = new ArrayList<>();
    for (byte[] b : inner) {
      String text = new String(b, StandardCharsets.ISO_8859_1);
      if (text.contains("/v1/metrics/app.theme\u0000")) definition = b; // the path, then no headers
      if (text.contains("/v1/reports")) uploads.add(b);
    }
    assertNotNull(definition);
    assertEquals(expected.get("/v1/metrics/app.theme"), toHex(definition));
    assertEquals(1, uploads.size());
    byte[] upload = withVectorIds(new String(uploads.get(0), StandardCharsets.ISO_8859_1)).getBytes(StandardCharsets.ISO_8859_1);
    assertEquals(expected.get("/v1/reports"), toHex(upload));
  }
}
