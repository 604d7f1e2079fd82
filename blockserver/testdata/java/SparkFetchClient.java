// Spark's own reducer-side classes against the daemon's block server: the
// interop test of package blockserver (interop_test.go) compiles this
// against one Spark version's jars and compares what it prints. One JVM
// runs every case, so the test pays for one JVM start per Spark version.
//
// Usage: SparkFetchClient, then one case per line on stdin, its fields
// separated by single spaces:
//   NAME HOST PORT USE_OLD_FETCH_PROTOCOL BLOCK_IDS EXEC ALGORITHM CHECKSUM
//   SHUFFLE MAP REDUCE AUTH SECRET
// BLOCK_IDS is comma-separated; CHECKSUM decimal. AUTH is none, sasl,
// sasl-enc (SASL with auth-conf), ae-ctr or ae-gcm (AuthEngine,
// spark.network.crypto.enabled, with that cipher); SECRET is "-" for none.
// Output per case, each line prefixed by "RESULT NAME ": "connect-fail
// <exception class>" alone, or: per block "block <id> <hex of its bytes>"
// or "fail <id> <exception class>", then "diagnose <cause>" or
// "diagnose-fail <exception class>", then "dirs <comma-separated dirs>" or
// "dirs-fail <exception class>". A case that ends in an unexpected exception
// prints "RESULT NAME error <exception>". Every case ends with "END NAME".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
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
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private SparkFetchClient() {}

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      String[] f = line.trim().split(" ");
      String name = f[0];
      List<String> out = new ArrayList<>();
      try {
        if (f.length != 13) {
          throw new IllegalArgumentException("want 13 fields, got " + f.length + ": " + line);
        }
        run(f, out);
      } catch (Exception e) {
        out.add("error " + (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' '));
      }
      StringBuilder s = new StringBuilder();
      for (String l : out) {
        s.append("RESULT ").append(name).append(' ').append(l).append('\n');
      }
      s.append("END ").append(name).append('\n');
      System.out.print(s);
      System.out.flush();
    }
  }

  private static String hex(ByteBuffer b) {
    char[] s = new char[2 * b.remaining()];
    for (int i = 0; b.hasRemaining(); i += 2) {
      int v = b.get() & 0xff;
      s[i] = HEX[v >>> 4];
      s[i + 1] = HEX[v & 0xf];
    }
    return new String(s);
  }

  private static void run(String[] f, List<String> out) throws Exception {
    String host = f[1];
    int port = Integer.parseInt(f[2]);
    Map<String, String> settings = new HashMap<>();
    settings.put("spark.shuffle.useOldFetchProtocol", f[3]);
    String[] ids = f[4].split(",");
    String exec = f[5];
    String algorithm = f[6];
    long checksum = Long.parseLong(f[7]);
    int shuffle = Integer.parseInt(f[8]);
    long map = Long.parseLong(f[9]);
    int reduce = Integer.parseInt(f[10]);
    String auth = f[11];
    final String secret = f[12].equals("-") ? "" : f[12];
    boolean authEnabled = !auth.equals("none");
    settings.put("spark.network.crypto.enabled", String.valueOf(auth.startsWith("ae-")));
    settings.put("spark.network.crypto.saslFallback", "false");
    if (auth.equals("ae-gcm")) {
      settings.put("spark.network.crypto.cipher", "AES/GCM/NoPadding");
    }
    settings.put("spark.authenticate.enableSaslEncryption", String.valueOf(auth.equals("sasl-enc")));
    // Generous timeouts: a loaded CI machine runs this next to a race-detecting server.
    settings.put("spark.network.auth.rpcTimeout", "120s");
    settings.put("spark.shuffle.io.connectionTimeout", "120s");
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
    try (TransportContext context = new TransportContext(conf, new NoOpRpcHandler());
         TransportClientFactory factory = context.createClientFactory(bootstraps)) {
      TransportClient client;
      try {
        client = factory.createClient(host, port);
      } catch (Exception e) {
        out.add("connect-fail " + e.getClass().getSimpleName());
        return;
      }
      try {
        fetch(client, conf, exec, ids, out);
      } finally {
        client.close();
      }
    }
    ExternalBlockStoreClient store = new ExternalBlockStoreClient(conf, authEnabled ? keys : null, authEnabled, 30000);
    try {
      store.init("app");
      try {
        out.add("diagnose " + store.diagnoseCorruption(host, port, exec, shuffle, map, reduce, checksum, algorithm));
      } catch (RuntimeException e) {
        out.add("diagnose-fail " + e.getClass().getSimpleName());
      }
      CompletableFuture<Map<String, String[]>> dirs = new CompletableFuture<>();
      store.getHostLocalDirs(host, port, new String[] {exec}, dirs);
      try {
        out.add("dirs " + String.join(",", dirs.get(30, TimeUnit.SECONDS).get(exec)));
      } catch (ExecutionException e) {
        out.add("dirs-fail " + e.getCause().getClass().getSimpleName());
      }
    } finally {
      store.close();
    }
  }

  private static void fetch(TransportClient client, TransportConf conf, String exec, String[] ids,
      List<String> out) throws InterruptedException {
    CountDownLatch done = new CountDownLatch(ids.length);
    Map<String, String> got = new ConcurrentHashMap<>();
    BlockFetchingListener listener = new BlockFetchingListener() {
      @Override
      public void onBlockFetchSuccess(String id, ManagedBuffer data) {
        try {
          got.put(id, "block " + id + " " + hex(data.nioByteBuffer()));
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
      out.add(got.get(id));
    }
  }
}
