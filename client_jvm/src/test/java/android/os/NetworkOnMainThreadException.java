package android.os;

/** Android's refusal of network I/O on the main thread, by name, for ClientTest. */
public class NetworkOnMainThreadException extends RuntimeException {
  private static final long serialVersionUID = 1L;
}
