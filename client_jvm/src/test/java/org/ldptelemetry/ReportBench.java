package org.ldptelemetry;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * report() timed call by call after warm-up, for benchmarks/bench_client_jvm.py: per
 * definition, the median and p99 in µs and the bytes allocated per report (the thread's
 * allocation counter). The collector is an in-process transport that serves the
 * definitions (no network after the first fetch); uploads are held back (flushAt) so only
 * report() is timed: perturb, serialize, the ledger's check and charge, and the queue
 * (with a storage directory: the journal's write of each report).
 *
 * <p>Arguments: definitions file (a JSON list), storage directory or "-", warm-up reports,
 * timed reports. Prints one JSON object per definition.
 */
public final class ReportBench {
  private ReportBench() {}

  public static void main(String[] args) throws Exception {
    List<Object> defs = Vectors.list(Json.parse(new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8)));
    int warm = Integer.parseInt(args[2]);
    int n = Integer.parseInt(args[3]);
    Map<String, String> served = new HashMap<>();
    for (Object d : defs) served.put((String) Vectors.map(d).get("name"), Json.write(d));
    Transport transport =
        (method, url, body, type, accept) ->
            method.equals("GET")
                ? new Transport.Response(200, new HashMap<>(), served.get(url.substring(url.lastIndexOf('/') + 1)).getBytes(StandardCharsets.UTF_8))
                : new Transport.Response(202, new HashMap<>(), "{}".getBytes(StandardCharsets.UTF_8));
    com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long me = Thread.currentThread().getId();
    for (Object o : defs) {
      Map<String, Object> d = Vectors.map(o);
      String name = (String) d.get("name");
      String kind = (String) d.get("kind");
      Object[] values =
          kind.equals("string")
              ? new Object[] {"café au lait", "ldp", "search term"}
              : kind.equals("distribution")
              ? new Object[] {17.0, 1023.0, 42000.0}
              : d.get("domain") != null && ((List<?>) d.get("domain")).size() > 100 ? new Object[] {0, 17, 1023} : new Object[] {0, 1, 2};
      ClientOptions.Builder options =
          ClientOptions.builder().transport(transport).flushAt(Integer.MAX_VALUE).flushIntervalMillis(Long.MAX_VALUE / 4).maxQueue(Integer.MAX_VALUE).maxQueueBytes(Long.MAX_VALUE);
      File dir = null;
      if (!args[1].equals("-")) {
        dir = new File(args[1], name);
        options.storageDir(dir);
      }
      try (Client client = new Client("http://collector.invalid", options.build())) {
        for (int i = 0; i < warm; i++) client.report(name, values[i % 3]);
        long[] took = new long[n];
        long before = threads.getThreadAllocatedBytes(me);
        for (int i = 0; i < n; i++) {
          long t0 = System.nanoTime();
          boolean ok = client.report(name, values[i % 3]);
          took[i] = System.nanoTime() - t0;
          if (!ok) throw new IllegalStateException("dropped: " + client.stats());
        }
        long allocated = threads.getThreadAllocatedBytes(me) - before;
        Arrays.sort(took);
        System.out.println(
            "{\"name\":\"" + name + "\",\"median_us\":" + took[n / 2] / 1000.0 + ",\"p99_us\":" + took[(int) (n * 0.99)] / 1000.0
                + ",\"bytes_per_report\":" + allocated / n + ",\"durable\":" + (dir != null) + "}");
        client.shutdown(1); // the queued reports are not sent anywhere
      }
    }
  }
}
