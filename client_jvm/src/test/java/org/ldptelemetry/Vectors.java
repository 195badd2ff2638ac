package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/** Helpers of the tests: the repository's files, hex, and replays of fixed random bytes. */
final class Vectors {
  private Vectors() {}

  static Path root() {
    String root = System.getProperty("ldp.root");
    return root != null ? Paths.get(root) : Paths.get("").toAbsolutePath().getParent();
  }

  static Path vectors() {
    return root().resolve("conformance").resolve("vectors");
  }

  static Map<String, Object> load(String name) {
    try {
      return map(Json.parse(new String(Files.readAllBytes(vectors().resolve(name)), StandardCharsets.UTF_8)));
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> map(Object o) {
    return (Map<String, Object>) o;
  }

  @SuppressWarnings("unchecked")
  static List<Object> list(Object o) {
    return (List<Object>) o;
  }

  /** A list of JSON objects. */
  static List<Map<String, Object>> maps(Object o) {
    List<Map<String, Object>> out = new java.util.ArrayList<>();
    for (Object x : list(o)) out.add(map(x));
    return out;
  }

  static byte[] hex(String h) {
    return Mechanism.hex(h);
  }

  static String toHex(byte[] b) {
    StringBuilder out = new StringBuilder();
    for (byte x : b) out.append(String.format("%02x", x & 0xff));
    return out.toString();
  }

  static String rat(double x) {
    return Exact.frac(x).toString();
  }

  static int i(Object o) {
    return ((Number) o).intValue();
  }

  /** Run {@code body} on the bytes of {@code randomHex}; check every byte was consumed. */
  static String replay(String randomHex, Consumer<Rng> body, StringBuilder out) {
    RandomSource.Fixed source = RandomSource.fixed(hex(randomHex));
    out.setLength(0);
    body.accept(new Rng(source));
    assertEquals(randomHex.length() / 2, source.used(), "every random byte is consumed");
    return out.toString();
  }
}
