package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import javax.crypto.Cipher;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The daemon's IO encryption, read back as a Spark reducer reads a block with
 * spark.io.encryption.enabled: CryptoStreamUtils.createCryptoInputStream takes the block's first
 * 16 bytes as the IV and decrypts the rest as one AES/CTR/NoPadding stream (here with the JDK's
 * javax.crypto, independent of the daemon's Go code), then the codec's input stream of Spark's own
 * libraries decompresses it. Several runs per map output, so that the daemon's merge encrypts
 * later runs' segments in the middle of a partition's keystream.
 */
class EncryptionIT {
  private static Daemon daemon;
  private static final String APP = "app-enc";

  @BeforeAll
  static void start() throws Exception {
    daemon = Daemon.start();
  }

  @AfterAll
  static void stop() throws Exception {
    daemon.close();
  }

  /** Spark's reducer side: IV, then one AES-CTR stream to the end of the block. */
  static byte[] decrypt(byte[] key, byte[] block) throws GeneralSecurityException {
    if (block.length == 0) {
      return block; // Spark fetches no empty block
    }
    assertTrue(block.length > 16, "a block of " + block.length + " bytes has no IV and stream");
    Cipher c = Cipher.getInstance("AES/CTR/NoPadding");
    c.init(
        Cipher.DECRYPT_MODE,
        new SecretKeySpec(key, "AES"),
        new IvParameterSpec(Arrays.copyOfRange(block, 0, 16)));
    return c.doFinal(block, 16, block.length - 16);
  }

  @Test
  void sparkReadsEveryCodecAndKeySize() throws Exception {
    int exec = 0;
    for (int keyLen : new int[] {16, 24, 32}) {
      byte[] key = new byte[keyLen];
      new Random(keyLen).nextBytes(key);
      try (ShuffledClient client = daemon.connect()) {
        client.register(APP + "-" + keyLen, "exec-" + ++exec, List.of(), 0, key);
        assertTrue(client.serverInfo().has(ServerInfo.FEATURE_IO_ENCRYPTION));
        int shuffle = 0;
        for (Codec codec : new Codec[] {Codec.NONE, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY}) {
          for (ChecksumAlgorithm algo : new ChecksumAlgorithm[] {ChecksumAlgorithm.ADLER32, ChecksumAlgorithm.CRC32C}) {
            shuffle++;
            ByteArrayOutputStream[] want = Payloads.expected(5);
            Random r = new Random(shuffle * 31L + keyLen);
            CommitResult res;
            try (MapOutput m = client.openMapOutput(shuffle, 0, 5, OpenOptions.of(codec, algo))) {
              // Three batches, partition 2 empty throughout, partition 3 only in the later runs.
              Payloads.Batch first = Payloads.batch(r, new int[] {40_000, 3, 0, 0, 70_000}, want);
              m.writeOpaque(first.data(), first.offsets());
              for (int b = 0; b < 2; b++) {
                Payloads.Batch batch = Payloads.batch(r, new int[] {5000, 1, 0, 300_000 * b + 7, 100}, want);
                m.writeOpaque(batch.data(), batch.offsets());
              }
              res = m.commit();
            }
            String what = keyLen * 8 + "-bit key, " + codec + ", " + algo;
            assertTrue(res.runs() >= 2, what + ": " + res.runs() + " runs, want a merge");
            SparkFiles.Output out = SparkFiles.read(daemon.outputDir(APP + "-" + keyLen, "exec-" + exec), shuffle, 0, algo);
            assertArrayEquals(out.lengths(), res.lengths(), what + ": CommitResult lengths = index");
            assertArrayEquals(out.checksums(), res.checksums(), what + ": CommitResult checksums = checksum file");
            Set<String> ivs = new HashSet<>();
            for (int p = 0; p < 5; p++) {
              byte[] w = want[p].toByteArray();
              byte[] onDisk = out.onDisk()[p];
              if (w.length == 0) {
                assertEquals(0, onDisk.length, what + ": empty partition " + p + " takes no bytes, no IV");
                continue;
              }
              assertTrue(ivs.add(new String(onDisk, 0, 16, StandardCharsets.ISO_8859_1)), what + ": IV of partition " + p + " repeated");
              // Spark's checksum file holds the checksum of the bytes on disk: IV and ciphertext.
              assertEquals(SparkFiles.checksum(algo, onDisk), out.checksums()[p], what + ": " + algo + " of partition " + p);
              assertArrayEquals(w, SparkFiles.decompress(codec, decrypt(key, onDisk)), what + ": partition " + p);
              if (codec != Codec.NONE) {
                assertThrows(Exception.class, () -> SparkFiles.decompress(codec, onDisk), what + ": decodes without decryption");
              }
            }
          }
        }
      }
    }
  }

  @Test
  void keyIsCheckedAndNeverPrinted() throws Exception {
    try (ShuffledClient client = daemon.connect()) {
      assertThrows(IllegalArgumentException.class, () -> client.register(APP, "x", List.of(), 0, new byte[17]));
      byte[] key = "KEY-SECRET-01234".getBytes(StandardCharsets.US_ASCII);
      Wire.Register m = new Wire.Register(APP, "x", 0, List.of(), key);
      assertFalse(m.toString().contains("KEY-SECRET"), m.toString());
      assertTrue(m.toString().contains("[redacted]"), m.toString());
      // A second executor of the application with another key is refused, without the key in the
      // message.
      client.register(APP + "-keys", "1", List.of(), 0, key);
      try (ShuffledClient other = daemon.connect()) {
        byte[] another = key.clone();
        another[0] ^= 1;
        ShuffledException e =
            assertThrows(ShuffledException.class, () -> other.register(APP + "-keys", "2", List.of(), 0, another));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertFalse(e.getMessage().contains("KEY-SECRET"), e.getMessage());
      }
    }
  }
}
