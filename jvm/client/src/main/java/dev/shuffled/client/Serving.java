package dev.shuffled.client;

/**
 * Where the daemon serves the map outputs it committed to Spark's reducers (Registered's serving
 * tail, feature bit 7): the address an executor publishes in its map statuses.
 *
 * @param host the host executors publish (the daemon's {@code --serve-advertise} or the address it
 *     listens on), never empty
 * @param port the block server's TCP port, 1..65535
 * @param requireAuth the block server serves only authenticated connections, for every
 *     application ({@code --serve-require-auth})
 */
public record Serving(String host, int port, boolean requireAuth) {
  public Serving {
    java.util.Objects.requireNonNull(host, "host");
    if (host.isEmpty() || port < 1 || port > 65535) {
      throw new IllegalArgumentException(
          "serving address \"" + host + "\":" + port + ": want a host and a port 1..65535");
    }
  }
}
