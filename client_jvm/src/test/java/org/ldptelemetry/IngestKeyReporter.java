package org.ldptelemetry;

/**
 * A JVM app for tests/client_jvm/test_jvm_ingest_key.py: reports {@code count} values of
 * {@code app.theme} with an ingest key (directly, or through a relay), flushes, and prints
 * its stats as JSON.
 *
 * <p>Arguments: collector URL, ingest key, count, [relay URL].
 */
public final class IngestKeyReporter {
  private IngestKeyReporter() {}

  static final String[] THEMES = {"light", "dark", "sepia"};

  public static void main(String[] args) throws Exception {
    ClientOptions.Builder options = ClientOptions.builder().ingestKey(args[1]).flushAt(1_000_000);
    if (args.length > 3) options.relay(args[3]);
    int count = Integer.parseInt(args[2]);
    Client client = new Client(args[0], options.build());
    int ok = 0;
    for (int i = 0; i < count; i++) {
      if (client.report("app.theme", THEMES[i % 3])) ok++;
    }
    client.flush(60_000);
    System.out.println("{\"ok\": " + ok + ", \"stats\": " + Json.write(client.stats()) + "}");
    System.out.flush();
    client.close();
  }
}
