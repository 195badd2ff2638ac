package org.ldptelemetry;

import java.io.File;

/**
 * A JVM app for tests/client_jvm/test_jvm_e2e.py: reports {@code count} values of three
 * kinds (a categorical, a numeric and a string metric) into a durable store, says
 * "queued N", then flushes, saying "sent N" as batches are delivered, and "done {stats}".
 * Run again with count 0 it only delivers what an earlier run left.
 *
 * <p>Arguments: collector URL, storage directory, count, a suffix of the metric names (or
 * "-"), [relay URL].
 */
public final class E2eReporter {
  private E2eReporter() {}

  static final String[] THEMES = {"light", "dark", "auto"};
  static final String[] TERMS = {"ramen", "pizza", "tacos", "café"};

  public static void main(String[] args) throws Exception {
    String url = args[0];
    File dir = new File(args[1]);
    int count = Integer.parseInt(args[2]);
    ClientOptions.Builder options =
        ClientOptions.builder().storageDir(dir).flushAt(1_000_000).flushIntervalMillis(3_600_000).maxBatchReports(500);
    String suffix = args[3].equals("-") ? "" : args[3];
    if (args.length > 4) options.relay(args[4]);
    Client client = new Client(url, options.build());
    int queued = 0;
    for (int i = 0; i < count; i++) {
      int j = i / 3;
      boolean ok;
      switch (i % 3) {
        case 0:
          ok = client.report("jvm.theme" + suffix, THEMES[j % 3]);
          break;
        case 1:
          ok = client.report("jvm.minutes" + suffix, (double) (j % 121));
          break;
        default:
          ok = client.report("jvm.search" + suffix, TERMS[j % 4]);
      }
      if (ok) queued++;
    }
    System.out.println("queued " + queued + " " + Json.write(client.stats()));
    System.out.flush();
    boolean[] flushed = new boolean[1];
    Thread flusher = new Thread(() -> flushed[0] = client.flush(600_000));
    flusher.start();
    long lastSent = -1;
    while (flusher.isAlive()) {
      long sent = (Long) client.stats().get("sent");
      if (sent != lastSent) {
        System.out.println("sent " + sent);
        System.out.flush();
        lastSent = sent;
      }
      Thread.sleep(5);
    }
    System.out.println("done " + flushed[0] + " " + Json.write(client.stats()));
    System.out.flush();
    client.close();
  }
}
