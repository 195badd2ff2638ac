package org.ldptelemetry;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A metric definition as {@code GET /v1/metrics/<name>} serves it, and the report of a
 * value built from it (docs/protocol.md §1, §8): the value checked, perturbed by the
 * metric's mechanism and written as the exact JSON the collector takes.
 */
final class Definition {
  final String name;
  final long version;
  final String kind;
  final List<String> domain;
  private final Map<String, Integer> index;
  final double low;
  final double high;
  final int maxLength;
  final String[] attributeNames;
  final List<List<String>> attributeLabels;
  final String[] dimensionNames;
  final List<List<String>> dimensionValues;
  final int budgetReports; // 0: no budget
  final String budgetPeriod;
  final Mechanism mechanism;
  final Map<String, Object> raw;
  final boolean retired;
  private final String quotedName;

  private Definition(Map<String, Object> data) {
    raw = data;
    name = Params.string(data, "name");
    if (name.isEmpty() || name.length() > 200) throw new IllegalArgumentException("'name' must be a metric name");
    Object v = Params.required(data, "version");
    if (!(v instanceof Long) || (Long) v < 1) throw new IllegalArgumentException("'version' must be a positive integer");
    version = (Long) v;
    kind = data.get("kind") == null ? "categorical" : Params.string(data, "kind");
    mechanism = Mechanism.build(Params.map(Params.required(data, "mechanism"), "mechanism"));
    retired = data.get("retired_at") != null;
    StringBuilder q = new StringBuilder();
    Json.string(name, q);
    quotedName = q.toString();
    List<String> dom = Collections.emptyList();
    Map<String, Integer> idx = Collections.emptyMap();
    double lo = 0;
    double hi = 0;
    int maxLen = 0;
    String[] attrNames = new String[0];
    List<List<String>> attrLabels = new ArrayList<>();
    switch (kind) {
      case "categorical":
        dom = strings(Params.list(data, "domain"), "domain");
        if (mechanism.domainSize() != dom.size()) throw new IllegalArgumentException("the mechanism's domain_size is the domain's");
        idx = new HashMap<>();
        for (int i = 0; i < dom.size(); i++) idx.put(dom.get(i), i);
        break;
      case "numeric":
      case "distribution":
        {
          List<Object> range = Params.list(data, "range");
          if (range.size() != 2 || !(range.get(0) instanceof Number) || !(range.get(1) instanceof Number)) {
            throw new IllegalArgumentException("'range' is [low, high]");
          }
          lo = ((Number) range.get(0)).doubleValue();
          hi = ((Number) range.get(1)).doubleValue();
          if (!(lo < hi)) throw new IllegalArgumentException("'range' is [low, high] with low < high");
          if (kind.equals("numeric") != (mechanism instanceof Mechanism.Numeric)
              || kind.equals("distribution") != (mechanism instanceof Mechanism.Binned)) {
            throw new IllegalArgumentException("a numeric metric's mechanism is duchi, pm or hybrid; a distribution's hh or haar");
          }
          break;
        }
      case "string":
        if (!(mechanism instanceof Mechanism.Sketch)) throw new IllegalArgumentException("a string metric's mechanism is string-sketch");
        maxLen = ((Mechanism.Sketch) mechanism).levels;
        break;
      case "joint":
        {
          List<Object> attributes = Params.list(data, "attributes");
          if (!(mechanism instanceof Mechanism.Joint) || ((Mechanism.Joint) mechanism).sizes.length != attributes.size()) {
            throw new IllegalArgumentException("a joint metric's mechanism is joint, one size per attribute");
          }
          attrNames = new String[attributes.size()];
          for (int i = 0; i < attrNames.length; i++) {
            Map<String, Object> a = Params.map(attributes.get(i), "attributes");
            attrNames[i] = Params.string(a, "name");
            List<String> labels = strings(Params.list(a, "domain"), "attributes");
            if (labels.size() != ((Mechanism.Joint) mechanism).sizes[i]) throw new IllegalArgumentException("an attribute's size");
            attrLabels.add(labels);
          }
          break;
        }
      default:
        throw new IllegalArgumentException("unknown kind " + kind);
    }
    domain = dom;
    index = idx;
    low = lo;
    high = hi;
    maxLength = maxLen;
    attributeNames = attrNames;
    attributeLabels = attrLabels;
    Object dims = data.get("dimensions");
    List<List<String>> dimValues = new ArrayList<>();
    String[] dimNames = new String[0];
    if (dims != null) {
      if (!(dims instanceof List)) throw new IllegalArgumentException("'dimensions' must be a list");
      List<?> list = (List<?>) dims;
      dimNames = new String[list.size()];
      for (int i = 0; i < dimNames.length; i++) {
        Map<String, Object> d = Params.map(list.get(i), "dimensions");
        dimNames[i] = Params.string(d, "name");
        dimValues.add(strings(Params.list(d, "values"), "dimensions"));
      }
    }
    dimensionNames = dimNames;
    dimensionValues = dimValues;
    Object budget = data.get("budget");
    if (budget != null) {
      Map<String, Object> b = Params.map(budget, "budget");
      budgetReports = Params.integer(b, "reports_per_period", 1, Integer.MAX_VALUE);
      budgetPeriod = Params.string(b, "period");
      if (!budgetPeriod.equals("day") && !budgetPeriod.equals("week") && !budgetPeriod.equals("month")) {
        throw new IllegalArgumentException("a budget's period is day, week or month");
      }
    } else {
      budgetReports = 0;
      budgetPeriod = null;
    }
  }

