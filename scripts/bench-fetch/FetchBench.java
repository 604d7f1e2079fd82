import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.spark.SparkConf;
import org.apache.spark.network.BlockDataManager;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.buffer.FileSegmentManagedBuffer;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.crypto.AuthServerBootstrap;
import org.apache.spark.network.netty.NettyBlockRpcServer;
import org.apache.spark.network.server.RpcHandler;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.TransportServer;
import org.apache.spark.network.server.TransportServerBootstrap;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.ExecutorDiskUtils;
import org.apache.spark.network.shuffle.ExternalBlockHandler;
import org.apache.spark.network.shuffle.ExternalBlockStoreClient;
import org.apache.spark.network.shuffle.protocol.ExecutorShuffleInfo;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;
import org.apache.spark.serializer.JavaSerializer;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockId;

/**
 * Reduce-side fetch benchmark with Spark's own classes (scripts/bench-fetch.sh).
 *
 * <pre>
 * layout DIR MAPS REDUCES BLOCK_BYTES
 *     writes shuffle 0 of one executor in Spark's sort-shuffle layout under DIR/local0
 *     (64 sub-directories): MAPS data and index files, REDUCES blocks of BLOCK_BYTES each.
 * serve PORT [options]
 *     runs Spark's ExternalBlockHandler (the external shuffle service's handler) in a
 *     TransportServer on PORT, with AuthServerBootstrap when a secret is given (the
 *     options below); prints "READY port" and serves until stdin closes.
 * serve-executor PORT APP DIR [options]
 *     the same with an executor's own block server instead: Spark's NettyBlockRpcServer (what
 *     NettyBlockTransferService puts in an executor's TransportServer) over a BlockDataManager
 *     that answers a shuffle block, or a batch of contiguous ones, of the layout under DIR with
 *     a FileSegmentManagedBuffer of its data file, as an executor's BlockManager does through
 *     IndexShuffleBlockResolver; it serves nothing else.
 * fetch HOST PORT APP EXEC MAPS REDUCES ROUNDS SERVER_PID [options]
 *     fetches every block of shuffle 0 (one fetchBlocks per map, at most 4 in flight)
 *     ROUNDS times with ExternalBlockStoreClient, and prints per round the MB/s and the
 *     server's CPU seconds per GB (from /proc/SERVER_PID/stat), then the medians.
 *     Options: register DIR (register the executor with the server first, as an executor
 *     registers with the external shuffle service), batch (one batch block id per map:
 *     shuffle_0_M_0_REDUCES, as Spark's batch fetch asks), secret SECRET,
 *     crypto true|false (spark.network.crypto.enabled), version 1|2, cipher C,
 *     saslEncryption true|false.
 * </pre>
 */
