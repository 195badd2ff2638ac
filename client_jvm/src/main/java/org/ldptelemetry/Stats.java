package org.ldptelemetry;

import java.util.LinkedHashMap;
import java.util.Map;

/** Thread-safe counts of what happened to reports: {@code Client.stats()}. */
final class Stats {
  static final String[] DROP_REASONS = {
    "unknown_metric", "invalid_value", "invalid_dimensions", "unreachable", "queue_full", "rejected", "too_large",
    "shutdown", "internal_error", "budget", "device_budget", "disabled", "storage_error", "retired", "bundle_mismatch",
  };
  static final String[] COUNTERS = {"reported", "sent", "accepted", "duplicates", "batches", "retries"};

  private final Map<String, Long> counts = new LinkedHashMap<>();
  private final Map<String, Long> dropped = new LinkedHashMap<>();
  private volatile String lastError;

  Stats() {
    for (String c : COUNTERS) counts.put(c, 0L);
    for (String r : DROP_REASONS) dropped.put(r, 0L);
  }

  synchronized void add(String counter, long n) {
    counts.put(counter, counts.get(counter) + n);
  }

  synchronized void drop(String reason, long n) {
    dropped.put(reason, dropped.get(reason) + n);
  }

  /** Every report dropped so far, whatever the reason. */
  synchronized long droppedTotal() {
    long total = 0;
    for (long n : dropped.values()) total += n;
    return total;
  }

  void error(String what) {
    lastError = what;
  }

  synchronized Map<String, Object> snapshot() {
    Map<String, Object> out = new LinkedHashMap<>(counts);
    out.put("dropped", new LinkedHashMap<>(dropped));
    out.put("last_error", lastError);
    return out;
  }
}