  private static List<String> strings(List<Object> items, String key) {
    List<String> out = new ArrayList<>(items.size());
    for (Object o : items) {
      if (!(o instanceof String)) throw new IllegalArgumentException("'" + key + "' holds strings");
      out.add((String) o);
    }
    return Collections.unmodifiableList(out);
  }

  /**
   * A definition from its parsed JSON.
   *
   * @throws IllegalArgumentException not a definition this SDK can report with
   */
  static Definition parse(Object data) {
    return new Definition(Params.map(data, "definition"));
  }

  boolean longitudinal() {
    return mechanism instanceof Mechanism.Memo;
  }

  double epsilon() {
    return mechanism.epsilon;
  }

  /** ε∞ of a memoized metric (what it counts at most towards device-wide totals), else NaN. */
  double permanentEpsilon() {
    return mechanism instanceof Mechanism.Memo ? ((Mechanism.Memo) mechanism).permanentEpsilon : Double.NaN;
  }

  private static boolean isInteger(Object v) {
    return v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte;
  }

  /** The index of a categorical value given as a label or an index. */
  int index(Object value) {
    if (value instanceof String) {
      Integer i = index.get(value);
      if (i == null) throw new IllegalArgumentException("not a label of the metric's domain");
      return i;
    }
    if (isInteger(value)) {
      long i = ((Number) value).longValue();
      if (i < 0 || i >= domain.size()) throw new IllegalArgumentException("index outside the metric's domain");
      return (int) i;
    }
    throw new IllegalArgumentException("a categorical metric takes a label (String) or an index (int)");
  }

