package org.ldptelemetry;

import java.io.IOException;
import java.text.ParseException;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TimeZone;

/**
 * The upload thread: batches queued reports and delivers them. Every outcome is classified
 * in one place ({@link #classify}): 2xx ok; no answer, 408, 429 and 5xx except 501 retry
 * with full-jitter backoff (1 s → 30 s, ×2, a 30 s pause after every third failure in a
 * row, Retry-After a lower bound); anything else drops the batch (a 413 halves the batch
 * size first). A 503 that lists {@code retry} positions (storage took the rest: a cluster
 * shard down, say) keeps only those. A report leaves the store only after an ok or a drop
 * (docs/protocol.md §1).
 */
final class Uploader {
  static final long RETRY_BASE = 1_000;
  static final long RETRY_CAP = 30_000;
  static final int FAILURES_PER_RUN = 3;
  static final long RETRY_AFTER_CAP = 600_000;
  static final String REPORTS_PATH = "/v1/reports";

  /** What the client does for the uploader. */
  interface Host {
    Transport.Response post(byte[] body) throws IOException;

    /** Entries to send (their data possibly rewritten) and those refused, or throws to retry later. */
    List<Store.Entry> vet(List<Store.Entry> batch, List<Store.Entry> refused) throws IOException;

    void rejected(Set<String> metrics);

    void retired(Set<String> metrics);

    long now(); // monotonic ms

    long wallclock(); // Unix ms
  }

  private final Store store;
  private final Host host;
  private final Stats stats;
  private final int flushAt;
  private final long flushInterval;
  private int batchLimit;
  private final long bodyLimit;
  private final Object lock = new Object();
  private Thread thread;
  private boolean stopping;
  private boolean flushRequested;
  private long pendingSince = -1;
  private int failures;
  private int pauses;
  private boolean paused;
  private final java.util.Random jitter = new java.util.Random();

  Uploader(Store store, Host host, Stats stats, int flushAt, long flushIntervalMillis, int maxBatchReports, long maxBatchBytes) {
    this.store = store;
    this.host = host;
    this.stats = stats;
    this.flushAt = flushAt;
    this.flushInterval = flushIntervalMillis;
    this.batchLimit = maxBatchReports;
    this.bodyLimit = maxBatchBytes - "{\"reports\":[]}".length();
  }

  /** ok, retry or drop: the one place an upload's outcome is decided. */
  static String classify(int status, boolean answered) {
    if (!answered) return "retry";
    if (status >= 200 && status < 300) return "ok";
    if (status == 408 || status == 429 || (status >= 500 && status < 600 && status != 501)) return "retry";
    return "drop";
  }

  private static final ThreadLocal<SimpleDateFormat> HTTP_DATE =
      new ThreadLocal<SimpleDateFormat>() {
        @Override
        protected SimpleDateFormat initialValue() {
          SimpleDateFormat f = new SimpleDateFormat("EEE, dd MMM yyyy HH:mm:ss zzz", Locale.US);
          f.setTimeZone(TimeZone.getTimeZone("GMT"));
          f.setLenient(false);
          return f;
        }
      };

  /** Milliseconds to wait from a Retry-After header (seconds or an HTTP date), or −1. */
  static long parseRetryAfter(String value, long nowMillis) {
    if (value == null) return -1;
    String v = value.trim();
    boolean digits = !v.isEmpty() && v.length() < 12;
    for (int i = 0; digits && i < v.length(); i++) digits = v.charAt(i) >= '0' && v.charAt(i) <= '9';
    if (digits) return Long.parseLong(v) * 1000;
    try {
      return Math.max(0, HTTP_DATE.get().parse(v).getTime() - nowMillis);
    } catch (ParseException e) {
      return -1;
    }
  }

  /** The wait after {@code failures} recoverable failures in a row; {@code retryAfter} −1 if none. */
  static long backoff(int failures, long retryAfter, double uniform) {
    long delay =
        failures % FAILURES_PER_RUN == 0
            ? RETRY_CAP
            : (long) (uniform * Math.min(RETRY_CAP, RETRY_BASE * (1L << Math.min(failures - 1, 16))));
    if (retryAfter >= 0) delay = Math.max(delay, Math.min(retryAfter, RETRY_AFTER_CAP));
    return delay;
  }

  // -- called from app threads -------------------------------------------------------------

  void notifyQueued(int queued) {
    if (thread == null) ensureStarted();
    if (queued == 1 || queued >= flushAt) {
      synchronized (lock) {
        lock.notifyAll();
      }
    }
  }

  void ensureStarted() {
    synchronized (lock) {
      if (thread != null || stopping) return;
      thread = new Thread(this::run, "ldp-telemetry-upload");
      thread.setDaemon(true);
      thread.start();
    }
  }

