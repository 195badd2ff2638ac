package org.ldptelemetry;

import java.io.File;
import java.util.function.LongSupplier;

/**
 * Every setting of a {@link Client} but its URL, checked once by {@link Builder#build()}:
 * a bad setting throws {@code IllegalArgumentException} there, naming the valid range (the
 * only time the SDK throws into the app, with the constructor). Immutable.
 *
 * <pre>{@code
 * ClientOptions options = ClientOptions.builder()
 *     .storageDir(new File(context.getFilesDir(), "ldp"))
 *     .flushAt(20)
 *     .build();
 * }</pre>
 */
public final class ClientOptions {
  /** Every default. */
  public static final ClientOptions DEFAULTS = builder().build();

  final Transport transport;
  final int flushAt;
  final long flushIntervalMillis;
  final int maxQueue;
  final long maxQueueBytes;
  final int maxBatchReports;
  final long maxBatchBytes;
  final long metricsTtlMillis;
  final long timeoutMillis;
  final RandomSource random;
  final File storageDir;
  final String definitions;
  final double devicePerDay;
  final double deviceLifetime;
  final String relay;
  final byte[] relayKeys;
  final String ingestKey;
  final LongSupplier clock;
  final LongSupplier wallclock;

  private ClientOptions(Builder b) {
    transport = b.transport;
    flushAt = b.flushAt;
    flushIntervalMillis = b.flushIntervalMillis;
    maxQueue = b.maxQueue;
    maxQueueBytes = b.maxQueueBytes;
    maxBatchReports = b.maxBatchReports;
    maxBatchBytes = b.maxBatchBytes;
    metricsTtlMillis = b.metricsTtlMillis;
    timeoutMillis = b.timeoutMillis;
    random = b.random;
    storageDir = b.storageDir;
    definitions = b.definitions;
    devicePerDay = b.devicePerDay;
    deviceLifetime = b.deviceLifetime;
    relay = b.relay;
    relayKeys = b.relayKeys == null ? null : b.relayKeys.clone();
    ingestKey = b.ingestKey;
    clock = b.clock;
    wallclock = b.wallclock;
  }

  /** A builder with every default. */
  public static Builder builder() {
    return new Builder();
  }

  /** Settings, each with its default; {@link #build()} checks them. */
  public static final class Builder {
    private Transport transport;
    private int flushAt = 100;
    private long flushIntervalMillis = 5_000;
    private int maxQueue = 10_000;
    private long maxQueueBytes = 8L * 1024 * 1024;
    private int maxBatchReports = 500;
    private long maxBatchBytes = 512L * 1024;
    private long metricsTtlMillis = 300_000;
    private long timeoutMillis = 10_000;
    private RandomSource random;
    private File storageDir;
    private String definitions;
    private double devicePerDay = Double.NaN;
    private double deviceLifetime = Double.NaN;
    private String relay;
    private byte[] relayKeys;
    private String ingestKey;
    private LongSupplier clock = () -> System.nanoTime() / 1_000_000;
    private LongSupplier wallclock = System::currentTimeMillis;

    private Builder() {}

    /** How to reach the collector; default {@link HttpClientTransport}, or {@link UrlConnectionTransport} on Android. */
    public Builder transport(Transport transport) {
      this.transport = transport;
      return this;
    }

    /** Queued reports that start an upload (≥ 1; 100). */
    public Builder flushAt(int reports) {
      this.flushAt = reports;
      return this;
    }

    /** Milliseconds after which queued reports are uploaded anyway (> 0; 5,000). */
    public Builder flushIntervalMillis(long millis) {
      this.flushIntervalMillis = millis;
      return this;
    }

    /** Most reports kept; beyond it the oldest are dropped, counted as queue_full (≥ 1; 10,000). */
    public Builder maxQueue(int reports) {
      this.maxQueue = reports;
      return this;
    }

    /** Most bytes kept, likewise (≥ 1; 8 MiB). */
    public Builder maxQueueBytes(long bytes) {
      this.maxQueueBytes = bytes;
      return this;
    }

    /** Most reports per upload (≥ 1; 500). */
    public Builder maxBatchReports(int reports) {
      this.maxBatchReports = reports;
      return this;
    }

    /** Most bytes per upload body (≥ 128; 512 KiB); a larger report is sent alone. */
    public Builder maxBatchBytes(long bytes) {
      this.maxBatchBytes = bytes;
      return this;
    }

    /** Milliseconds a fetched definition is used before it is fetched again (≥ 0; 300,000). */
    public Builder metricsTtlMillis(long millis) {
      this.metricsTtlMillis = millis;
      return this;
    }

    /** Milliseconds to connect and to wait for each answer (> 0; 10,000). */
    public Builder timeoutMillis(long millis) {
      this.timeoutMillis = millis;
      return this;
    }

