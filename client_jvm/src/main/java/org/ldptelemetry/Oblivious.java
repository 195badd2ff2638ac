package org.ldptelemetry;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The client's requests through an Oblivious HTTP relay (RFC 9458): each upload and each
 * definition fetch is written as a Binary HTTP request (RFC 9292), sealed to the
 * collector's gateway key and posted to the relay, which forwards it without being able
 * to read it; the collector opens it without learning who sent it. Only the key
 * configuration is fetched from the collector directly: when the client is made, then on
 * a thread of its own at a random moment away from the uploads, never right before one;
 * or pinned by the app and never fetched. A key the gateway no longer has (RFC 9458
 * §5.3) is fetched again once and the request sealed anew. As client_sdk/ohttp does; see
 * docs/reference/ohttp.md.
 */
final class Oblivious extends AuthorizingTransport {
  static final String GATEWAY_PATH = "/.well-known/ohttp-gateway";
  static final String KEYS_TYPE = "application/ohttp-keys";
  static final String REQUEST_TYPE = "message/ohttp-req";
  static final String RESPONSE_TYPE = "message/ohttp-res";
  static final String KEY_PROBLEM = "https://iana.org/assignments/http-problem-types#ohttp-key";
  static final long KEYS_TTL = 3_600_000;
  static final long REFRESH_LEAST = 10_000;
  static final long REFRESH_SPREAD = 60_000;
  private static final byte[] REQUEST_LABEL = Hpke.ascii("message/bhttp request");
  private static final byte[] RESPONSE_LABEL = Hpke.ascii("message/bhttp response");

  /** One key configuration (RFC 9458 §3.1) this client can seal to. */
  static final class KeyConfig {
    final int keyId;
    final byte[] publicKey;

    KeyConfig(int keyId, byte[] publicKey) {
      this.keyId = keyId;
      this.publicKey = publicKey;
    }
  }

  private final String collector;
  private final String relay;
  private final Transport inner;
  private final LongSupplier clock;
  private final boolean pinned;
  private final SecureRandom random = new SecureRandom();
  private final Object lock = new Object();
  private KeyConfig config;
  private long fetchedAt;
  private boolean fetching;
  private long refreshAt = -1;
  private Thread worker;
  private boolean closed;
  volatile int keyFetches;

  Oblivious(String collector, String relay, byte[] pinnedKeys, Transport inner, LongSupplier clock) {
    this.collector = collector;
    this.relay = relay;
    this.inner = inner;
    this.clock = clock;
    this.pinned = pinnedKeys != null;
    if (pinnedKeys != null) {
      config = usable(pinnedKeys);
      if (config == null) throw new IllegalArgumentException("relayKeys holds no key configuration this client can use");
    }
  }

  // -- Binary HTTP (RFC 9292), known length --------------------------------------------------

  static void varint(ByteArrayOutputStream out, long n) {
    if (n < 0x40) {
      out.write((int) n);
    } else if (n < 0x4000) {
      out.write((int) (0x40 | (n >> 8)));
      out.write((int) n & 0xff);
    } else if (n < 0x40000000) {
      out.write((int) (0x80 | (n >> 24)));
      out.write((int) (n >> 16) & 0xff);
      out.write((int) (n >> 8) & 0xff);
      out.write((int) n & 0xff);
    } else {
      throw new IllegalArgumentException("too long for this encoder");
    }
  }

  private static void withLength(ByteArrayOutputStream out, byte[] bytes) {
    varint(out, bytes.length);
    out.write(bytes, 0, bytes.length);
  }

  /** A known-length request, every section written (the empty trailers too), as the reference does. */
  static byte[] binaryRequest(String method, String scheme, String authority, String path, String contentType, byte[] body) {
    return binaryRequest(method, scheme, authority, path, contentType, body, null);
  }

