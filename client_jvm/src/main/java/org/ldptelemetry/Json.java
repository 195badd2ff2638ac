package org.ldptelemetry;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * JSON as the protocol writes it: a reader (objects keep their key order; integers are
 * Long or BigInteger, other numbers Double) and a writer that writes what Python's
 * {@code json.dumps(obj, separators=(",", ":"))} does: non-ASCII and DEL as lower-case
 * {@code \\uXXXX}, floats as Python's repr (docs/protocol.md §1).
 */
public final class Json {
  private Json() {}

  /**
   * Parse JSON text.
   *
   * @throws IllegalArgumentException the text is not one JSON value
   */
  public static Object parse(String text) {
    Parser p = new Parser(text);
    p.space();
    Object value = p.value(0);
    p.space();
    if (p.at != text.length()) throw p.error("trailing characters");
    return value;
  }

  /** The compact JSON of a value: Map, List, String, Number, Boolean or null. */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out);
    return out.toString();
  }

  static void write(Object value, StringBuilder out) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String) {
      string((String) value, out);
    } else if (value instanceof Double || value instanceof Float) {
      Exact.pyRepr(((Number) value).doubleValue(), out);
    } else if (value instanceof Number || value instanceof Boolean) {
      out.append(value);
    } else if (value instanceof Map) {
      object((Map<?, ?>) value, out, Json::write);
    } else if (value instanceof List) {
      array((List<?>) value, out, Json::write);
    } else if (value instanceof int[]) {
      out.append('[');
      int[] items = (int[]) value;
      for (int i = 0; i < items.length; i++) {
        if (i > 0) out.append(',');
        out.append(items[i]);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("not JSON: " + value.getClass().getName());
    }
  }

  /** A JSON object in the map's key order, each value written by {@code value}. */
  static void object(Map<?, ?> map, StringBuilder out, BiConsumer<Object, StringBuilder> value) {
    out.append('{');
    boolean first = true;
    for (Map.Entry<?, ?> e : map.entrySet()) {
      if (!first) out.append(',');
      first = false;
      string(String.valueOf(e.getKey()), out);
      out.append(':');
      value.accept(e.getValue(), out);
    }
    out.append('}');
  }

  /** A JSON array, each item written by {@code item}. */
  static void array(List<?> items, StringBuilder out, BiConsumer<Object, StringBuilder> item) {
    out.append('[');
    boolean first = true;
    for (Object x : items) {
      if (!first) out.append(',');
      first = false;
      item.accept(x, out);
    }
    out.append(']');
  }

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** The one-character escapes after a backslash, and the characters they stand for. */
  private static final String ESCAPES = "\"\\/bfnrt";

  private static final String ESCAPED = "\"\\/\b\f\n\r\t";

  /** A JSON string as Python's ensure_ascii encoder writes it. */
  static void string(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0, n = s.length(); i < n; i++) {
      char c = s.charAt(i);
      if (c >= 0x20 && c < 0x7f) {
        if (c == '"' || c == '\\') out.append('\\');
        out.append(c);
        continue;
      }
      int simple = ESCAPED.indexOf(c); // a control character with a short escape
      if (simple >= 0) {
        out.append('\\').append(ESCAPES.charAt(simple));
      } else {
        out.append("\\u").append(HEX[c >>> 12]).append(HEX[(c >>> 8) & 15]).append(HEX[(c >>> 4) & 15]).append(HEX[c & 15]);
      }
    }
    out.append('"');
  }

  private static final int MAX_DEPTH = 64;

  private static final class Parser {
    final String s;
    int at;

    Parser(String s) {
      this.s = s;
    }

    IllegalArgumentException error(String what) {
      return new IllegalArgumentException("JSON: " + what + " at " + at);
    }

    void space() {
      while (at < s.length()) {
        char c = s.charAt(at);
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        at++;
      }
    }

    Object value(int depth) {
      if (depth > MAX_DEPTH) throw error("nested too deep");
      if (at >= s.length()) throw error("a value expected");
      char c = s.charAt(at);
      switch (c) {
        case '{':
          return object(depth);
        case '[':
          return array(depth);
        case '"':
          return string();
        case 't':
          return literal("true", Boolean.TRUE);
        case 'f':
          return literal("false", Boolean.FALSE);
        case 'n':
          return literal("null", null);
        default:
          if (c == '-' || (c >= '0' && c <= '9')) return number();
          throw error("unexpected character");
      }
    }

    Object literal(String word, Object value) {
      if (!s.startsWith(word, at)) throw error("unexpected word");
      at += word.length();
      return value;
    }

    Map<String, Object> object(int depth) {
      Map<String, Object> out = new LinkedHashMap<>();
      at++;
      space();
      if (eat('}')) return out;
      while (true) {
        space();
        if (at >= s.length() || s.charAt(at) != '"') throw error("a key expected");
        String key = string();
        space();
        expect(':');
        space();
        out.put(key, value(depth + 1));
        space();
        if (eat(',')) continue;
        expect('}');
        return out;
      }
    }

    List<Object> array(int depth) {
      List<Object> out = new ArrayList<>();
      at++;
      space();
      if (eat(']')) return out;
      while (true) {
        space();
        out.add(value(depth + 1));
        space();
        if (eat(',')) continue;
        expect(']');
        return out;
      }
    }

    /** Step over {@code c} if it comes next. */
    boolean eat(char c) {
      if (at >= s.length() || s.charAt(at) != c) return false;
      at++;
      return true;
    }

    void expect(char c) {
      if (!eat(c)) throw error("'" + c + "' expected");
    }

    String string() {
      at++;
      StringBuilder out = null;
      int start = at;
      while (true) {
        if (at >= s.length()) throw error("unterminated string");
        char c = s.charAt(at);
        if (c == '"') {
          String tail = s.substring(start, at);
          at++;
          return out == null ? tail : out.append(tail).toString();
        }
        if (c < 0x20) throw error("control character in a string");
        if (c != '\\') {
          at++;
          continue;
        }
        if (out == null) out = new StringBuilder();
        out.append(s, start, at);
        if (at + 1 >= s.length()) throw error("unterminated escape");
        char e = s.charAt(at + 1);
        at += 2;
        int simple = ESCAPES.indexOf(e);
        if (simple >= 0) {
          out.append(ESCAPED.charAt(simple));
        } else if (e == 'u') {
          if (at + 4 > s.length()) throw error("short \\u escape");
          try {
            out.append((char) Integer.parseInt(s.substring(at, at + 4), 16));
          } catch (NumberFormatException x) {
            throw error("bad \\u escape");
          }
          at += 4;
        } else {
          throw error("bad escape");
        }
        start = at;
      }
    }

    Number number() {
      int start = at;
      if (s.charAt(at) == '-') at++;
      boolean integer = true;
      while (at < s.length()) {
        char c = s.charAt(at);
        if (c >= '0' && c <= '9') {
          at++;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
          integer = false;
          at++;
        } else {
          break;
        }
      }
      String text = s.substring(start, at);
      try {
        if (integer) {
          if (text.length() < 19) return Long.parseLong(text);
          BigInteger big = new BigInteger(text);
          return big.bitLength() < 64 ? (Number) big.longValue() : big;
        }
        double d = Double.parseDouble(text);
        if (Double.isInfinite(d)) throw error("number out of range");
        return d;
      } catch (NumberFormatException x) {
        throw error("bad number");
      }
    }
  }
}
