import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientBootstrap;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.NoOpRpcHandler;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;

/**
 * Runs Spark's own client-side authentication (AuthClientBootstrap, which runs
 * AuthEngine or falls to SaslClientBootstrap as Spark's block clients do)
 * against a server, then sends RPCs and checks they come back unchanged.
 *
 * Usage: SparkAuthClient HOST, then one case per line on stdin:
 *   PORT NAME APP_ID SECRET HANDSHAKE CRYPTO SASL_ENCRYPTION VERSION CIPHER
 * PORT is the server's on HOST; each case connects on its own.
 * HANDSHAKE is "auth" or "none"; CRYPTO and SASL_ENCRYPTION "true"/"false"
 * (spark.network.crypto.enabled, spark.authenticate.enableSaslEncryption);
 * VERSION spark.network.crypto.authEngineVersion; CIPHER
 * spark.network.crypto.cipher; an optional tenth field lists the sizes of the
 * RPCs to send, comma-separated (default 5,200000,1). Prints "RESULT NAME OK" or
 * "RESULT NAME FAIL reason" per case.
 */
public final class SparkAuthClient {
  public static void main(String[] args) throws Exception {
    String host = args[0];
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      String[] all = line.trim().split(" ");
      int port = Integer.parseInt(all[0]);
      String[] f = Arrays.copyOfRange(all, 1, all.length);
      String name = f[0];
      String result;
      try {
        int[] sizes = {5, 200_000, 1};
        if (f.length > 8) {
          sizes = Arrays.stream(f[8].split(",")).mapToInt(Integer::parseInt).toArray();
        }
        result = run(host, port, f[1], f[2], f[3].equals("auth"), f[4], f[5], f[6], f[7], sizes);
      } catch (Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
          root = root.getCause();
        }
        result = "FAIL " + (t.getClass().getSimpleName() + ": " + t.getMessage() + " / "
            + root.getClass().getSimpleName() + ": " + root.getMessage()).replace('\n', ' ');
      }
      System.out.println("RESULT " + name + " " + result);
      System.out.flush();
    }
  }

  private static String run(String host, int port, String appId, String secret, boolean handshake,
      String crypto, String saslEncryption, String version, String cipher, int[] sizes)
      throws Exception {
    Map<String, String> m = new HashMap<>();
    m.put("spark.network.crypto.enabled", crypto);
    m.put("spark.authenticate.enableSaslEncryption", saslEncryption);
    m.put("spark.network.crypto.authEngineVersion", version);
    m.put("spark.network.crypto.cipher", cipher);
    m.put("spark.network.crypto.saslFallback", "false");
    m.put("spark.shuffle.io.numConnectionsPerPeer", "1");
    // Generous timeouts: a loaded CI machine runs this next to a race-detecting server.
    m.put("spark.network.auth.rpcTimeout", "120s");
    m.put("spark.shuffle.io.connectionTimeout", "120s");
    TransportConf conf = new TransportConf("shuffle", new MapConfigProvider(m));
    SecretKeyHolder keys = new SecretKeyHolder() {
      @Override
      public String getSaslUser(String id) {
        return "sparkSaslUser";
      }

      @Override
      public String getSecretKey(String id) {
        return secret;
      }
    };
    List<TransportClientBootstrap> bootstraps =
        handshake ? List.of(new AuthClientBootstrap(conf, appId, keys)) : List.of();
    try (TransportContext ctx = new TransportContext(conf, new NoOpRpcHandler());
         TransportClientFactory factory = ctx.createClientFactory(bootstraps)) {
      TransportClient client = factory.createClient(host, port);
      try {
        Random rnd = new Random(appId.hashCode());
        // By default a small RPC, then one that spans several SASL blocks and
        // GCM segments, then one of a single byte.
        for (int size : sizes) {
          byte[] payload = new byte[size];
          rnd.nextBytes(payload);
          ByteBuffer reply = client.sendRpcSync(ByteBuffer.wrap(payload), 120_000);
          byte[] got = new byte[reply.remaining()];
          reply.get(got);
          if (!Arrays.equals(payload, got)) {
            return "FAIL echo of " + size + " bytes differs (" + got.length + " bytes back)";
          }
        }
      } finally {
        client.close();
      }
    }
    return "OK";
  }
}