    /** The perturbation's randomness (tests); default the platform's CSPRNG. */
    public Builder random(RandomSource random) {
      this.random = random;
      return this;
    }

    /**
     * A directory for the durable queue, the privacy ledger, the opt-out and the device
     * secret (an app's private files, e.g. {@code new File(context.getFilesDir(), "ldp")});
     * one client at a time per directory. Default none: all of it in memory, this process
     * only.
     */
    public Builder storageDir(File dir) {
      this.storageDir = dir;
      return this;
    }

    /**
     * Definitions shipped with the app, for an offline first start: the JSON of {@code GET
     * /v1/metrics} ({@code {"metrics": [...]}}) or a JSON array of definitions. A metric
     * never fetched is reported with its bundled definition; those reports are sent once
     * the collector confirms that version's parameters (else dropped as bundle_mismatch).
     */
    public Builder definitions(String json) {
      this.definitions = json;
      return this;
    }

    /** The app's cap on the device's total ε per UTC day and over its lifetime (NaN: none). */
    public Builder deviceBudget(double epsilonPerDay, double epsilonLifetime) {
      this.devicePerDay = epsilonPerDay;
      this.deviceLifetime = epsilonLifetime;
      return this;
    }

    /**
     * Send uploads and definition fetches through an Oblivious HTTP relay (RFC 9458; {@code
     * ldp relay}): its URL. The collector then never sees the device's address (but on the
     * key fetches, made apart from the uploads). The transport carries the sealed requests to
     * the relay. Needs X25519 in the platform: JDK 11+, Android API 33+.
     */
    public Builder relay(String relayUrl) {
      this.relay = relayUrl;
      return this;
    }

    /** The gateway's {@code application/ohttp-keys} shipped with the app (never fetched then). */
    public Builder relayKeys(byte[] keys) {
      this.relayKeys = keys == null ? null : keys.clone();
      return this;
    }

    /**
     * The app's ingest key ({@code ldp tokens create NAME --kind ingest}; public, shipped in the
     * app): sent as {@code Authorization: Bearer <key>} with every definition fetch and upload,
     * inside the sealed request with {@link #relay} (never to the relay). It picks the project of
     * the metrics and, where the collector requires keys, admits the reports; a 401 or 403 drops
     * the batch. Not together with an app's own {@link #transport} but through a relay (the
     * transport then carries sealed requests, the key inside them).
     */
    public Builder ingestKey(String key) {
      this.ingestKey = key;
      return this;
    }

    /** Monotonic milliseconds (tests). */
    public Builder clock(LongSupplier millis) {
      this.clock = millis;
      return this;
    }

    /** Unix time in milliseconds, for the ledger's UTC days (tests). */
    public Builder wallclock(LongSupplier millis) {
      this.wallclock = millis;
      return this;
    }

    private static void atLeast(String name, long value, long low) {
      if (value < low) throw new IllegalArgumentException(name + " must be >= " + low + ", got " + value);
    }

    private static void cap(String name, double value) {
      if (!Double.isNaN(value) && !(value > 0 && value <= 1e9)) {
        throw new IllegalArgumentException(name + " must be a positive number up to 1e9 (or NaN: no cap), got " + value);
      }
    }

    /**
     * The options.
     *
     * @throws IllegalArgumentException a setting outside its range
     */
    public ClientOptions build() {
      atLeast("flushAt", flushAt, 1);
      atLeast("flushIntervalMillis", flushIntervalMillis, 1);
      atLeast("maxQueue", maxQueue, 1);
      atLeast("maxQueueBytes", maxQueueBytes, 1);
      atLeast("maxBatchReports", maxBatchReports, 1);
      atLeast("maxBatchBytes", maxBatchBytes, 128);
      atLeast("metricsTtlMillis", metricsTtlMillis, 0);
      atLeast("timeoutMillis", timeoutMillis, 1);
      cap("deviceBudget epsilonPerDay", devicePerDay);
      cap("deviceBudget epsilonLifetime", deviceLifetime);
      if (relay != null && !(relay.startsWith("http://") || relay.startsWith("https://"))) {
        throw new IllegalArgumentException("relay must be an http(s) URL, got " + relay);
      }
      if (relayKeys != null && relay == null) throw new IllegalArgumentException("relayKeys needs relay");
      if (ingestKey != null && !ingestKey.matches("[!-~]{1,1024}")) {
        throw new IllegalArgumentException("ingestKey must be the key's text (printable ASCII, no spaces)");
      }
      if (ingestKey != null && transport != null && relay == null) {
        throw new IllegalArgumentException(
            "give ingestKey or transport, not both (your transport sends the Authorization header it wants)");
      }
      if (clock == null || wallclock == null) throw new IllegalArgumentException("clock and wallclock are required");
      return new ClientOptions(this);
    }
  }
}
