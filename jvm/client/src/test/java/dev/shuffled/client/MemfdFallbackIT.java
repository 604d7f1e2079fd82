package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Where memfd is unavailable the client falls back to inline and says so once: a child JVM that
 * cannot use the FFM API (JDK 17-21, or JDK 24+ with native access denied) writes two map outputs.
 */
class MemfdFallbackIT {
  /** The child: connect, two map outputs asking for memfd, print their planes. */
  public static void main(String[] args) throws Exception {
    try (ShuffledClient c = ShuffledClient.connect(Path.of(args[0]))) {
      c.register("app-fb", "exec");
      for (int i = 0; i < 2; i++) {
        try (MapOutput m = c.openMapOutput(0, i, 1, OpenOptions.DEFAULTS.withPlane(DataPlane.MEMFD))) {
          m.writeOpaque(new byte[] {1}, new long[] {0, 1});
          m.commit();
          System.out.println("plane " + m.plane());
        }
      }
    }
  }

  @Test
  void fallsBackToInlineLoggedOnce() throws Exception {
    int feature = Runtime.version().feature();
    try (Daemon d = Daemon.start()) {
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      if (feature >= 24) {
        cmd.add("--illegal-native-access=deny"); // the FFM API refuses: memfd is unavailable
      }
      cmd.add("-cp");
      cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
      cmd.add(MemfdFallbackIT.class.getName());
      cmd.add(d.socket.toString());
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes());
      assertTrue(p.waitFor(60, TimeUnit.SECONDS));
      assertEquals(0, p.exitValue(), out);
      assertEquals(2, out.split("plane INLINE", -1).length - 1, out);
      assertEquals(1, out.split("memfd data plane unavailable", -1).length - 1, "logged once: " + out);
      if (feature >= 24 && Boolean.getBoolean("shuffled.memfd.built")) {
        assertTrue(out.contains("the FFM API failed"), out);
      } else if (feature < 22) {
        assertTrue(out.contains("memfd needs JDK 22+"), out);
      }
    }
  }
}
