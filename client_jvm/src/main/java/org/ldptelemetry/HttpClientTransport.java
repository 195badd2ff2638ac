package org.ldptelemetry;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The default transport on a JVM: {@code java.net.http.HttpClient} (not on Android). */
public final class HttpClientTransport implements Transport {
  private final HttpClient client;
  private final Duration timeout;

  /** @param timeoutMillis to connect, and to wait for each answer */
  public HttpClientTransport(long timeoutMillis) {
    this(HttpClient.newBuilder().connectTimeout(Duration.ofMillis(timeoutMillis)).build(), timeoutMillis);
  }

  /** The app's own client (proxies, TLS), with a per-request timeout. */
  public HttpClientTransport(HttpClient client, long timeoutMillis) {
    this.client = client;
    this.timeout = Duration.ofMillis(timeoutMillis);
  }

  @Override
  public Response exchange(String method, String url, byte[] body, String contentType, String accept) throws IOException {
    return exchange(method, url, body, contentType, accept, null);
  }

  @Override
  public Response exchange(String method, String url, byte[] body, String contentType, String accept, String authorization)
      throws IOException {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).timeout(timeout);
    if (contentType != null) request.header("Content-Type", contentType);
    if (accept != null) request.header("Accept", accept);
    if (authorization != null) request.header("Authorization", authorization);
    request.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
    HttpResponse<byte[]> answer;
    try {
      answer = client.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    } catch (IllegalArgumentException e) {
      throw new IOException(e.getMessage(), e);
    }
    Map<String, String> headers = new HashMap<>();
    for (Map.Entry<String, List<String>> h : answer.headers().map().entrySet()) {
      if (!h.getValue().isEmpty()) headers.put(h.getKey(), h.getValue().get(h.getValue().size() - 1));
    }
    return new Response(answer.statusCode(), headers, answer.body());
  }
}
