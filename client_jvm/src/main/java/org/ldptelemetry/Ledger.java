package org.ldptelemetry;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The device's privacy ledger (docs/protocol.md §7): ε charged per metric and UTC day, a
 * metric's budget per period, device-wide caps per day and over the lifetime (a memoized
 * metric counting at most its ε∞). Sequential composition: m reports at ε each are
 * together (m·ε)-LDP. Not thread-safe: the store holds it under its lock.
 */
final class Ledger {
  static final double EPSILON_SLACK = 1e-9;
  static final int KEEP_DAYS = 45; // the longest period (a month) and then some
  static final String ACCOUNTING = "Sequential composition: m reports at ε each are together (m·ε)-LDP.";

  /** metric → day number → {reports, ε}. */
  final Map<String, TreeMap<Integer, double[]>> days = new HashMap<>();
  /** metric → {reports, ε, first day}. */
  final Map<String, double[]> lifetime = new LinkedHashMap<>();
  /** metric → ε∞ of a memoized metric. */
  final Map<String, Double> permanent = new HashMap<>();

  /** What one report costs and what its metric's budget allows. */
  static final class Charge {
    final String metric;
    final double epsilon;
    final int day;
    final int since;
    final int limit; // reports per period, 0: no budget
    final double permanent; // ε∞, NaN: not memoized

    Charge(String metric, double epsilon, int day, int since, int limit, double permanent) {
      this.metric = metric;
      this.epsilon = epsilon;
      this.day = day;
      this.since = since;
      this.limit = limit;
      this.permanent = permanent;
    }
  }

  /** Caps on the device's total ε: per UTC day and over its lifetime (NaN: no cap). */
  static final class Caps {
    final double perDay;
    final double lifetime;

    Caps(double perDay, double lifetime) {
      this.perDay = perDay;
      this.lifetime = lifetime;
    }

    static double least(double a, double b) {
      return Double.isNaN(a) ? b : Double.isNaN(b) ? a : Math.min(a, b);
    }

    /** Cap by cap, the stricter of this and {@code other} (null: this). */
    Caps stricter(Caps other) {
      return other == null ? this : new Caps(least(perDay, other.perDay), least(lifetime, other.lifetime));
    }

    Map<String, Object> toMap() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("epsilon_per_day", Double.isNaN(perDay) ? null : perDay);
      m.put("epsilon_lifetime", Double.isNaN(lifetime) ? null : lifetime);
      return m;
    }

    /** A server's {@code device_budget} (null or {} for none). */
    static Caps parse(Object data) {
      if (data == null) return null;
      Map<String, Object> m = Params.map(data, "device_budget");
      double perDay = cap(m.get("epsilon_per_day"));
      double life = cap(m.get("epsilon_lifetime"));
      return Double.isNaN(perDay) && Double.isNaN(life) ? null : new Caps(perDay, life);
    }

