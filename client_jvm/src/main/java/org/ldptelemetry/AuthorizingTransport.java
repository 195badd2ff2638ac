package org.ldptelemetry;

import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A transport that sends the Authorization header itself: the SDK's own transports. */
abstract class AuthorizingTransport implements Transport {
  @Override
  public final Response exchange(String method, String url, byte[] body, String contentType, String accept) throws IOException {
    return exchange(method, url, body, contentType, accept, null);
  }

  @Override
  public abstract Response exchange(String method, String url, byte[] body, String contentType, String accept, String authorization)
      throws IOException;

  /** The last value of each header that has one (a null name, the status line, is skipped). */
  static Map<String, String> lastValues(Map<String, List<String>> fields) {
    Map<String, String> headers = new HashMap<>();
    for (Map.Entry<String, List<String>> h : fields.entrySet()) {
      if (h.getKey() != null && !h.getValue().isEmpty()) headers.put(h.getKey(), h.getValue().get(h.getValue().size() - 1));
    }
    return headers;
  }
}
