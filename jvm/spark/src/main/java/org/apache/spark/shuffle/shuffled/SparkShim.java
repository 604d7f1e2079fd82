package org.apache.spark.shuffle.shuffled;

import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.List;
import java.util.Properties;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.storage.BlockManagerId;
import scala.Product2;

/**
 * What differs between the Spark minors one jar of the plugin runs on, resolved once, when the
 * class loads, and the check that this jar may run on this Spark at all.
 *
 * <p>The Scala 2.13 jar is compiled against Spark 4.0 and runs on 4.0 to 4.3; the Scala 2.12 jar
 * runs on 3.5. What changed in between:
 *
 * <ul>
 *   <li>Spark 4.1 added an order-independent row checksum per partition (SPARK-51756): a map
 *       task's {@code ShuffleDependency.rowBasedChecksums()} (one {@code RowBasedChecksum} per
 *       partition, empty unless {@code spark.sql.shuffle.orderIndependentChecksum.enabled}, which
 *       Spark 4.2 turns on by default) is updated with every (key, value) the task writes, and
 *       their aggregate goes into the map status, {@code MapStatus.apply(location, lengths, mapId,
 *       checksum)}, which replaced the three-argument {@code apply}. Consumers compare the
 *       checksums of a map task's attempts and retry the whole stage when they differ.
 * </ul>
 *
 * <p>Each such call is a {@link MethodHandle} looked up here, so that no task ever meets a {@code
 * NoSuchMethodError}: a jar on a Spark it was not built for, or whose calls it cannot find, fails
 * {@link #check} when the shuffle manager starts, on the driver and on every executor, with a
 * message naming both versions.
 */
final class SparkShim {
  private SparkShim() {}

  /** The running Spark's version, such as 4.2.1. */
  static final String SPARK_VERSION = org.apache.spark.package$.MODULE$.SPARK_VERSION();
  /** The running Scala library's version, such as 2.13.18. */
  static final String SCALA_VERSION = scalaVersion();
  /** What this jar was built for (the build's build.properties). */
  static final Build BUILD = Build.load();

  /** MapStatus.apply as (BlockManagerId, long[], long mapId, long checksum) -> MapStatus. */
  private static final MethodHandle MAP_STATUS;
  /** ShuffleDependency.rowBasedChecksums() as (ShuffleDependency) -> Object[]; null before 4.1. */
  private static final MethodHandle ROW_CHECKSUMS;
  /** RowBasedChecksum.update(key, value) as (Object, Object, Object) -> void; null before 4.1. */
  private static final MethodHandle UPDATE;
  /** RowBasedChecksum.getAggregatedChecksumValue as (Object[]) -> long; null before 4.1. */
  private static final MethodHandle AGGREGATE;
  /** Why this jar cannot run on this Spark, or null when it can. */
  private static final String MISMATCH;

