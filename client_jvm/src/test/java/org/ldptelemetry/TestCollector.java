package org.ldptelemetry;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A real HTTP server on a free port of 127.0.0.1 that plays a collector for the client's
 * tests: it serves definitions, takes batches (answering 202 with the counts, or the
 * statuses a test scripts: 503 with Retry-After, 413, 400, …) and records what it got.
 */
final class TestCollector implements AutoCloseable {
  final HttpServer server;
  final Map<String, String> definitions = new ConcurrentHashMap<>();
  final Map<String, String> versions = new ConcurrentHashMap<>(); // "name@version" → definition
  final List<String> batches = new ArrayList<>();
  final List<String> requests = new ArrayList<>();
  final Deque<int[]> script = new ArrayDeque<>(); // {status, retryAfterSeconds or -1}
  final List<String> refused = new ArrayList<>(); // the batches a scripted status answered
  volatile String scriptedBody; // the body of the next scripted answer (default: an error)
  volatile String retiredInAnswer;
  volatile boolean definitionsDown; // GET /v1/metrics/… answers 503

  TestCollector() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", this::handle);
    server.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  static String definition(String name, long version, String mechanism, String extra) {
    return "{\"name\":\"" + name + "\",\"version\":" + version + ",\"kind\":\"categorical\","
        + "\"domain\":[\"light\",\"dark\",\"auto\"],\"description\":\"\",\"mechanism\":" + mechanism
        + ",\"mechanism_reason\":\"\",\"budget\":null,\"shards\":1,\"retention\":null" + extra + "}";
  }

  /** A GRR (ε = 1) definition of version 1 with a budget of {@code reports} per {@code period}. */
  static String budgeted(String name, int reports, String period) {
    String budget = ",\"budget\":{\"reports_per_period\":" + reports + ",\"period\":\"" + period + "\"}";
    return definition(name, 1, grr(1.0), "").replace(",\"budget\":null", budget);
  }

  static String grr(double epsilon) {
    return "{\"mechanism\":\"grr\",\"epsilon\":" + epsilon + ",\"domain_size\":3}";
  }

  synchronized List<String> batches() {
    return new ArrayList<>(batches);
  }

  synchronized int reportsReceived() {
    int n = 0;
    for (String b : batches) n += b.split("\"id\":").length - 1;
    return n;
  }

  private void handle(HttpExchange x) throws IOException {
    String path = x.getRequestURI().getPath();
    String query = x.getRequestURI().getQuery();
    byte[] body = x.getRequestBody().readAllBytes();
    synchronized (this) {
      requests.add(x.getRequestMethod() + " " + x.getRequestURI());
    }
    if (x.getRequestMethod().equals("GET") && path.startsWith("/v1/metrics/")) {
      if (definitionsDown) {
        respond(x, 503, "{\"error\":\"down\"}", -1);
        return;
      }
      String name = path.substring("/v1/metrics/".length());
      String d = query != null && query.startsWith("version=") ? versions.get(name + "@" + query.substring(8)) : definitions.get(name);
      if (d == null) respond(x, 404, "{\"error\":\"unknown metric\"}", -1);
      else respond(x, 200, d, -1);
      return;
    }
    if (x.getRequestMethod().equals("POST") && path.equals("/v1/reports")) {
      int[] next;
      synchronized (this) {
        next = script.poll();
      }
      if (next != null && next[0] != 202) {
        String answer = scriptedBody;
        scriptedBody = null;
        synchronized (this) {
          refused.add(new String(body, StandardCharsets.UTF_8));
        }
        respond(x, next[0], answer == null ? "{\"error\":\"scripted\"}" : answer, next[1]);
        return;
      }
      String text = new String(body, StandardCharsets.UTF_8);
      int n = text.split("\"id\":").length - 1;
      synchronized (this) {
        batches.add(text);
      }
      String retired = retiredInAnswer;
      respond(x, 202, "{\"accepted\":" + n + ",\"duplicates\":0" + (retired == null ? "" : ",\"retired\":[{\"metric\":\"" + retired + "\"}]") + "}", -1);
      return;
    }
    respond(x, 404, "{}", -1);
  }

  private static void respond(HttpExchange x, int status, String body, int retryAfter) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", "application/json");
    if (retryAfter >= 0) x.getResponseHeaders().set("Retry-After", Integer.toString(retryAfter));
    x.sendResponseHeaders(status, b.length);
    try (OutputStream out = x.getResponseBody()) {
      out.write(b);
    }
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
