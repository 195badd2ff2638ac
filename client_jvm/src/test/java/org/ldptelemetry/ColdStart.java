package org.ldptelemetry;

import java.io.File;
import java.lang.management.ManagementFactory;

/**
 * Cold start, for benchmarks/bench_client_jvm.py: a fresh JVM makes a client (a storage
 * directory, the default transport) and reports once to a real collector over HTTP (the
 * definition fetched then). Prints the milliseconds from the JVM's start to the client made
 * and to the first report() returned.
 *
 * <p>Arguments: collector URL, storage directory, metric, value.
 */
public final class ColdStart {
  private ColdStart() {}

  public static void main(String[] args) {
    long start = ManagementFactory.getRuntimeMXBean().getStartTime();
    Client client = new Client(args[0], ClientOptions.builder().storageDir(new File(args[1])).build());
    long made = System.currentTimeMillis();
    boolean ok = client.report(args[2], args[3]);
    long reported = System.currentTimeMillis();
    System.out.println("{\"ok\":" + ok + ",\"client_ms\":" + (made - start) + ",\"first_report_ms\":" + (reported - start) + "}");
    client.shutdown(1);
  }
}