  /** A joint value as attribute indices: a Map naming every attribute, or a List in order. */
  int[] jointIndices(Object value) {
    int n = attributeNames.length;
    Object[] items = new Object[n];
    if (value instanceof Map) {
      Map<?, ?> m = (Map<?, ?>) value;
      if (m.size() != n) throw new IllegalArgumentException("a joint value names every attribute once");
      for (int i = 0; i < n; i++) {
        if (!m.containsKey(attributeNames[i])) throw new IllegalArgumentException("a joint value names every attribute");
        items[i] = m.get(attributeNames[i]);
      }
    } else if (value instanceof List && ((List<?>) value).size() == n) {
      items = ((List<?>) value).toArray();
    } else if (value instanceof Object[] && ((Object[]) value).length == n) {
      items = (Object[]) value;
    } else {
      throw new IllegalArgumentException("a joint value is a Map of attribute to label, or the labels in order");
    }
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      List<String> labels = attributeLabels.get(i);
      Object item = items[i];
      int at = item instanceof String ? labels.indexOf(item) : isInteger(item) ? (int) Math.max(-1, Math.min(Integer.MAX_VALUE, ((Number) item).longValue())) : -1;
      if (at < 0 || at >= labels.size()) throw new IllegalArgumentException("attribute " + attributeNames[i] + " has no such value");
      out[i] = at;
    }
    return out;
  }

  /** Whether {@code given} names every declared dimension once with an allowed value (null for none). */
  void checkDimensions(Map<String, String> given) {
    if (dimensionNames.length == 0) {
      if (given != null) throw new IllegalArgumentException("the metric declares no dimensions");
      return;
    }
    if (given == null || given.size() != dimensionNames.length) {
      throw new IllegalArgumentException("a report gives every declared dimension");
    }
    for (int i = 0; i < dimensionNames.length; i++) {
      Object v = given.get(dimensionNames[i]);
      if (!(v instanceof String) || !dimensionValues.get(i).contains(v)) {
        throw new IllegalArgumentException("dimension " + dimensionNames[i] + " takes one of " + dimensionValues.get(i));
      }
    }
  }

  /**
   * Perturb {@code value} and write the report's exact JSON (§1) to {@code out}.
   *
   * @param version the version written (negative: a bundled definition not yet vetted)
   * @throws IllegalArgumentException an invalid value or dimensions (checked before anything is drawn)
   */
  void writeReport(Object value, Map<String, String> dimensions, Rng rng, byte[] secret, String id, long version, StringBuilder out) {
    checkDimensions(dimensions);
    int start = out.length();
    out.append("{\"metric\":").append(quotedName).append(",\"version\":").append(version);
    out.append(",\"id\":\"").append(id).append("\",\"payload\":");
    try {
      payload(value, rng, secret, out);
    } catch (RuntimeException e) {
      out.setLength(start);
      throw e;
    }
    if (dimensionNames.length > 0) {
      out.append(",\"dimensions\":{");
      for (int i = 0; i < dimensionNames.length; i++) {
        if (i > 0) out.append(',');
        Json.string(dimensionNames[i], out);
        out.append(':');
        Json.string(dimensions.get(dimensionNames[i]), out);
      }
      out.append('}');
    }
    out.append('}');
  }

  /** The perturbed payload of {@code value}. */
  void payload(Object value, Rng rng, byte[] secret, StringBuilder out) {
    switch (kind) {
      case "numeric":
      case "distribution":
        {
          if (!(value instanceof Number)) {
            throw new IllegalArgumentException("a numeric metric takes a number");
          }
          double x = ((Number) value).doubleValue();
          if (!(x >= low && x <= high)) throw new IllegalArgumentException("value outside the metric's range (or not finite)");
          if (mechanism instanceof Mechanism.Binned) {
            ((Mechanism.Binned) mechanism).perturbValue(x, low, high, rng, out);
          } else {
            ((Mechanism.Numeric) mechanism).perturbScaled(Mechanism.scale(x, low, high), rng, out);
          }
          return;
        }
      case "string":
        if (!(value instanceof CharSequence)) throw new IllegalArgumentException("a string metric takes a String");
        ((Mechanism.Sketch) mechanism).perturbPadded(Mechanism.normalise(value.toString(), maxLength), rng, out);
        return;
      case "joint":
        ((Mechanism.Joint) mechanism).perturbTuple(jointIndices(value), rng, out);
        return;
      default:
        int i = index(value);
        if (mechanism instanceof Mechanism.Memo) {
          if (secret == null) throw new IllegalStateException("a longitudinal metric needs the device secret");
          ((Mechanism.Memo) mechanism).perturbMemoized(i, secret, name, this.version, rng, out);
        } else {
          mechanism.perturb(i, rng, out);
        }
    }
  }

  /** The fields that decide how reports are decoded, to compare two definitions' versions. */
  private Map<String, Object> decoding() {
    Map<String, Object> m = new TreeMap<>();
    for (String key : new String[] {"domain", "mechanism", "kind", "range", "attributes", "dimensions", "shards"}) {
      m.put(key, raw.get(key));
    }
    if (longitudinal()) m.put("budget", raw.get("budget"));
    return m;
  }

  /** Whether two definitions decode reports identically (client_sdk's same_parameters). */
  boolean sameParameters(Definition other) {
    return canonical(decoding()).equals(canonical(other.decoding()));
  }

  /** JSON with sorted keys and numbers as floats, to compare parameters. */
  static String canonical(Object x) {
    StringBuilder out = new StringBuilder();
    canonical(x, out);
    return out.toString();
  }

  private static void canonical(Object x, StringBuilder out) {
    if (x instanceof Map) {
      Json.object(new TreeMap<>((Map<?, ?>) x), out, Definition::canonical);
    } else if (x instanceof List) {
      Json.array((List<?>) x, out, Definition::canonical);
    } else if (x instanceof Number && !(x instanceof java.math.BigInteger)) {
      Exact.pyRepr(((Number) x).doubleValue(), out);
    } else {
      Json.write(x, out);
    }
  }
}
