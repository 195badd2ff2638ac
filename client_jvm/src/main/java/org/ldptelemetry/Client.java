package org.ldptelemetry;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Reports metrics under local differential privacy to an ldp-telemetry collector: each
 * value is perturbed on the device by its metric's mechanism before anything else happens;
 * only the perturbed report is queued, stored, retried and sent.
 *
 * <pre>{@code
 * try (Client client = new Client("https://telemetry.example.com")) {
 *   client.report("app.theme", "dark");   // perturbed now; false if refused, never throws
 *   client.flush(10_000);                  // true when everything was delivered
 * }
 * }</pre>
 *
 * <p>{@link #report} never throws: it returns false and counts why in {@link #stats()}
 * (the reasons of the other SDKs: unknown_metric, invalid_value, budget, device_budget,
 * retired, bundle_mismatch, disabled, …). Only the constructor throws, for a bad URL or
 * setting. Thread-safe. {@link java.io.Closeable} (so Kotlin's {@code use} works with any
 * standard library). See docs/guides/jvm.md.
 */
public final class Client implements java.io.Closeable {
  static final String METRICS_PATH = "/v1/metrics/";
  static final long UNKNOWN_METRIC_TTL = 60_000;

  private final String url;
  private final ClientOptions options;
  private final Transport transport;
  /** {@code "Bearer <ingest key>"}, or null: sent with every definition fetch and upload. */
  private final String authorization;
  private final Store store;
  private final Stats stats = new Stats();
  private final Uploader uploader;
  private final Rng rng;
  private final RandomSource ids = RandomSource.secure();
  private final Map<String, Definition> bundle = new HashMap<>();
  private final Map<String, Cached> cache = new ConcurrentHashMap<>();
  private final Map<String, Long> retired = new ConcurrentHashMap<>();
  private final Map<String, Boolean> checked = new ConcurrentHashMap<>();
  private final Map<Definition, Ledger.Charge> charges = new ConcurrentHashMap<>();
  private final Object fetchLock = new Object();
  private final Object perturbLock = new Object();
  private final StringBuilder scratch = new StringBuilder(256);
  private final byte[] idBytes = new byte[16];
  private final Ledger.Caps appCaps;
  private volatile Ledger.Caps caps;
  private volatile int chargeDay = Integer.MIN_VALUE;
  private volatile int floorDay = Integer.MIN_VALUE;
  private int fetchFailures;
  private long unreachableUntil = Long.MIN_VALUE;
  private volatile boolean closed;
  private volatile boolean optedOut;
  private Map<String, Object> privacyAtShutdown;

  private static final class Cached {
    final Definition definition; // null: the collector does not know the metric
    final long expires;

    Cached(Definition definition, long expires) {
      this.definition = definition;
      this.expires = expires;
    }
  }

  private static final class Unknown extends Exception {
    private static final long serialVersionUID = 1L;

    Unknown() {
      super(null, null, false, false);
    }
  }

  private static final class Unavailable extends Exception {
    private static final long serialVersionUID = 1L;

    Unavailable() {
      super(null, null, false, false);
    }
  }

  /** A client with every default: the queue and the ledger in memory. */
  public Client(String url) {
    this(url, ClientOptions.DEFAULTS);
  }

  /**
   * A client of the collector at {@code url} ({@code http(s)://host[:port][/prefix]}).
   *
   * @throws IllegalArgumentException a bad URL, or bad bundled definitions
   * @throws IllegalStateException the storage directory cannot be used (or another client holds it)
   */
  public Client(String url, ClientOptions options) {
    if (url == null || !(url.startsWith("http://") || url.startsWith("https://"))) {
      throw new IllegalArgumentException("the collector URL must be http(s)://host[:port][/prefix], got " + url);
    }
    while (url.endsWith("/")) url = url.substring(0, url.length() - 1);
    this.url = url;
    this.options = options;
    Transport base = options.transport != null ? options.transport : defaultTransport(options.timeoutMillis);
    this.transport = options.relay == null ? base : new Oblivious(url, options.relay, options.relayKeys, base, options.clock);
    this.authorization = options.ingestKey == null ? null : "Bearer " + options.ingestKey;
    this.rng = new Rng(options.random != null ? options.random : RandomSource.secure());
    this.appCaps =
        Double.isNaN(options.devicePerDay) && Double.isNaN(options.deviceLifetime)
            ? null
            : new Ledger.Caps(options.devicePerDay, options.deviceLifetime);
    this.caps = appCaps;
    if (options.definitions != null) loadBundle(options.definitions);
    try {
      this.store = new Store(options.storageDir, options.maxQueue, options.maxQueueBytes);
    } catch (IOException e) {
      throw new IllegalStateException("the storage directory cannot be used: " + e.getMessage(), e);
    }
    for (String metric : store.retired()) retired.put(metric, Long.MIN_VALUE);
    this.uploader = new Uploader(store, new Host(), stats, options.flushAt, options.flushIntervalMillis, options.maxBatchReports, options.maxBatchBytes);
    if (transport instanceof Oblivious) ((Oblivious) transport).prepare();
    if (store.size() > 0) uploader.ensureStarted(); // what an earlier run left
  }

  /** java.net.http where the platform has it (a JVM), else HttpURLConnection (Android). */
  static Transport defaultTransport(long timeoutMillis) {
    try {
      Class.forName("java.net.http.HttpClient");
      return new HttpClientTransport(timeoutMillis);
    } catch (ClassNotFoundException | LinkageError e) {
      return new UrlConnectionTransport(timeoutMillis);
    }
  }

  private void loadBundle(String json) {
    Object data = Json.parse(json);
    Object list = data instanceof Map ? ((Map<?, ?>) data).get("metrics") : data;
    if (!(list instanceof List)) throw new IllegalArgumentException("definitions: {\"metrics\": [...]} or a list of definitions");
    for (Object item : (List<?>) list) {
      Definition d = Definition.parse(item);
      bundle.put(d.name, d);
    }
    if (data instanceof Map && ((Map<?, ?>) data).get("device_budget") != null) {
      caps = Ledger.Caps.parse(((Map<?, ?>) data).get("device_budget")).stricter(appCaps);
    }
  }

  // -- definitions ---------------------------------------------------------------------------

  private static boolean validName(String name) {
    if (name == null || name.isEmpty() || name.length() > 64) return false;
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      boolean ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '_' || c == '.' || c == '-'));
      if (!ok) return false;
    }
    return true;
  }

  private long now() {
    return options.clock.getAsLong();
  }

  /** The definition of {@code metric}: fetched and cached, stale while unreachable, bundled until fetched. */
  private Definition definition(String metric) throws Unknown, Unavailable {
    Cached cached = cache.get(metric);
    if (cached != null && now() < cached.expires) {
      if (cached.definition == null) throw new Unknown();
      return cached.definition;
    }
    synchronized (fetchLock) {
      long now = now();
      cached = cache.get(metric);
      if (cached != null && now < cached.expires) {
        if (cached.definition == null) throw new Unknown();
        return cached.definition;
      }
      if (!validName(metric)) throw new Unknown();
      Definition stale = cached != null ? cached.definition : saved(metric, now);
      if (cached == null && stale == null && bundle.containsKey(metric)) {
        stale = bundle.get(metric);
        cache.put(metric, new Cached(stale, now)); // stale at once: fetched first
      }
      if (now < unreachableUntil) {
        if (stale != null) return stale;
        throw new Unavailable();
      }
      Transport.Response response;
      try {
        response = transport.exchange("GET", url + METRICS_PATH + metric, null, null, "application/json", authorization);
      } catch (IOException | RuntimeException e) {
        if (e.getClass().getName().equals("android.os.NetworkOnMainThreadException")) {
          fetchApart(metric); // Android's main thread may not wait on the network
          if (stale != null) return stale;
          throw new Unavailable();
        }
        return unreachable(now, stale, e.getClass().getSimpleName(), -1);
      }
      int status = response.status();
      if (status >= 200 && status < 300) return learn(metric, response.body(), now);
      if (Uploader.classify(status, true).equals("drop")) {
        unknown(metric, now);
      }
      long retryAfter = Uploader.parseRetryAfter(response.header("retry-after"), options.wallclock.getAsLong());
      return unreachable(now, stale, "HTTP " + status, retryAfter);
    }
  }

  private final Set<String> fetching = java.util.Collections.newSetFromMap(new ConcurrentHashMap<String, Boolean>());

  /** Fetch a definition on a thread of its own (report() was called where the network may not be used). */
  private void fetchApart(String metric) {
    if (!fetching.add(metric)) return;
    Thread t =
        new Thread(
            () -> {
              try {
                definition(metric);
              } catch (Unknown | Unavailable | RuntimeException e) {
                // counted when the app reports it again
              } finally {
                fetching.remove(metric);
              }
            },
            "ldp-telemetry-definition");
    t.setDaemon(true);
    t.start();
  }

  private Definition learn(String metric, byte[] body, long now) throws Unknown {
    String text = new String(body, StandardCharsets.UTF_8);
    Definition d;
    Map<String, Object> data;
    try {
      data = Params.map(Json.parse(text), "definition");
      d = Definition.parse(data);
      if (!d.name.equals(metric)) throw new IllegalArgumentException("the answer defines another metric");
      if (data.containsKey("device_budget")) {
        Ledger.Caps server = Ledger.Caps.parse(data.get("device_budget"));
        caps = appCaps == null ? server : appCaps.stricter(server);
      }
    } catch (RuntimeException e) {
      stats.error("unusable definition");
      unknown(metric, now);
      return null; // not reached
    }
    fetchFailures = 0;
    if (d.retired) {
      if (!retired.containsKey(metric)) retire(java.util.Collections.singleton(metric));
    } else {
      Long learnt = retired.get(metric);
      if (learnt != null && learnt < now) unretire(metric);
    }
    cache.put(metric, new Cached(d, now + options.metricsTtlMillis));
    try {
      store.saveDefinition(metric, text);
    } catch (IOException e) {
      // only an offline start would miss it
    }
    return d;
  }

  private Definition saved(String metric, long now) {
    String text = store.loadDefinition(metric);
    if (text == null) return null;
    try {
      Map<String, Object> data = Params.map(Json.parse(text), "definition");
      Definition d = Definition.parse(data);
      if (!d.name.equals(metric)) return null;
      cache.put(metric, new Cached(d, now)); // stale at once: fetched first
      if (data.get("device_budget") != null) {
        Ledger.Caps server = Ledger.Caps.parse(data.get("device_budget"));
        caps = appCaps == null ? server : appCaps.stricter(server);
      }
      return d;
    } catch (RuntimeException e) {
      return null;
    }
  }

  private void unknown(String metric, long now) throws Unknown {
    fetchFailures = 0;
    cache.put(metric, new Cached(null, now + Math.min(options.metricsTtlMillis, UNKNOWN_METRIC_TTL)));
    throw new Unknown();
  }

  private Definition unreachable(long now, Definition stale, String what, long retryAfter) throws Unavailable {
    fetchFailures++;
    long delay = Math.min(Uploader.RETRY_CAP, Uploader.RETRY_BASE << Math.min(fetchFailures - 1, 16));
    if (retryAfter >= 0) delay = Math.max(delay, Math.min(retryAfter, Uploader.RETRY_AFTER_CAP));
    unreachableUntil = now + delay;
    stats.error(what);
    if (stale != null) return stale;
    throw new Unavailable();
  }

  private void retire(Set<String> metrics) {
    long learnt = now();
    for (String metric : metrics) {
      retired.put(metric, learnt);
      try {
        int dropped = store.retire(metric);
        if (dropped > 0) stats.drop("retired", dropped);
      } catch (IOException e) {
        stats.error("IOException");
      }
    }
  }

  private void unretire(String metric) {
    retired.remove(metric);
    try {
      store.unretire(metric);
    } catch (IOException e) {
      stats.error("IOException");
    }
  }

  // -- reporting ----------------------------------------------------------------------------

  /** {@link #report(String, Object, Map)} for a metric without public dimensions. */
  public boolean report(String metric, Object value) {
    return report(metric, value, null);
  }

  /**
   * Perturb {@code value} now and queue the perturbed report for upload. Never throws; the
   * value itself is neither kept nor logged. The first report of a metric fetches its
   * definition (one request, on the calling thread); later ones only perturb, serialize and
   * queue (with a storage directory: one write of the report and its ledger charge).
   *
   * @param metric the metric's name
   * @param value a label of its domain (String) or its index (int); for a numeric metric a
   *     number in its range; for a string metric a String; for a joint metric a Map of
   *     attribute to label naming every attribute (or the labels in order, as a List)
   * @param dimensions for a metric that declares public dimensions, the value of each (e.g.
   *     {@code Map.of("platform", "android")}): sent in the clear, NOT protected by ε; null
   *     for a metric without
   * @return true when queued and charged to the privacy ledger; false when dropped, counted
   *     by reason in {@code stats().get("dropped")}
   */
  public boolean report(String metric, Object value, Map<String, String> dimensions) {
    try {
      if (closed) return drop("shutdown");
      if (optedOut || store.disabled()) return drop("disabled");
      Definition d;
      try {
        d = definition(metric);
      } catch (Unknown e) {
        return drop("unknown_metric");
      } catch (Unavailable e) {
        return drop(retired.containsKey(metric) ? "retired" : "unreachable");
      }
      if (retired.containsKey(metric)) return drop("retired");
      try {
        d.checkDimensions(dimensions);
      } catch (IllegalArgumentException e) {
        return drop("invalid_dimensions");
      }
      Ledger.Charge charge = charge(d);
      byte[] secret = null;
      if (d.longitudinal()) {
        try {
          secret = store.secret(ids);
        } catch (Store.Refused e) {
          return drop("disabled");
        } catch (IOException e) {
          return drop("storage_error");
        }
      }
      boolean bundled = d == bundle.get(metric);
      byte[] data;
      synchronized (perturbLock) {
        StringBuilder out = scratch;
        out.setLength(0);
        try {
          d.writeReport(value, dimensions, rng, secret, newId(), bundled ? -d.version : d.version, out);
        } catch (IllegalArgumentException e) {
          return drop("invalid_value");
        }
        int n = out.length();
        data = new byte[n];
        for (int i = 0; i < n; i++) data[i] = (byte) out.charAt(i); // ASCII: non-ASCII is escaped
        if (out.capacity() > 65536) scratch.trimToSize();
      }
      int queued;
      try {
        queued = store.put(data, metric, bundled ? d.version : 0, charge, caps);
      } catch (Store.Refused e) {
        return drop(e.reason);
      } catch (IOException e) {
        return drop("storage_error");
      }
      stats.add("reported", 1);
      uploader.notifyQueued(queued);
      return true;
    } catch (RuntimeException | LinkageError e) {
      stats.error(e.getClass().getSimpleName());
      return drop("internal_error");
    }
  }

  /**
   * Perturb {@code value} and return the exact JSON report that would be sent; nothing is
   * queued or charged.
   *
   * @throws IllegalArgumentException an unknown metric, or an invalid value or dimensions
   * @throws IllegalStateException the definition could not be fetched, or (memoized) no device secret
   */
  public String buildReport(String metric, Object value, Map<String, String> dimensions) {
    Definition d;
    try {
      d = definition(metric);
    } catch (Unknown e) {
      throw new IllegalArgumentException("unknown metric " + metric);
    } catch (Unavailable e) {
      throw new IllegalStateException("the definition of " + metric + " could not be fetched");
    }
    byte[] secret = null;
    if (d.longitudinal()) {
      try {
        secret = store.secret(ids);
      } catch (Store.Refused | IOException e) {
        throw new IllegalStateException("no device secret: " + e.getMessage());
      }
    }
    synchronized (perturbLock) {
      StringBuilder out = new StringBuilder();
      d.writeReport(value, dimensions, rng, secret, newId(), d.version, out);
      return out.toString();
    }
  }

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** 16 fresh CSPRNG bytes as 32 hex digits, drawn apart from the perturbation's randomness. */
  private String newId() {
    ids.nextBytes(idBytes, 0, 16);
    char[] out = new char[32];
    for (int i = 0; i < 16; i++) {
      out[2 * i] = HEX[(idBytes[i] >>> 4) & 15];
      out[2 * i + 1] = HEX[idBytes[i] & 15];
    }
    return new String(out);
  }

  /** The charge of a report of {@code d} now: the wall clock's UTC day, never before one charged. */
  private Ledger.Charge charge(Definition d) {
    int day = Ledger.dayOf(options.wallclock.getAsLong());
    if (floorDay == Integer.MIN_VALUE) floorDay = store.latestDay();
    if (day < floorDay) day = floorDay; // a clock set back must not reopen a spent period
    else floorDay = day;
    if (day != chargeDay) {
      charges.clear();
      chargeDay = day;
    }
    Ledger.Charge c = charges.get(d);
    if (c == null) {
      c =
          new Ledger.Charge(
              d.name, d.epsilon(), day, Ledger.periodStart(day, d.budgetPeriod), d.budgetReports, d.permanentEpsilon());
      if (charges.size() > 256) charges.clear();
      charges.put(d, c);
    }
    return c;
  }

  /** Reports dropped (evictions included) when {@link #flush(long)} last returned. */
  private long dropsAtFlush;

  private final Object flushLock = new Object();

  private boolean drop(String reason) {
    stats.drop(reason, 1);
    return false;
  }

  // -- delivery -----------------------------------------------------------------------------

  /**
   * Send everything queued; wait until delivered or until uploads pause after failures.
   *
   * @return whether everything was delivered, as {@link #flush(long)} says
   */
  public boolean flush() {
    return flush(-1);
  }

  /**
   * Send everything queued now and wait until it is delivered, at most {@code timeoutMillis}.
   *
   * @return whether everything was delivered: true when the queue is empty and no report
   *     was dropped, for any reason ({@code stats().get("dropped")}: a {@code report} that
   *     returned false, one the collector refused, one the queue's quota evicted), since the
   *     previous {@code flush} returned (or since the client was made); false otherwise,
   *     e.g. with the collector unreachable (the reports stay queued and are retried). The
   *     Python SDK's {@code Client.flush()} and the JavaScript SDK's say the same.
   */
  public boolean flush(long timeoutMillis) {
    boolean empty;
    try {
      empty = uploader.flush(timeoutMillis);
    } catch (RuntimeException e) {
      stats.error(e.getClass().getSimpleName());
      empty = false;
    }
    long dropped = stats.droppedTotal() + store.evicted();
    boolean clean;
    synchronized (flushLock) {
      clean = dropped == dropsAtFlush;
      dropsAtFlush = dropped;
    }
    return empty && clean;
  }

  /**
   * What happened to reports: {@code queued}, {@code queued_bytes}, {@code reported}, {@code
   * sent}, {@code accepted}, {@code duplicates}, {@code batches}, {@code retries}, {@code
   * dropped} (by reason), {@code last_error} and {@code worker_alive}.
   */
  public Map<String, Object> stats() {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("queued", (long) store.size());
    out.put("queued_bytes", store.bytes());
    Map<String, Object> snapshot = stats.snapshot();
    @SuppressWarnings("unchecked")
    Map<String, Long> dropped = (Map<String, Long>) snapshot.get("dropped");
    dropped.put("queue_full", dropped.get("queue_full") + store.evicted());
    out.putAll(snapshot);
    out.put("worker_alive", uploader.alive());
    return out;
  }

  // -- privacy ------------------------------------------------------------------------------

  /**
   * The privacy ledger: ε spent per metric today, this budget period and over the lifetime
   * (sequential composition; reports still queued count as spent). Never throws.
   */
  public Map<String, Object> privacy() {
    if (privacyAtShutdown != null) {
      Map<String, Object> copy = new LinkedHashMap<>(privacyAtShutdown);
      copy.put("enabled", !optedOut && !store.disabled());
      return copy;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("enabled", !optedOut && !store.disabled());
    int today = Math.max(Ledger.dayOf(options.wallclock.getAsLong()), floorDay);
    out.put("today", Ledger.iso(today));
    out.put("accounting", Ledger.ACCOUNTING);
    Ledger.Caps c = caps;
    out.put("device_budget", c == null ? null : c.toMap());
    Ledger ledger = store.snapshot();
    Map<String, Object> metrics = new LinkedHashMap<>();
    for (Map.Entry<String, double[]> m : ledger.lifetime.entrySet()) {
      String metric = m.getKey();
      Cached cached = cache.get(metric);
      Definition d = cached != null && cached.definition != null ? cached.definition : bundle.get(metric);
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("epsilon_per_report", d == null ? null : d.epsilon());
      int since = d == null ? today : Ledger.periodStart(today, d.budgetPeriod);
      double[] period = ledger.spent(metric, since, today);
      if (d != null && d.budgetReports > 0) {
        Map<String, Object> budget = new LinkedHashMap<>();
        budget.put("reports_per_period", (long) d.budgetReports);
        budget.put("period", d.budgetPeriod);
        budget.put("remaining_reports", (long) Math.max(0, d.budgetReports - period[0]));
        row.put("budget", budget);
      } else {
        row.put("budget", null);
      }
      row.put("today", window(ledger.spent(metric, today, today), today));
      row.put("period", window(period, since));
      row.put("lifetime", window(m.getValue(), (int) m.getValue()[2]));
      row.put("permanent_epsilon", ledger.permanent.get(metric));
      metrics.put(metric, row);
    }
    out.put("metrics", metrics);
    return out;
  }

  private static Map<String, Object> window(double[] spent, int since) {
    Map<String, Object> w = new LinkedHashMap<>();
    w.put("reports", (long) spent[0]);
    w.put("epsilon", spent[1]);
    w.put("since", Ledger.iso(since));
    return w;
  }

  /**
   * Opt out: stop reporting, and wipe the queued reports (refunding those never sent) and
   * the device secret; with a storage directory persisted across restarts. Never throws.
   *
   * @return whether everything was wiped and persisted (reporting stops either way)
   */
  public boolean disable() {
    optedOut = true;
    try {
      int wiped = store.disable();
      stats.drop("disabled", wiped);
      optedOut = false; // the store's flag rules from now on
      return true;
    } catch (IOException | RuntimeException e) {
      stats.error(e.getClass().getSimpleName());
      return false;
    }
  }

  /** Opt back in after {@link #disable()}. Never throws; whether it was persisted. */
  public boolean enable() {
    try {
      store.enable();
      optedOut = false;
      return true;
    } catch (IOException | RuntimeException e) {
      stats.error(e.getClass().getSimpleName());
      return false;
    }
  }

  /**
   * Deliver what is queued (at most {@code timeoutMillis}), then stop: later reports are
   * dropped ({@code shutdown}); reports still queued stay in the storage directory for the
   * next run (without one they are dropped). {@link #privacy()} keeps answering.
   *
   * @return whether everything queued was delivered
   */
  public boolean shutdown(long timeoutMillis) {
    if (closed && privacyAtShutdown != null) return store.size() == 0;
    closed = true;
    long start = System.nanoTime();
    boolean delivered = flush(timeoutMillis);
    long left = Math.max(1, timeoutMillis - (System.nanoTime() - start) / 1_000_000);
    uploader.stop(left);
    if (!delivered && !store.durable()) stats.drop("shutdown", store.size());
    privacyAtShutdown = privacy();
    store.close();
    try {
      transport.close();
    } catch (RuntimeException e) {
      // closing
    }
    return delivered;
  }

  /** {@link #shutdown(long)} with 5 seconds. */
  @Override
  public void close() {
    shutdown(5_000);
  }

  // -- what the uploader needs ---------------------------------------------------------------

  private final class Host implements Uploader.Host {
    @Override
    public Transport.Response post(byte[] body) throws IOException {
      return transport.exchange("POST", url + Uploader.REPORTS_PATH, body, "application/json", "application/json", authorization);
    }

    @Override
    public List<Store.Entry> vet(List<Store.Entry> batch, List<Store.Entry> refused) throws IOException {
      List<Store.Entry> send = new ArrayList<>(batch.size());
      for (Store.Entry e : batch) {
        if (e.bundled == 0) {
          send.add(e);
          continue;
        }
        String id = e.metric + "@" + e.bundled;
        Boolean ok = checked.get(id);
        if (ok == null) {
          ok = hasBundled(e.metric, e.bundled);
          checked.put(id, ok);
        }
        if (ok) {
          String text = new String(e.data, StandardCharsets.US_ASCII);
          byte[] data = text.replaceFirst("\"version\":-" + e.bundled + ",", "\"version\":" + e.bundled + ",").getBytes(StandardCharsets.US_ASCII);
          send.add(new Store.Entry(e.key, data, e.metric, e.bundled, e.charge, true));
        } else {
          refused.add(e);
        }
      }
      return send;
    }

    private boolean hasBundled(String metric, long version) throws IOException {
      Transport.Response r = transport.exchange("GET", url + METRICS_PATH + metric + "?version=" + version, null, null, "application/json", authorization);
      Definition server = null;
      if (r.status() >= 200 && r.status() < 300) {
        try {
          server = Definition.parse(Json.parse(new String(r.body(), StandardCharsets.UTF_8)));
        } catch (RuntimeException e) {
          server = null;
        }
      } else if (!Uploader.classify(r.status(), true).equals("drop")) {
        throw new IOException("HTTP " + r.status() + " for the definition of " + metric + " v" + version);
      }
      Definition mine = bundle.get(metric);
      return server != null && (mine == null || mine.version != version || mine.sameParameters(server));
    }

    @Override
    public void rejected(Set<String> metrics) {
      for (String m : metrics) cache.remove(m); // fetched again: e.g. a new version
    }

    @Override
    public void retired(Set<String> metrics) {
      retire(metrics);
    }

    @Override
    public long now() {
      return Client.this.now();
    }

    @Override
    public long wallclock() {
      return options.wallclock.getAsLong();
    }
  }

  /** The store (tests in this package). */
  Store store() {
    return store;
  }
}
