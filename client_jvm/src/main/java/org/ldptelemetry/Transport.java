package org.ldptelemetry;

import java.io.IOException;
import java.util.Collections;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * How the client reaches the collector: one HTTP exchange at a time. Two come with the SDK:
 * {@link HttpClientTransport} ({@code java.net.http}, the default on a JVM) and {@link
 * UrlConnectionTransport} ({@code HttpURLConnection}, the default on Android, which has no
 * {@code java.net.http}). An app may bring its own (OkHttp, Cronet, a test double).
 */
public interface Transport extends AutoCloseable {
  /**
   * Send one request and return the answer, whatever its status.
   *
   * @param method "GET" or "POST"
   * @param url the absolute URL
   * @param body the body (POST), or null
   * @param contentType the body's Content-Type, or null
   * @param accept the Accept header, or null
   * @throws IOException no answer came (the client retries later)
   */
  Response exchange(String method, String url, byte[] body, String contentType, String accept) throws IOException;

  /**
   * As {@link #exchange(String, String, byte[], String, String)}, with {@code Authorization:
   * authorization} when it is not null: the app's ingest key, {@code "Bearer <key>"}. The SDK's
   * transports send it; an app's own is given one only inside sealed requests, through a
   * relay ({@link ClientOptions.Builder#ingestKey}), so it need not override this.
   *
   * @param authorization the Authorization header's value, or null
   * @throws IOException no answer came (the client retries later)
   */
  default Response exchange(String method, String url, byte[] body, String contentType, String accept, String authorization)
      throws IOException {
    if (authorization != null) throw new IOException(getClass().getName() + " cannot send an ingest key");
    return exchange(method, url, body, contentType, accept);
  }

  @Override
  default void close() {}

  /** An HTTP answer: its status, headers (names in lower case) and body. */
  final class Response {
    private final int status;
    private final Map<String, String> headers;
    private final byte[] body;

    /**
     * @param status the HTTP status
     * @param headers the headers (any case; the last value of a repeated one)
     * @param body the body (empty, never null)
     */
    public Response(int status, Map<String, String> headers, byte[] body) {
      this.status = status;
      Map<String, String> h = new TreeMap<>();
      for (Map.Entry<String, String> e : headers.entrySet()) {
        if (e.getKey() != null) h.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
      }
      this.headers = Collections.unmodifiableMap(h);
      this.body = body == null ? new byte[0] : body;
    }

    public int status() {
      return status;
    }

    /** A header's value, or null; {@code name} in any case. */
    public String header(String name) {
      return headers.get(name.toLowerCase(Locale.ROOT));
    }

    public Map<String, String> headers() {
      return headers;
    }

    public byte[] body() {
      return body;
    }
  }
}
