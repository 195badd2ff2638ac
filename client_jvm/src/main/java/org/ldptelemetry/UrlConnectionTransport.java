package org.ldptelemetry;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;

/**
 * A transport on {@code java.net.HttpURLConnection}: what Android has (it lacks {@code
 * java.net.http}), and the default there.
 */
public final class UrlConnectionTransport extends AuthorizingTransport {
  private final int timeout;

  /** @param timeoutMillis to connect, and to wait for each answer */
  public UrlConnectionTransport(long timeoutMillis) {
    this.timeout = (int) Math.min(Integer.MAX_VALUE, timeoutMillis);
  }

  @Override
  public Response exchange(String method, String url, byte[] body, String contentType, String accept, String authorization)
      throws IOException {
    HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
    try {
      c.setConnectTimeout(timeout);
      c.setReadTimeout(timeout);
      c.setUseCaches(false);
      c.setInstanceFollowRedirects(false);
      c.setRequestMethod(method);
      if (accept != null) c.setRequestProperty("Accept", accept);
      if (authorization != null) c.setRequestProperty("Authorization", authorization);
      if (body != null) {
        c.setDoOutput(true);
        if (contentType != null) c.setRequestProperty("Content-Type", contentType);
        c.setFixedLengthStreamingMode(body.length);
        try (OutputStream out = c.getOutputStream()) {
          out.write(body);
        }
      }
      int status = c.getResponseCode();
      InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
      ByteArrayOutputStream buf = new ByteArrayOutputStream();
      if (in != null) {
        try (InputStream stream = in) {
          byte[] chunk = new byte[8192];
          for (int n; (n = stream.read(chunk)) > 0; ) buf.write(chunk, 0, n);
        }
      }
      return new Response(status, lastValues(c.getHeaderFields()), buf.toByteArray()); // the connection stays pooled
    } catch (IOException | RuntimeException e) {
      c.disconnect();
      throw e;
    }
  }
}