public final class FetchBench {
  private static final String SORT = "org.apache.spark.shuffle.sort.SortShuffleManager";
  private static final int SUBDIRS = 64;

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "layout" -> layout(Path.of(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
          Long.parseLong(args[4]));
      case "serve" -> serve(Integer.parseInt(args[1]), options(args, 2));
      case "serve-executor" -> serveExecutor(Integer.parseInt(args[1]), args[2], Path.of(args[3]),
          options(args, 4));
      case "fetch" -> fetch(args);
      default -> throw new IllegalArgumentException("unknown mode " + args[0]);
    }
  }

  private static void layout(Path dir, int maps, int reduces, long blockBytes) throws IOException {
    String[] localDirs = {dir.resolve("local0").toString()};
    Random rnd = new Random(42);
    byte[] buf = new byte[1 << 20];
    for (int m = 0; m < maps; m++) {
      File data = new File(ExecutorDiskUtils.getFilePath(localDirs, SUBDIRS, "shuffle_0_" + m + "_0.data"));
      File index = new File(ExecutorDiskUtils.getFilePath(localDirs, SUBDIRS, "shuffle_0_" + m + "_0.index"));
      Files.createDirectories(data.toPath().getParent());
      Files.createDirectories(index.toPath().getParent());
      ByteBuffer idx = ByteBuffer.allocate(8 * (reduces + 1));
      long off = 0;
      idx.putLong(0);
      try (RandomAccessFile f = new RandomAccessFile(data, "rw")) {
        for (int r = 0; r < reduces; r++) {
          for (long left = blockBytes; left > 0; ) {
            int n = (int) Math.min(left, buf.length);
            rnd.nextBytes(buf);
            f.write(buf, 0, n);
            left -= n;
          }
          off += blockBytes;
          idx.putLong(off);
        }
      }
      Files.write(index.toPath(), idx.array());
    }
  }

  private static TransportConf conf(Map<String, String> opts) {
    Map<String, String> m = new HashMap<>();
    m.put("spark.network.crypto.enabled", opts.getOrDefault("crypto", "false"));
    m.put("spark.network.crypto.authEngineVersion", opts.getOrDefault("version", "1"));
    m.put("spark.network.crypto.cipher", opts.getOrDefault("cipher", "AES/CTR/NoPadding"));
    m.put("spark.authenticate.enableSaslEncryption", opts.getOrDefault("saslEncryption", "false"));
    m.put("spark.shuffle.io.numConnectionsPerPeer", "1");
    // No silent fall back from AuthEngine to SASL: measure what was asked.
    m.put("spark.network.crypto.saslFallback", "false");
    return new TransportConf("shuffle", new MapConfigProvider(m));
  }

  private static SecretKeyHolder keys(String secret) {
    return new SecretKeyHolder() {
      @Override
      public String getSaslUser(String appId) {
        return "sparkSaslUser";
      }

      @Override
      public String getSecretKey(String appId) {
        return secret;
      }
    };
  }

  private static Map<String, String> options(String[] args, int from) {
    Map<String, String> opts = new HashMap<>();
    for (int i = from; i < args.length; i++) {
      if (args[i].equals("batch")) {
        opts.put("batch", "true");
      } else {
        opts.put(args[i], args[++i]);
      }
    }
    return opts;
  }

  private static void serve(int port, Map<String, String> opts) throws Exception {
    TransportConf conf = conf(opts);
    serve(port, conf, new ExternalBlockHandler(conf, null), opts.get("secret"));
  }

  private static void serveExecutor(int port, String app, Path dir, Map<String, String> opts)
      throws Exception {
    String[] localDirs = {dir.resolve("local0").toString()};
    TransportConf conf = conf(opts);
    // A proxy, so that one source serves Spark 3.5 to 4.x, whose BlockDataManager methods for
    // uploads differ; a fetch calls getLocalBlockData only.
    BlockDataManager blocks = (BlockDataManager) Proxy.newProxyInstance(
        FetchBench.class.getClassLoader(), new Class<?>[] {BlockDataManager.class},
        (proxy, method, margs) -> switch (method.getName()) {
          case "getLocalBlockData" -> shuffleBlock(conf, localDirs, (BlockId) margs[0]);
          case "getLocalDiskDirs" -> localDirs.clone();
          case "toString" -> "FetchBench blocks";
          case "hashCode" -> System.identityHashCode(proxy);
          case "equals" -> proxy == margs[0];
          default -> throw new UnsupportedOperationException(method.getName());
        });
    RpcHandler handler =
        new NettyBlockRpcServer(app, new JavaSerializer(new SparkConf(false)), blocks);
    serve(port, conf, handler, opts.get("secret"));
  }

  /** A shuffle block or a batch of them, as IndexShuffleBlockResolver.getBlockData finds it. */
  private static ManagedBuffer shuffleBlock(TransportConf conf, String[] localDirs, BlockId id)
      throws IOException {
    int shuffle;
    long map;
    int start;
    int end;
    if (id instanceof ShuffleBlockId b) {
      shuffle = b.shuffleId();
      map = b.mapId();
      start = b.reduceId();
      end = start + 1;
    } else if (id instanceof ShuffleBlockBatchId b) {
      shuffle = b.shuffleId();
      map = b.mapId();
      start = b.startReduceId();
      end = b.endReduceId();
    } else {
      throw new IllegalArgumentException("not a shuffle block: " + id);
    }
    String base = "shuffle_" + shuffle + "_" + map + "_0";
    File index = new File(ExecutorDiskUtils.getFilePath(localDirs, SUBDIRS, base + ".index"));
    File data = new File(ExecutorDiskUtils.getFilePath(localDirs, SUBDIRS, base + ".data"));
    try (RandomAccessFile f = new RandomAccessFile(index, "r")) {
      f.seek(8L * start);
      long from = f.readLong();
      f.seek(8L * end);
      long to = f.readLong();
      return new FileSegmentManagedBuffer(conf, data, from, to - from);
    }
  }

  private static void serve(int port, TransportConf conf, RpcHandler handler, String secret)
      throws Exception {
    List<TransportServerBootstrap> bootstraps = new ArrayList<>();
    if (secret != null) {
      bootstraps.add(new AuthServerBootstrap(conf, keys(secret)));
    }
    try (TransportContext ctx = new TransportContext(conf, handler);
         TransportServer server = ctx.createServer(port, bootstraps)) {
      System.out.println("READY " + server.getPort());
      System.out.flush();
      while (System.in.read() >= 0) {
        // serve until stdin closes
      }
    }
  }

  private static long cpuTicks(String pid) throws IOException {
    String stat = Files.readString(Path.of("/proc", pid, "stat"), StandardCharsets.US_ASCII);
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    return Long.parseLong(f[11]) + Long.parseLong(f[12]); // utime, stime
  }

  private static void fetch(String[] args) throws Exception {
    String host = args[1];
    int port = Integer.parseInt(args[2]);
    String app = args[3];
    String exec = args[4];
    int maps = Integer.parseInt(args[5]);
    int reduces = Integer.parseInt(args[6]);
    int rounds = Integer.parseInt(args[7]);
    String serverPid = args[8];
    Map<String, String> opts = options(args, 9);
    boolean batch = opts.containsKey("batch");
    String secret = opts.get("secret");
    TransportConf conf = conf(opts);
    // USER_HZ: Linux reports /proc CPU times in clock ticks of 1/100 s.
    double tick = 0.01;
    try (ExternalBlockStoreClient client =
             new ExternalBlockStoreClient(conf, secret == null ? null : keys(secret), secret != null, 10_000)) {
      client.init(app);
      if (opts.containsKey("register")) {
        String[] localDirs = {Path.of(opts.get("register")).resolve("local0").toString()};
        client.registerWithShuffleServer(host, port, exec, new ExecutorShuffleInfo(localDirs, SUBDIRS, SORT));
      }
      double[] mbs = new double[rounds];
      double[] cpuPerGB = new double[rounds];
      for (int round = 0; round < rounds; round++) {
        AtomicLong bytes = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Semaphore inFlight = new Semaphore(4);
        CountDownLatch done = new CountDownLatch(maps);
        long cpu0 = cpuTicks(serverPid);
        long t0 = System.nanoTime();
        for (int m = 0; m < maps; m++) {
          String[] ids;
          if (batch) {
            ids = new String[] {"shuffle_0_" + m + "_0_" + reduces};
          } else {
            ids = new String[reduces];
            for (int r = 0; r < reduces; r++) {
              ids[r] = "shuffle_0_" + m + "_" + r;
            }
          }
          inFlight.acquire();
          int[] left = {ids.length};
          client.fetchBlocks(host, port, exec, ids, new BlockFetchingListener() {
            @Override
            public void onBlockFetchSuccess(String blockId, ManagedBuffer data) {
              bytes.addAndGet(data.size());
              finish();
            }

            @Override
            public void onBlockFetchFailure(String blockId, Throwable t) {
              failure.compareAndSet(null, t);
              finish();
            }

            private void finish() {
              synchronized (left) {
                if (--left[0] == 0) {
                  inFlight.release();
                  done.countDown();
                }
              }
            }
          }, null);
        }
        if (!done.await(600, TimeUnit.SECONDS)) {
          throw new IllegalStateException("round " + round + " timed out");
        }
        long t1 = System.nanoTime();
        long cpu1 = cpuTicks(serverPid);
        if (failure.get() != null) {
          throw new IllegalStateException("fetch failed", failure.get());
        }
        double secs = (t1 - t0) / 1e9;
        double gb = bytes.get() / 1e9;
        mbs[round] = bytes.get() / 1e6 / secs;
        cpuPerGB[round] = (cpu1 - cpu0) * tick / gb;
        System.out.printf("round %d: %d bytes in %.3f s: %.1f MB/s, server CPU %.3f s/GB%n",
            round, bytes.get(), secs, mbs[round], cpuPerGB[round]);
      }
      System.out.printf("median: %.1f MB/s, server CPU %.3f s/GB%n", median(mbs), median(cpuPerGB));
    }
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }
}
