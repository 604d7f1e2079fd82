package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Many task threads on one connection: pipelined requests matched by id. */
class ConcurrencyIT {
  @Test
  void sixteenThreadsManyOutputsOneConnection() throws Exception {
    int threads = 16;
    int outputsPerThread = 12;
    try (Daemon d = Daemon.start();
        ShuffledClient c = d.connect(ClientOptions.DEFAULTS.withMaxOutstanding(8))) {
      c.register("app-c", "exec");
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        List<Future<Integer>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          int thread = t;
          fs.add(
              pool.submit(
                  () -> {
                    Random r = new Random(thread);
                    int done = 0;
                    for (int i = 0; i < outputsPerThread; i++) {
                      int map = thread * 1000 + i;
                      int n = 1 + r.nextInt(20);
                      ByteArrayOutputStream[] want = Payloads.expected(n);
                      Codec codec = Codec.values()[1 + (map % 4)];
                      try (MapOutput m =
                          c.openMapOutput(0, map, n, OpenOptions.of(codec, ChecksumAlgorithm.CRC32))) {
                        int batches = 1 + r.nextInt(4);
                        for (int b = 0; b < batches; b++) {
                          int[] sizes = new int[n];
                          for (int p = 0; p < n; p++) {
                            sizes[p] = r.nextInt(3) == 0 ? 0 : r.nextInt(5000);
                          }
                          Payloads.Batch batch = Payloads.batch(r, sizes, want);
                          m.writeOpaque(batch.data(), batch.offsets());
                        }
                        if (i % 5 == 4) {
                          m.abort(); // aborts interleave with commits
                          continue;
                        }
                        CommitResult res = m.commit();
                        RoundTripIT.check(
                            d.outputDir("app-c", "exec"), 0, map, codec, ChecksumAlgorithm.CRC32, res, want);
                        done++;
                      }
                      if (i % 3 == 0) {
                        c.ping(); // control requests interleave with batches
                      }
                    }
                    return done;
                  }));
        }
        int committed = 0;
        for (Future<Integer> f : fs) {
          committed += f.get(120, TimeUnit.SECONDS);
        }
        assertEquals(threads * (outputsPerThread - outputsPerThread / 5), committed);
        assertEquals(0L, c.stats().get("open_map_outputs"));
        assertEquals(1L, Daemon.awaitStat(c, "connections", 1), "everything went over one connection");
        List<ShuffleInfo> list = c.listShuffles("app-c");
        assertEquals(committed, list.get(0).mapOutputs());
      } finally {
        pool.shutdownNow();
      }
    }
  }
}
