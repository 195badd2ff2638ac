package org.ldptelemetry;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** The default transport on a JVM: {@code java.net.http.HttpClient} (not on Android). */
public final class HttpClientTransport extends AuthorizingTransport {
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
    return new Response(answer.statusCode(), lastValues(answer.headers().map()), answer.body());
  }
}
