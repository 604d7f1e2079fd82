// Spark's own reducer-side classes against the daemon's block server: the
// interop test of package blockserver (interop_test.go) compiles this
// against one Spark version's jars and compares what it prints.
//
// Arguments: host port useOldFetchProtocol blockIds(comma-separated)
//            exec algorithm checksum(decimal) shuffle map reduce
//            [auth secret]
// auth is none (the default), sasl, sasl-enc (SASL with auth-conf), ae-ctr
// or ae-gcm (AuthEngine, spark.network.crypto.enabled, with that cipher).
// Output, one line each: "block <id> <hex of its bytes>" or
// "fail <id> <exception class>", then "diagnose <cause>" or
// "diagnose-fail <exception class>", then "dirs <comma-separated dirs>" or
// "dirs-fail <exception class>".

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.spark.network.TransportContext;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientBootstrap;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.NoOpRpcHandler;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.ExternalBlockStoreClient;
import org.apache.spark.network.shuffle.OneForOneBlockFetcher;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;

public final class SparkFetchClient {
  private SparkFetchClient() {}

  public static void main(String[] args) throws Exception {
    String host = args[0];
    int port = Integer.parseInt(args[1]);
    Map<String, String> settings = new HashMap<>();
    settings.put("spark.shuffle.useOldFetchProtocol", args[2]);
    String[] ids = args[3].split(",");
    String exec = args[4];
    String auth = args.length > 10 ? args[10] : "none";
    final String secret = args.length > 11 ? args[11] : "";
    boolean authEnabled = !auth.equals("none");
    settings.put("spark.network.crypto.enabled", String.valueOf(auth.startsWith("ae-")));
    settings.put("spark.network.crypto.saslFallback", "false");
    if (auth.equals("ae-gcm")) {
      settings.put("spark.network.crypto.cipher", "AES/GCM/NoPadding");
    }
    settings.put("spark.authenticate.enableSaslEncryption", String.valueOf(auth.equals("sasl-enc")));
    TransportConf conf = new TransportConf("shuffle", new MapConfigProvider(settings));
    SecretKeyHolder keys = new SecretKeyHolder() {
      @Override
      public String getSaslUser(String appId) {
        return "sparkSaslUser";
      }

      @Override
      public String getSecretKey(String appId) {
        return secret;
      }
    };
    List<TransportClientBootstrap> bootstraps = new ArrayList<>();
    if (authEnabled) {
      bootstraps.add(new AuthClientBootstrap(conf, "app", keys));
    }
    TransportContext context = new TransportContext(conf, new NoOpRpcHandler());
    TransportClientFactory factory = context.createClientFactory(bootstraps);
    TransportClient client;
    try {
      client = factory.createClient(host, port);
    } catch (Exception e) {
      System.out.println("connect-fail " + e.getClass().getSimpleName());
      return;
    }
    CountDownLatch done = new CountDownLatch(ids.length);
    Map<String, String> got = new ConcurrentHashMap<>();
    BlockFetchingListener listener = new BlockFetchingListener() {
      @Override
      public void onBlockFetchSuccess(String id, ManagedBuffer data) {
        try {
          ByteBuffer b = data.nioByteBuffer();
          StringBuilder s = new StringBuilder();
          while (b.hasRemaining()) {
            s.append(String.format("%02x", b.get()));
          }
          got.put(id, "block " + id + " " + s);
        } catch (Exception e) {
          got.put(id, "fail " + id + " " + e.getClass().getSimpleName());
        }
        done.countDown();
      }

      @Override
      public void onBlockFetchFailure(String id, Throwable e) {
        got.put(id, "fail " + id + " " + e.getClass().getSimpleName());
        done.countDown();
      }
    };
    new OneForOneBlockFetcher(client, "app", exec, ids, listener, conf).start();
    if (!done.await(30, TimeUnit.SECONDS)) {
      throw new IllegalStateException("fetch did not end in 30 s");
    }
    for (String id : ids) {
      System.out.println(got.get(id));
    }
    ExternalBlockStoreClient store = new ExternalBlockStoreClient(conf, authEnabled ? keys : null, authEnabled, 30000);
    store.init("app");
    try {
      System.out.println("diagnose " + store.diagnoseCorruption(host, port, exec,
          Integer.parseInt(args[7]), Long.parseLong(args[8]), Integer.parseInt(args[9]),
          Long.parseLong(args[6]), args[5]));
    } catch (RuntimeException e) {
      System.out.println("diagnose-fail " + e.getClass().getSimpleName());
    }
    CompletableFuture<Map<String, String[]>> dirs = new CompletableFuture<>();
    store.getHostLocalDirs(host, port, new String[] {exec}, dirs);
    try {
      System.out.println("dirs " + String.join(",", dirs.get(30, TimeUnit.SECONDS).get(exec)));
    } catch (java.util.concurrent.ExecutionException e) {
      System.out.println("dirs-fail " + e.getCause().getClass().getSimpleName());
    }
    store.close();
    client.close();
    factory.close();
    context.close();
  }
}