    private static double cap(Object v) {
      if (v == null) return Double.NaN;
      if (!(v instanceof Number)) throw new IllegalArgumentException("a device cap is a number");
      double d = ((Number) v).doubleValue();
      if (!(d > 0 && d <= 1e9)) throw new IllegalArgumentException("a device cap is in (0, 1e9]");
      return d;
    }
  }

  /** Reports and ε charged to {@code metric} from day {@code since} to {@code until}, inclusive. */
  double[] spent(String metric, int since, int until) {
    double reports = 0;
    double eps = 0;
    TreeMap<Integer, double[]> byDay = days.get(metric);
    if (byDay != null) {
      for (double[] row : byDay.subMap(since, true, until, true).values()) {
        reports += row[0];
        eps += row[1];
      }
    }
    return new double[] {reports, eps};
  }

  private double cappedTerm(String metric, double eps, Charge charge) {
    double cap = metric.equals(charge.metric) && !Double.isNaN(charge.permanent) ? charge.permanent : permanent.getOrDefault(metric, Double.POSITIVE_INFINITY);
    return Math.min(eps, cap);
  }

  /** Why {@code charge} may not be made ("budget", "device_budget"), or null. */
  String refusal(Charge charge, Caps caps) {
    if (charge.limit > 0) {
      double[] s = spent(charge.metric, charge.since, charge.day);
      double allowed = charge.limit * charge.epsilon * (1 + EPSILON_SLACK);
      if (s[0] + 1 > charge.limit || s[1] + charge.epsilon > allowed) return "budget";
    }
    if (caps != null) {
      if (!Double.isNaN(caps.perDay)) {
        double before = 0;
        double mine = 0;
        for (Map.Entry<String, TreeMap<Integer, double[]>> e : days.entrySet()) {
          double[] row = e.getValue().get(charge.day);
          if (row == null) continue;
          before += cappedTerm(e.getKey(), row[1], charge);
          if (e.getKey().equals(charge.metric)) mine = row[1];
        }
        if (exceeds(before, mine, charge, caps.perDay)) return "device_budget";
      }
      if (!Double.isNaN(caps.lifetime)) {
        double before = 0;
        double mine = 0;
        for (Map.Entry<String, double[]> e : lifetime.entrySet()) {
          before += cappedTerm(e.getKey(), e.getValue()[1], charge);
          if (e.getKey().equals(charge.metric)) mine = e.getValue()[1];
        }
        if (exceeds(before, mine, charge, caps.lifetime)) return "device_budget";
      }
    }
    return null;
  }

  private boolean exceeds(double before, double mine, Charge charge, double cap) {
    double after = before - cappedTerm(charge.metric, mine, charge) + cappedTerm(charge.metric, mine + charge.epsilon, charge);
    return after > before && after > cap * (1 + EPSILON_SLACK);
  }

  /** Add (sign 1) or refund (sign −1) a charge; days long past are forgotten. */
  void apply(Charge charge, int sign) {
    TreeMap<Integer, double[]> byDay = days.get(charge.metric);
    if (byDay == null) days.put(charge.metric, byDay = new TreeMap<>());
    double[] row = byDay.get(charge.day);
    if (row == null) byDay.put(charge.day, row = new double[2]);
    row[0] += sign;
    row[1] += sign * charge.epsilon;
    double[] life = lifetime.get(charge.metric);
    if (life == null) lifetime.put(charge.metric, life = new double[] {0, 0, charge.day});
    life[0] += sign;
    life[1] += sign * charge.epsilon;
    if (charge.day < life[2]) life[2] = charge.day;
    if (!Double.isNaN(charge.permanent)) permanent.put(charge.metric, charge.permanent);
    if (sign > 0 && row[0] == 1) byDay.headMap(charge.day - KEEP_DAYS).clear();
  }

  /** The latest day the ledger holds a charge on (−1: none). */
  int latestDay() {
    int latest = -1;
    for (TreeMap<Integer, double[]> byDay : days.values()) if (!byDay.isEmpty()) latest = Math.max(latest, byDay.lastKey());
    return latest;
  }

  // -- UTC days without java.time (Android before API 26) ---------------------------------

  static int dayOf(long millis) {
    return (int) Math.floorDiv(millis, 86_400_000L);
  }

  /** The ISO date (YYYY-MM-DD) of a day number (days since 1970-01-01). */
  static String iso(int day) {
    int[] ymd = civil(day);
    StringBuilder out = new StringBuilder(10);
    out.append(ymd[0]).append('-');
    if (ymd[1] < 10) out.append('0');
    out.append(ymd[1]).append('-');
    if (ymd[2] < 10) out.append('0');
    return out.append(ymd[2]).toString();
  }

  /** {year, month, day} of a day number (H. Hinnant's civil_from_days). */
  static int[] civil(int z) {
    z += 719468;
    int era = Math.floorDiv(z, 146097);
    int doe = z - era * 146097;
    int yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int y = yoe + era * 400;
    int doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int mp = (5 * doy + 2) / 153;
    int d = doy - (153 * mp + 2) / 5 + 1;
    int m = mp < 10 ? mp + 3 : mp - 9;
    return new int[] {m <= 2 ? y + 1 : y, m, d};
  }

  /** The first day of the budget period ("day", "week" from Monday, "month") containing {@code day}. */
  static int periodStart(int day, String period) {
    if (period == null || period.equals("day")) return day;
    if (period.equals("week")) return day - Math.floorMod(day + 3, 7); // 1970-01-01 was a Thursday
    return day - (civil(day)[2] - 1);
  }
}
