// Spark's own reducer-side classes against the daemon's block server: the
// interop test of package blockserver (interop_test.go) compiles this
// against one Spark version's jars and compares what it prints.
//
// Arguments: host port useOldFetchProtocol blockIds(comma-separated)
//            exec algorithm checksum(decimal) shuffle map reduce
// Output, one line each: "block <id> <hex of its bytes>" or
// "fail <id> <exception class>", then "diagnose <cause>", then
// "dirs <comma-separated dirs>" or "dirs-fail <exception class>".

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.spark.network.TransportContext;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientFactory;
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
    TransportConf conf = new TransportConf("shuffle", new MapConfigProvider(settings));
    TransportContext context = new TransportContext(conf, new NoOpRpcHandler());
    TransportClientFactory factory = context.createClientFactory();
    TransportClient client = factory.createClient(host, port);
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
    ExternalBlockStoreClient store = new ExternalBlockStoreClient(conf, null, false, 30000);
    store.init("app");
    System.out.println("diagnose " + store.diagnoseCorruption(host, port, exec,
        Integer.parseInt(args[7]), Long.parseLong(args[8]), Integer.parseInt(args[9]),
        Long.parseLong(args[6]), args[5]));
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