  boolean alive() {
    Thread t = thread;
    return t != null && t.isAlive();
  }

  /** Send everything now; wait until the queue is empty, uploads pause after failures, or the time is up. */
  boolean flush(long timeoutMillis) {
    if (store.size() == 0) return true;
    ensureStarted();
    long deadline = timeoutMillis < 0 ? Long.MAX_VALUE : System.nanoTime() / 1_000_000 + timeoutMillis;
    synchronized (lock) {
      flushRequested = true;
      int seenPauses = pauses;
      lock.notifyAll();
      while (store.size() > 0) {
        if (!alive()) return false;
        if (timeoutMillis < 0 && (paused || pauses != seenPauses)) return false;
        long wait = 100;
        if (timeoutMillis >= 0) {
          wait = Math.min(wait, deadline - System.nanoTime() / 1_000_000);
          if (wait <= 0) return false;
        }
        try {
          lock.wait(wait);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return false;
        }
      }
      return true;
    }
  }

  /** Stop after the current request; wait for the thread at most {@code timeoutMillis}. */
  void stop(long timeoutMillis) {
    Thread t;
    synchronized (lock) {
      stopping = true;
      lock.notifyAll();
      t = thread;
    }
    if (t != null && t != Thread.currentThread()) {
      try {
        t.join(Math.max(1, timeoutMillis));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  // -- the thread --------------------------------------------------------------------------

  private void run() {
    while (true) {
      synchronized (lock) {
        if (!waitUntilDue()) return;
      }
      try {
        drain();
      } catch (Exception | LinkageError e) {
        stats.error(e.getClass().getSimpleName());
        waitFor(RETRY_CAP);
      }
    }
  }

  /** With the lock: wait until a batch is due; false when stopping. */
  private boolean waitUntilDue() {
    while (!stopping) {
      int queued = store.size();
      try {
        if (queued == 0) {
          pendingSince = -1;
          flushRequested = false;
          lock.notifyAll();
          lock.wait();
          continue;
        }
        long now = host.now();
        if (pendingSince < 0) pendingSince = now;
        if (queued >= flushAt || flushRequested) return true;
        long remaining = pendingSince + flushInterval - now;
        if (remaining <= 0) return true;
        lock.wait(remaining);
      } catch (InterruptedException e) {
        return false;
      }
    }
    return false;
  }

  private void drain() throws IOException {
    while (!stopping) {
      List<Store.Entry> entries = store.peek(batchLimit, bodyLimit);
      if (entries.isEmpty()) return;
      long delay = attempt(entries);
      synchronized (lock) {
        pendingSince = -1;
        lock.notifyAll();
      }
      if (delay >= 0) {
        waitFor(delay);
        synchronized (lock) {
          paused = false;
        }
      }
    }
  }

  private void waitFor(long millis) {
    long end = System.nanoTime() / 1_000_000 + millis;
    synchronized (lock) {
      while (!stopping) {
        long left = end - System.nanoTime() / 1_000_000;
        if (left <= 0) return;
        try {
          lock.wait(left);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
  }

  /** Send one batch and act on the outcome; the delay before the next try, or −1. */
  private long attempt(List<Store.Entry> entries) throws IOException {
    List<Store.Entry> refused = new ArrayList<>();
    try {
      entries = host.vet(entries, refused);
    } catch (IOException e) {
      return failed(null, e);
    }
    if (!refused.isEmpty()) {
      stats.drop("bundle_mismatch", refused.size());
      store.ack(refused);
    }
    if (entries.isEmpty()) return -1;
    store.attempted(entries); // charged, on disk, before anything leaves
    int size = 14;
    for (Store.Entry e : entries) size += e.data.length + 1;
    byte[] body = new byte[size];
    int at = 0;
    for (byte b : "{\"reports\":[".getBytes(java.nio.charset.StandardCharsets.US_ASCII)) body[at++] = b;
    for (int i = 0; i < entries.size(); i++) {
      if (i > 0) body[at++] = ',';
      byte[] d = entries.get(i).data;
      System.arraycopy(d, 0, body, at, d.length);
      at += d.length;
    }
    body[at++] = ']';
    body[at++] = '}';
    body = java.util.Arrays.copyOf(body, at);
    Transport.Response response;
    try {
      response = host.post(body);
    } catch (IOException | RuntimeException e) {
      return failed(null, e);
    }
    String outcome = classify(response.status(), true);
    if (outcome.equals("ok")) {
      failures = 0;
      delivered(entries, response);
      return -1;
    }
    if (outcome.equals("drop")) {
      failures = 0;
      int status = response.status();
      stats.error("HTTP " + status);
      if (status == 413 && entries.size() > 1) {
        batchLimit = Math.max(1, entries.size() / 2);
        return -1;
      }
      Set<String> retired = retiredOf(answer(response));
      int gone = 0;
      Set<String> others = new HashSet<>();
      for (Store.Entry e : entries) {
        if (retired.contains(e.metric)) gone++;
        else others.add(e.metric);
      }
      if (entries.size() > gone) stats.drop(status == 413 ? "too_large" : "rejected", entries.size() - gone);
      if (status != 413) host.rejected(others);
      store.ack(entries);
      retire(retired, gone);
      return -1;
    }
    Set<Integer> later = response.status() == 503 ? positions(answer(response), "retry", entries.size()) : Collections.emptySet();
    if (!later.isEmpty() && later.size() < entries.size()) {
      // Storage took the rest of the batch (a cluster shard down, say): those leave the
      // queue, only the positions of retry are sent again; with progress made the
      // backoff starts over (Retry-After still holds).
      delivered(entries, response, later);
      failures = 0;
    }
    return failed(response, null);
  }

  private long failed(Transport.Response response, Exception error) {
    failures++;
    stats.add("retries", 1);
    stats.error(error != null ? error.getClass().getSimpleName() : "HTTP " + response.status());
    long retryAfter = response == null ? -1 : parseRetryAfter(response.header("retry-after"), host.wallclock());
    double u;
    synchronized (jitter) {
      u = jitter.nextDouble();
    }
    long delay = backoff(failures, retryAfter, u);
    if (delay >= RETRY_CAP) {
      synchronized (lock) {
        pauses++;
        paused = true;
        lock.notifyAll();
      }
    }
    return delay;
  }

  private static Map<String, Object> answer(Transport.Response response) {
    try {
      Object o = Json.parse(new String(response.body(), java.nio.charset.StandardCharsets.UTF_8));
      return o instanceof Map ? Params.map(o, "answer") : new java.util.HashMap<>();
    } catch (RuntimeException e) {
      return new java.util.HashMap<>();
    }
  }

  private static Set<String> retiredOf(Map<String, Object> answer) {
    Set<String> out = new HashSet<>();
    Object items = answer.get("retired");
    if (items instanceof List) {
      for (Object item : (List<?>) items) {
        if (item instanceof Map && ((Map<?, ?>) item).get("metric") instanceof String) out.add((String) ((Map<?, ?>) item).get("metric"));
      }
    }
    return out;
  }

  /** The positions an answer's list {@code field} names in a batch of {@code size} (others
   *  passed over): {@code rejected}, refused for good; {@code retry}, not stored now. */
  private static Set<Integer> positions(Map<String, Object> answer, String field, int size) {
    Set<Integer> out = new HashSet<>();
    Object items = answer.get(field);
    if (items instanceof List) {
      for (Object item : (List<?>) items) {
        Object index = item instanceof Map ? ((Map<?, ?>) item).get("index") : null;
        if (index instanceof Long && (Long) index >= 0 && (Long) index < size) out.add(((Long) index).intValue());
      }
    }
    return out;
  }

  private void delivered(List<Store.Entry> entries, Transport.Response response) throws IOException {
    delivered(entries, response, Collections.emptySet());
  }

  /** A batch the collector answered: every report leaves the queue (those it rejected
   *  dropped) but the positions of {@code later}, which it did not store now. */
  private void delivered(List<Store.Entry> entries, Transport.Response response, Set<Integer> later) throws IOException {
    Map<String, Object> answer = answer(response);
    Set<Integer> rejected = positions(answer, "rejected", entries.size());
    rejected.removeAll(later);
    Set<String> retired = retiredOf(answer);
    int delivered = entries.size() - rejected.size() - later.size();
    Object accepted = answer.get("accepted");
    Object duplicates = answer.get("duplicates");
    if (later.isEmpty()) stats.add("batches", 1);
    stats.add("sent", delivered);
    stats.add("accepted", accepted instanceof Long ? (Long) accepted : delivered);
    stats.add("duplicates", duplicates instanceof Long ? (Long) duplicates : 0);
    int gone = 0;
    Set<String> bad = new HashSet<>();
    int badCount = 0;
    for (int i : rejected) {
      if (retired.contains(entries.get(i).metric)) {
        gone++;
      } else {
        badCount++;
        bad.add(entries.get(i).metric);
      }
    }
    if (badCount > 0) {
      stats.drop("rejected", badCount);
      host.rejected(bad);
    }
    List<Store.Entry> done = new java.util.ArrayList<>();
    for (int i = 0; i < entries.size(); i++) if (!later.contains(i)) done.add(entries.get(i));
    store.ack(done);
    retire(retired, gone);
  }

  private void retire(Set<String> retired, int dropped) {
    if (dropped > 0) stats.drop("retired", dropped);
    if (!retired.isEmpty()) host.retired(retired);
  }
}
