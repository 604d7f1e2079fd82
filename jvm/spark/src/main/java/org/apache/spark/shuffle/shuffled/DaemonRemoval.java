package org.apache.spark.shuffle.shuffled;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.SparkConf;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientBootstrap;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.NoOpRpcHandler;
import org.apache.spark.network.util.ConfigProvider;
import org.apache.spark.network.util.TransportConf;

/**
 * The driver's side of the daemon block server's remove message (docs/serving.md): {@code u8 100,
 * string app_id, i32 shuffle_id} ({@code -1}: the whole application; strings as Spark's block
 * transfer messages write them, a big-endian {@code i32} length and UTF-8), answered by an
 * RpcResponse of {@code i64 map_outputs, i64 bytes}. It travels as an RpcRequest through Spark's
 * own {@link TransportClient}, with the bootstrap Spark's block transfer service uses under {@code
 * spark.authenticate} ({@link AuthClientBootstrap}: AuthEngine with {@code
 * spark.network.crypto.enabled}, else SASL), so the daemon authenticates it as it does a fetch.
 */
final class DaemonRemoval implements AutoCloseable {
  /** The message's type byte, one Spark's BlockTransferMessage does not use. */
  static final byte TYPE = 100;
  /** shuffle_id that removes the whole application. */
  static final int WHOLE_APPLICATION = -1;

  /** A daemon's block server. */
  record Address(String host, int port) {
    @Override
    public String toString() {
      return host + ":" + port;
    }
  }

  private final TransportContext context;
  private final TransportClientFactory factory;
  private final long timeoutMs;

  DaemonRemoval(SparkConf conf, Object securityManager, boolean authenticate) {
    TransportConf tc = new TransportConf("shuffle", provider(conf));
    context = new TransportContext(tc, new NoOpRpcHandler(), true);
    List<TransportClientBootstrap> boot =
        authenticate
            ? List.of(new AuthClientBootstrap(tc, conf.getAppId(), (SecretKeyHolder) securityManager))
            : List.of();
    factory = context.createClientFactory(boot);
    timeoutMs = conf.getTimeAsMs("spark.network.timeout", "120s");
  }

  /** Spark's settings as network-common reads them, as SparkTransportConf hands them over. */
  private static ConfigProvider provider(SparkConf conf) {
    return new ConfigProvider() {
      @Override
      public String get(String name) {
        String v = conf.get(name, null);
        if (v == null) {
          throw new NoSuchElementException(name);
        }
        return v;
      }

      @Override
      public Iterable<Map.Entry<String, String>> getAll() {
        java.util.List<Map.Entry<String, String>> all = new java.util.ArrayList<>();
        for (scala.Tuple2<String, String> t : conf.getAll()) {
          all.add(Map.entry(t._1(), t._2()));
        }
        return all;
      }
    };
  }

  /**
   * Removes {@code shuffleId} of {@code appId} (or the whole application) from the daemon at
   * {@code a}; returns {map outputs, bytes} removed.
   */
  long[] remove(Address a, String appId, int shuffleId) throws IOException, InterruptedException {
    TransportClient c = factory.createClient(a.host(), a.port());
    ByteBuffer reply = c.sendRpcSync(encode(appId, shuffleId), timeoutMs);
    return decode(reply, a);
  }

  /** The request's bytes. */
  static ByteBuffer encode(String appId, int shuffleId) {
    if (shuffleId < WHOLE_APPLICATION) {
      throw new IllegalArgumentException("shuffleId " + shuffleId + ": want >= 0, or -1");
    }
    byte[] app = appId.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(1 + 4 + app.length + 4);
    b.put(TYPE).putInt(app.length).put(app).putInt(shuffleId);
    return b.flip();
  }

  /** The reply's {map outputs, bytes}; anything but 16 bytes of two counts >= 0 is refused. */
  static long[] decode(ByteBuffer reply, Object from) throws IOException {
    if (reply.remaining() != 16) {
      throw new IOException("the daemon at " + from + " answered the remove message with "
          + reply.remaining() + " bytes, want 16 (i64 map_outputs, i64 bytes)");
    }
    long n = reply.getLong(reply.position());
    long bytes = reply.getLong(reply.position() + 8);
    if (n < 0 || bytes < 0) {
      throw new IOException("the daemon at " + from + " answered the remove message with "
          + n + " map outputs, " + bytes + " bytes: want counts >= 0");
    }
    return new long[] {n, bytes};
  }

  @Override
  public void close() {
    factory.close();
    context.close();
  }
}
