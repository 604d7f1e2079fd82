package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The README's "Use it from the JVM" example, verbatim but for the socket path, runs. */
class ReadmeExampleIT {
  static long[] example(Path socketPath) throws java.io.IOException {
    // --- README example begins ---
    try (ShuffledClient client = ShuffledClient.connect(socketPath)) {
      client.register("app-1", "exec-1"); // or register(app, exec, sparkLocalDirs, 64)
      OpenOptions opts = OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.ADLER32);
      try (MapOutput out = client.openMapOutput(0, 7, 3, opts)) { // shuffle 0, map 7, 3 partitions
        byte[] batch = "aaabbc".getBytes(); // already serialized, uncompressed
        out.writeOpaque(batch, new long[] {0, 3, 5, 6}); // partition p = [off[p], off[p+1])
        CommitResult r = out.commit(); // the daemon wrote shuffle_0_7_0.{data,index,checksum.ADLER32}
        System.out.println(Arrays.toString(r.lengths()) + " " + Arrays.toString(r.checksums()));
        return r.lengths();
      } // close() aborts a map output that was not committed
    }
    // --- README example ends ---
  }

  @Test
  void runs() throws Exception {
    try (Daemon d = Daemon.start()) {
      long[] lengths = example(d.socket);
      assertEquals(3, lengths.length);
      assertTrue(Arrays.stream(lengths).allMatch(l -> l > 0), Arrays.toString(lengths));
    }
  }
}
