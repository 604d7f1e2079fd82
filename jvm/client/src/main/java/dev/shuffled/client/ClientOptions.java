package dev.shuffled.client;

import java.time.Duration;
import java.util.Objects;

/**
 * Settings of a {@link ShuffledClient}. Immutable: start from {@link #DEFAULTS} and use the
 * {@code with*} methods.
 *
 * @param clientName the name sent in Hello, for the daemon's logs (at most 255 bytes of UTF-8)
 * @param connectTimeout bounds connecting and the handshake, together: connect(2) too, which
 *     blocks while a daemon that stopped accepting has a full listen backlog ({@link
 *     java.net.SocketTimeoutException} after it)
 * @param requestTimeout bounds the wait for each response; zero waits for ever. A request that
 *     times out fails with {@link java.net.SocketTimeoutException}; its map output can then only
 *     be aborted. A request whose frame is not written within it (the daemon stopped reading)
 *     fails the connection
 * @param maxOutstanding requests in flight on one connection at most (1..65536); callers beyond it
 *     wait, so memory stays bounded
 * @param maxFrame the largest response payload the client reads; a larger one closes the
 *     connection (65536..2^31-1)
 * @param dataPlane the default data plane of map outputs; {@link DataPlane#MEMFD} falls back to
 *     inline where the JDK or the daemon lacks it
 */
public record ClientOptions(
    String clientName,
    Duration connectTimeout,
    Duration requestTimeout,
    int maxOutstanding,
    int maxFrame,
    DataPlane dataPlane) {

  /** Name "shuffled-jvm-client", 10 s connect, 10 min per request, 1024 in flight, 64 MiB. */
  public static final ClientOptions DEFAULTS =
      new ClientOptions(
          "shuffled-jvm-client",
          Duration.ofSeconds(10),
          Duration.ofMinutes(10),
          1024,
          64 << 20,
          DataPlane.MEMFD);

  public ClientOptions {
    Objects.requireNonNull(clientName, "clientName");
    Objects.requireNonNull(connectTimeout, "connectTimeout");
    Objects.requireNonNull(requestTimeout, "requestTimeout");
    Objects.requireNonNull(dataPlane, "dataPlane");
    int n = clientName.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
    if (n > 255 || clientName.indexOf('\0') >= 0) {
      throw new IllegalArgumentException(
          "clientName \"" + clientName + "\": " + n + " bytes, want <= 255 and no NUL");
    }
    if (connectTimeout.isNegative() || connectTimeout.isZero()) {
      throw new IllegalArgumentException("connectTimeout " + connectTimeout + ": want > 0");
    }
    if (requestTimeout.isNegative()) {
      throw new IllegalArgumentException("requestTimeout " + requestTimeout + ": want >= 0");
    }
    if (maxOutstanding < 1 || maxOutstanding > 65536) {
      throw new IllegalArgumentException("maxOutstanding " + maxOutstanding + ": want 1..65536");
    }
    if (maxFrame < 65536) {
      throw new IllegalArgumentException("maxFrame " + maxFrame + ": want >= 65536");
    }
  }

  public ClientOptions withClientName(String v) {
    return new ClientOptions(v, connectTimeout, requestTimeout, maxOutstanding, maxFrame, dataPlane);
  }

  public ClientOptions withConnectTimeout(Duration v) {
    return new ClientOptions(clientName, v, requestTimeout, maxOutstanding, maxFrame, dataPlane);
  }

  public ClientOptions withRequestTimeout(Duration v) {
    return new ClientOptions(clientName, connectTimeout, v, maxOutstanding, maxFrame, dataPlane);
  }

  public ClientOptions withMaxOutstanding(int v) {
    return new ClientOptions(clientName, connectTimeout, requestTimeout, v, maxFrame, dataPlane);
  }

  public ClientOptions withMaxFrame(int v) {
    return new ClientOptions(
        clientName, connectTimeout, requestTimeout, maxOutstanding, v, dataPlane);
  }

  public ClientOptions withDataPlane(DataPlane v) {
    return new ClientOptions(clientName, connectTimeout, requestTimeout, maxOutstanding, maxFrame, v);
  }
}