  static {
    MethodHandle status = null;
    MethodHandle checksums = null;
    MethodHandle update = null;
    MethodHandle aggregate = null;
    String why = mismatch(BUILD, SPARK_VERSION, SCALA_VERSION);
    if (why == null) {
      MethodHandles.Lookup l = MethodHandles.publicLookup();
      try {
        Class<?> module = Class.forName("org.apache.spark.scheduler.MapStatus$");
        Object instance = module.getField("MODULE$").get(null);
        try {
          status = l.findVirtual(module, "apply", MethodType.methodType(
                  MapStatus.class, BlockManagerId.class, long[].class, long.class, long.class))
              .bindTo(instance);
          Class<?> rbc = Class.forName("org.apache.spark.shuffle.checksum.RowBasedChecksum");
          Class<?> rbcs = rbc.arrayType();
          checksums = l.findVirtual(ShuffleDependency.class, "rowBasedChecksums",
                  MethodType.methodType(rbcs))
              .asType(MethodType.methodType(Object[].class, ShuffleDependency.class));
          update = l.findVirtual(rbc, "update",
                  MethodType.methodType(void.class, Object.class, Object.class))
              .asType(MethodType.methodType(void.class, Object.class, Object.class, Object.class));
          aggregate = l.findStatic(rbc, "getAggregatedChecksumValue",
                  MethodType.methodType(long.class, rbcs))
              .asType(MethodType.methodType(long.class, Object[].class));
        } catch (NoSuchMethodException e) {
          if (status != null) {
            throw e; // the 4.1 map status without the 4.1 row checksums
          }
          // Before Spark 4.1: MapStatus.apply(location, lengths, mapId), no row checksums.
          status = MethodHandles.dropArguments(
              l.findVirtual(module, "apply", MethodType.methodType(
                      MapStatus.class, BlockManagerId.class, long[].class, long.class))
                  .bindTo(instance),
              3, long.class);
        }
      } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
        status = null;
        checksums = null;
        update = null;
        aggregate = null;
        why = BUILD.describe() + ", and Spark " + SPARK_VERSION + " (Scala " + SCALA_VERSION
            + ") lacks what it calls: " + e;
      }
    }
    MAP_STATUS = status;
    ROW_CHECKSUMS = checksums;
    UPDATE = update;
    AGGREGATE = aggregate;
    MISMATCH = why;
  }

  /**
   * Throws, naming both versions, unless this jar runs on this Spark; the shuffle manager calls it
   * first thing, so that a wrong jar fails the driver and every executor at start.
   */
  static void check() {
    if (MISMATCH != null) {
      throw new IllegalStateException("shuffled: " + MISMATCH);
    }
  }

  /** Whether this Spark has row checksums (4.1+). */
  static boolean hasRowChecksums() {
    return ROW_CHECKSUMS != null;
  }

  /**
   * Why a jar built for {@code build} cannot run on Spark {@code spark} with Scala {@code scala},
   * or null when the minor and the Scala binary version are the jar's.
   */
  static String mismatch(Build build, String spark, String scala) {
    String minor = minor(spark);
    String scalaBinary = minor(scala);
    if (build.minors().contains(minor) && build.scalaBinary().equals(scalaBinary)) {
      return null;
    }
    return build.describe() + ", not for Spark " + spark + " (Scala " + scala + "): use the"
        + " plugin's jar for Spark " + minor + " (README, \"Use it from Spark\")";
  }

  /** "4.2" of "4.2.1" or "4.2.0-preview1"; the whole string when it has no second dot. */
  static String minor(String version) {
    int a = version.indexOf('.');
    int b = a < 0 ? -1 : version.indexOf('.', a + 1);
    String m = b < 0 ? version : version.substring(0, b);
    int dash = m.indexOf('-');
    return dash < 0 ? m : m.substring(0, dash);
  }

  /** The map status of a map output: Spark's own, with the row checksum from Spark 4.1 on. */
  static MapStatus mapStatus(BlockManagerId location, long[] lengths, long mapId, long checksum) {
    try {
      return (MapStatus) MAP_STATUS.invokeExact(location, lengths, mapId, checksum);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable e) {
      throw new IllegalStateException("MapStatus.apply on Spark " + SPARK_VERSION, e);
    }
  }

  /**
   * The topology info that marks a map status location as a daemon's block server rather than an
   * executor's block manager. Spark uses a location's topology info only to place RDD block
   * replicas, never for shuffle blocks; the driver's {@link ShuffledDataIO} finds the daemons that
   * hold a shuffle's outputs by it, to remove them.
   */
  static final String DAEMON_TOPOLOGY = "shuffled-daemon";

  /**
   * The location a map status names when the daemon serves the output: the executor id that
   * registered and wrote it (the daemon resolves the files from that registration, and reducers
   * in the same executor still read them locally), at the daemon's host and port.
   */
  static BlockManagerId daemonLocation(String executorId, String host, int port) {
    return BlockManagerId.apply(executorId, host, port, scala.Option.apply(DAEMON_TOPOLOGY));
  }

  /** Whether {@code location} is a daemon's block server ({@link #daemonLocation}). */
  static boolean isDaemonLocation(BlockManagerId location) {
    scala.Option<String> t = location.topologyInfo();
    return t.isDefined() && DAEMON_TOPOLOGY.equals(t.get());
  }

  /**
   * The dependency's row checksums, one per partition, for a map task to update (the dependency
   * is deserialized afresh for each task, so they are the task's own); null when this Spark has
   * none or the shuffle wants none.
   */
  static Object[] rowChecksums(ShuffleDependency<?, ?, ?> dep) {
    if (ROW_CHECKSUMS == null) {
      return null;
    }
    Object[] sums;
    try {
      sums = (Object[]) ROW_CHECKSUMS.invokeExact(dep);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable e) {
      throw new IllegalStateException("ShuffleDependency.rowBasedChecksums on Spark "
          + SPARK_VERSION, e);
    }
    return sums == null || sums.length == 0 ? null : sums;
  }

  /**
   * The aggregate of the row checksums that goes into the map status
   * (RowBasedChecksum.getAggregatedChecksumValue, as Spark's own writers report it); 0 for none.
   */
  static long aggregate(Object[] sums) {
    if (sums == null) {
      return 0;
    }
    try {
      return (long) AGGREGATE.invokeExact(sums);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable e) {
      throw new IllegalStateException("RowBasedChecksum.getAggregatedChecksumValue on Spark "
          + SPARK_VERSION, e);
    }
  }

  /**
   * {@code records}, each passed to its partition's row checksum as it is read, exactly as Spark's
   * writers do (ExternalSorter.insertAll, BypassMergeSortShuffleWriter, UnsafeShuffleWriter):
   * every (key, value) the task's iterator yields, before any map-side combine, on the task
   * thread.
   */
  static <K, V> scala.collection.Iterator<Product2<K, V>> checksummed(
      scala.collection.Iterator<Product2<K, V>> records, Partitioner partitioner, Object[] sums) {
    return new scala.collection.AbstractIterator<Product2<K, V>>() {
      @Override
      public boolean hasNext() {
        return records.hasNext();
      }

      @Override
      public Product2<K, V> next() {
        Product2<K, V> r = records.next();
        K key = r._1();
        Object sum = sums[partitioner.getPartition(key)];
        try {
          UPDATE.invokeExact(sum, (Object) key, (Object) r._2());
        } catch (RuntimeException | Error e) {
          throw e;
        } catch (Throwable e) {
          throw new IllegalStateException("RowBasedChecksum.update on Spark " + SPARK_VERSION, e);
        }
        return r;
      }
    };
  }

  private static String scalaVersion() {
    try {
      return scala.util.Properties$.MODULE$.versionNumberString();
    } catch (LinkageError e) {
      return "unknown (" + e + ")";
    }
  }

  /** What a jar was built for: the Spark minors it runs on, its Scala, the Spark compiled with. */
  record Build(String jar, List<String> minors, String scalaBinary, String compiled) {
    static Build load() {
      Properties p = new Properties();
      try (InputStream in = SparkShim.class.getResourceAsStream("build.properties")) {
        if (in != null) {
          p.load(in);
        }
      } catch (IOException e) {
        // Described as unknown below: check() then refuses every Spark.
      }
      return new Build(
          p.getProperty("jar", "shuffled-spark (no build.properties)"),
          List.of(p.getProperty("spark.minors", "").split(",")),
          p.getProperty("scala.binary", "?"),
          p.getProperty("spark.compiled", "?"));
    }

    String describe() {
      return jar + " was built for Spark " + String.join(", ", minors) + " (Scala " + scalaBinary
          + ", compiled against Spark " + compiled + ")";
    }
  }
}
