package org.ldptelemetry;

import java.util.List;
import java.util.Map;

/** Reading a parsed JSON object's fields, each checked; a wrong one says which. */
final class Params {
  private Params() {}

  static Object required(Map<String, Object> m, String key) {
    Object v = m.get(key);
    if (v == null) throw new IllegalArgumentException("'" + key + "' is missing");
    return v;
  }

  static String string(Map<String, Object> m, String key) {
    Object v = required(m, key);
    if (!(v instanceof String)) throw new IllegalArgumentException("'" + key + "' must be a string");
    return (String) v;
  }

  static double number(Map<String, Object> m, String key) {
    Object v = required(m, key);
    if (!(v instanceof Number)) throw new IllegalArgumentException("'" + key + "' must be a number");
    double d = ((Number) v).doubleValue();
    if (Double.isNaN(d) || Double.isInfinite(d)) throw new IllegalArgumentException("'" + key + "' must be finite");
    return d;
  }

  static double positive(Map<String, Object> m, String key) {
    double d = number(m, key);
    if (!(d > 0 && d <= 700)) throw new IllegalArgumentException("'" + key + "' must be in (0, 700]");
    return d;
  }

  static double probability(Map<String, Object> m, String key) {
    double d = number(m, key);
    if (!(d > 0.5 && d < 1)) throw new IllegalArgumentException("'" + key + "' must be in (0.5, 1)");
    return d;
  }

  static int asInt(Object v, String key, int low, int high) {
    if (!(v instanceof Long) && !(v instanceof Integer)) throw new IllegalArgumentException("'" + key + "' must be an integer");
    long n = ((Number) v).longValue();
    if (n < low || n > high) throw new IllegalArgumentException("'" + key + "' must be in [" + low + ", " + high + "]");
    return (int) n;
  }

  static int integer(Map<String, Object> m, String key, int low, int high) {
    return asInt(required(m, key), key, low, high);
  }

  static int domain(Map<String, Object> m) {
    return integer(m, "domain_size", 2, 1 << 20);
  }

  @SuppressWarnings("unchecked")
  static List<Object> list(Map<String, Object> m, String key) {
    Object v = required(m, key);
    if (!(v instanceof List)) throw new IllegalArgumentException("'" + key + "' must be a list");
    return (List<Object>) v;
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> map(Object v, String key) {
    if (!(v instanceof Map)) throw new IllegalArgumentException("'" + key + "' must be an object");
    return (Map<String, Object>) v;
  }
}