  /** As above, with an {@code authorization} field (the app's ingest key) after the content type. */
  static byte[] binaryRequest(
      String method, String scheme, String authority, String path, String contentType, byte[] body, String authorization) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    varint(out, 0);
    for (String s : new String[] {method, scheme, authority, path}) withLength(out, s.getBytes(StandardCharsets.UTF_8));
    ByteArrayOutputStream fields = new ByteArrayOutputStream();
    if (contentType != null) {
      withLength(fields, Hpke.ascii("content-type"));
      withLength(fields, contentType.getBytes(StandardCharsets.ISO_8859_1));
    }
    if (authorization != null) {
      withLength(fields, Hpke.ascii("authorization"));
      withLength(fields, authorization.getBytes(StandardCharsets.ISO_8859_1));
    }
    withLength(out, fields.toByteArray());
    withLength(out, body == null ? new byte[0] : body);
    varint(out, 0);
    return out.toByteArray();
  }

  /** {@code method url} (a POST with a JSON body) as the Binary HTTP request that is sealed. */
  static byte[] binaryRequest(String method, String url, byte[] body) throws IOException {
    return binaryRequest(method, url, body, null);
  }

  /** As above, with the app's ingest key ({@code authorization}) inside, or none when null. */
  static byte[] binaryRequest(String method, String url, byte[] body, String authorization) throws IOException {
    URI u;
    try {
      u = new URI(url);
    } catch (URISyntaxException e) {
      throw new IOException("bad URL " + url, e);
    }
    String scheme = u.getScheme().toLowerCase(java.util.Locale.ROOT);
    int port = u.getPort();
    boolean defaultPort = port == -1 || (scheme.equals("https") && port == 443) || (scheme.equals("http") && port == 80);
    // RFC 3986 §6.2.2.1 and §6.2.3: the host in lower case, no default port
    String authority = u.getHost().toLowerCase(java.util.Locale.ROOT) + (defaultPort ? "" : ":" + port);
    String path = (u.getRawPath() == null || u.getRawPath().isEmpty() ? "/" : u.getRawPath()) + (u.getRawQuery() == null ? "" : "?" + u.getRawQuery());
    return binaryRequest(method, scheme, authority, path, body == null ? null : "application/json", body, authorization);
  }

  private static final class Reader {
    final byte[] b;
    int at;

    Reader(byte[] b) {
      this.b = b;
    }

    boolean done() {
      return at >= b.length;
    }

    long varint() throws IOException {
      if (done()) return 0; // the end reads as empty sections (§3.8)
      int first = b[at] & 0xff;
      int size = 1 << (first >> 6);
      if (at + size > b.length) throw new IOException("Binary HTTP: truncated integer");
      long n = first & 0x3f;
      for (int i = 1; i < size; i++) n = (n << 8) | (b[at + i] & 0xff);
      at += size;
      return n;
    }

    byte[] take(long n) throws IOException {
      if (n > b.length - at) throw new IOException("Binary HTTP: truncated message");
      byte[] out = java.util.Arrays.copyOfRange(b, at, at + (int) n);
      at += (int) n;
      return out;
    }

    Map<String, String> fields() throws IOException {
      Reader section = new Reader(take(varint()));
      Map<String, String> out = new HashMap<>();
      while (!section.done()) {
        String name = new String(section.take(section.varint()), StandardCharsets.ISO_8859_1);
        out.put(name, new String(section.take(section.varint()), StandardCharsets.ISO_8859_1));
      }
      return out;
    }
  }

  /** A known-length response (framing 1), interim responses skipped. */
  static Response decodeResponse(byte[] bytes) throws IOException {
    Reader r = new Reader(bytes);
    if (r.varint() != 1) throw new IOException("Binary HTTP: not a known-length response");
    long status = r.varint();
    while (status >= 100 && status < 200) {
      r.fields();
      status = r.varint();
    }
    if (status < 200 || status > 599) throw new IOException("Binary HTTP: status " + status);
    Map<String, String> headers = r.fields();
    byte[] body = r.take(r.varint());
    return new Response((int) status, headers, body);
  }

  // -- key configurations (RFC 9458 §3) ---------------------------------------------------------

  /** The first configuration of an application/ohttp-keys body this client can use, or null. */
  static KeyConfig usable(byte[] keys) {
    List<KeyConfig> out = new ArrayList<>();
    int at = 0;
    while (at + 2 <= keys.length) {
      int length = ((keys[at] & 0xff) << 8) | (keys[at + 1] & 0xff);
      int start = at + 2;
      int end = start + length;
      if (end > keys.length || length < 3) break;
      int kem = ((keys[start + 1] & 0xff) << 8) | (keys[start + 2] & 0xff);
      if (kem == Hpke.KEM_X25519 && length >= 3 + Hpke.NENC + 2) {
        int keyId = keys[start] & 0xff;
        byte[] pk = java.util.Arrays.copyOfRange(keys, start + 3, start + 3 + Hpke.NENC);
        int p = start + 3 + Hpke.NENC;
        int count = ((keys[p] & 0xff) << 8) | (keys[p + 1] & 0xff);
        for (int s = p + 2; s + 4 <= Math.min(end, p + 2 + count); s += 4) {
          int kdf = ((keys[s] & 0xff) << 8) | (keys[s + 1] & 0xff);
          int aead = ((keys[s + 2] & 0xff) << 8) | (keys[s + 3] & 0xff);
          if (kdf == Hpke.KDF_SHA256 && aead == Hpke.AEAD_AES128GCM) {
            out.add(new KeyConfig(keyId, pk));
            break;
          }
        }
      }
      at = end;
    }
    return out.isEmpty() ? null : out.get(0);
  }

  /** A sealed request and what opens its answer. */
  static final class Sealed {
    final byte[] body;
    private final Hpke.Context context;

    Sealed(byte[] body, Hpke.Context context) {
      this.body = body;
      this.context = context;
    }

    /** Decapsulate the gateway's answer (RFC 9458 §4.4). */
    byte[] open(byte[] response) throws GeneralSecurityException {
      if (response.length < RESPONSE_NONCE + 16) throw new GeneralSecurityException("ohttp: the encapsulated response is too short");
      byte[] responseNonce = java.util.Arrays.copyOfRange(response, 0, RESPONSE_NONCE);
      byte[][] keys = responseKeys(context, responseNonce);
      return Hpke.aesGcm(javax.crypto.Cipher.DECRYPT_MODE, keys[0], keys[1], new byte[0], java.util.Arrays.copyOfRange(response, RESPONSE_NONCE, response.length));
    }
  }

  static final int RESPONSE_NONCE = Math.max(Hpke.NN, Hpke.NK);

  /** The response's AEAD key and nonce (RFC 9458 §4.4) for a request's HPKE context. */
  static byte[][] responseKeys(Hpke.Context context, byte[] responseNonce) throws GeneralSecurityException {
    byte[] secret = context.export(RESPONSE_LABEL, RESPONSE_NONCE);
    byte[] prk = Hpke.extract(Hpke.concat(context.enc, responseNonce), secret);
    return new byte[][] {Hpke.expand(prk, Hpke.ascii("key"), Hpke.NK), Hpke.expand(prk, Hpke.ascii("nonce"), Hpke.NN)};
  }

  /** Encapsulate a Binary HTTP request for {@code config} (RFC 9458 §4.3) with an ephemeral pair. */
  static Sealed encapsulate(KeyConfig config, byte[] request, byte[][] ephemeral) throws GeneralSecurityException {
    byte[] header = Hpke.concat(new byte[] {(byte) config.keyId}, Hpke.i2osp(Hpke.KEM_X25519, 2), Hpke.i2osp(Hpke.KDF_SHA256, 2), Hpke.i2osp(Hpke.AEAD_AES128GCM, 2));
    Hpke.Context context = Hpke.setupBaseS(config.publicKey, Hpke.concat(REQUEST_LABEL, new byte[] {0}, header), ephemeral);
    byte[] body = Hpke.concat(header, context.enc, context.seal(new byte[0], request));
    return new Sealed(body, context);
  }

  // -- the transport ------------------------------------------------------------------------------

  /** Sealed, with {@code authorization} (the app's ingest key) inside the sealed request only. */
  @Override
  public Response exchange(String method, String url, byte[] body, String contentType, String accept, String authorization)
      throws IOException {
    byte[] request = binaryRequest(method, url, body, authorization);
    for (int attempt = 0; attempt < 2; attempt++) {
      KeyConfig key = attempt == 0 ? current() : fetch();
      Sealed sealed;
      try {
        sealed = encapsulate(key, request, Hpke.generate(random));
      } catch (GeneralSecurityException e) {
        throw new IOException("ohttp: cannot seal (" + e.getMessage() + ")", e);
      }
      Response answer = inner.exchange("POST", relay, sealed.body, REQUEST_TYPE, RESPONSE_TYPE);
      if (isKeyProblem(answer)) {
        if (attempt == 0 && !pinned) continue; // rotated since fetched: fetch, seal anew
        throw new IOException("ohttp: the gateway refused the key it publishes; retrying later");
      }
      String type = answer.header("content-type");
      if (answer.status() != 200 || type == null || !type.startsWith(RESPONSE_TYPE)) {
        if (method.equals("GET") && Uploader.classify(answer.status(), true).equals("drop")) {
          // the relay or the gateway refused it: nothing was said about the metric
          throw new IOException("ohttp: the relay or gateway answered HTTP " + answer.status());
        }
        return answer;
      }
      try {
        return decodeResponse(sealed.open(answer.body()));
      } catch (GeneralSecurityException e) {
        throw new IOException("ohttp: the gateway's answer cannot be opened", e);
      }
    }
    throw new IOException("ohttp: unreachable");
  }

  private static boolean isKeyProblem(Response answer) {
    String type = answer.header("content-type");
    if (answer.status() != 400 || type == null || !type.contains("problem+json")) return false;
    try {
      Object problem = Json.parse(new String(answer.body(), StandardCharsets.UTF_8));
      return problem instanceof Map && KEY_PROBLEM.equals(((Map<?, ?>) problem).get("type"));
    } catch (RuntimeException e) {
      return false;
    }
  }

  // -- keys ---------------------------------------------------------------------------------------

  /** Fetch the keys now, off the upload path, on this transport's thread (the client calls this when made). */
  void prepare() {
    if (pinned) return;
    synchronized (lock) {
      if (config == null && refreshAt < 0) refreshAt = clock.getAsLong();
      start();
    }
  }

  /** The configuration for a request: never fetched here (an expired one schedules a refresh). */
  private KeyConfig current() throws IOException {
    synchronized (lock) {
      if (pinned) return config;
      if (config == null) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!closed && (fetching || due()) && System.nanoTime() < deadline) {
          try {
            lock.wait(100);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            break;
          }
        }
        if (config == null) {
          schedule();
          throw new IOException("ohttp: no gateway key configuration yet; fetching it apart");
        }
      } else if (clock.getAsLong() - fetchedAt >= KEYS_TTL) {
        schedule();
      }
      return config;
    }
  }

  private boolean due() {
    return refreshAt >= 0 && refreshAt <= clock.getAsLong();
  }

  private void schedule() {
    if (refreshAt < 0 && !fetching) refreshAt = clock.getAsLong() + REFRESH_LEAST + (long) (random.nextDouble() * REFRESH_SPREAD);
    start();
  }

  private void start() {
    if (closed) return;
    if (worker != null && worker.isAlive()) {
      lock.notifyAll();
      return;
    }
    worker = new Thread(this::run, "ldp-telemetry-keys");
    worker.setDaemon(true);
    worker.start();
  }

  private void run() {
    while (true) {
      synchronized (lock) {
        if (closed) return;
        if (refreshAt < 0 || clock.getAsLong() < refreshAt) {
          long wait = refreshAt < 0 ? 0 : Math.min(1000, Math.max(1, refreshAt - clock.getAsLong()));
          try {
            lock.wait(wait);
          } catch (InterruptedException e) {
            return;
          }
          continue;
        }
        refreshAt = -1;
        fetching = true;
      }
      boolean failed;
      try {
        fetch();
        failed = false;
      } catch (IOException | RuntimeException e) {
        failed = true;
      }
      synchronized (lock) {
        fetching = false;
        if (failed) schedule();
        lock.notifyAll();
      }
    }
  }

  /** Fetch the gateway's key configuration now. */
  private KeyConfig fetch() throws IOException {
    Response answer = inner.exchange("GET", collector + GATEWAY_PATH, null, null, KEYS_TYPE);
    if (answer.status() != 200) throw new IOException("ohttp: the gateway keys answered " + answer.status());
    KeyConfig found = usable(answer.body());
    if (found == null) throw new IOException("ohttp: the gateway publishes no key this client can use");
    synchronized (lock) {
      config = found;
      fetchedAt = clock.getAsLong();
      keyFetches++;
      lock.notifyAll();
    }
    return found;
  }

  @Override
  public void close() {
    synchronized (lock) {
      closed = true;
      lock.notifyAll();
    }
    inner.close();
  }
}
