package dev.shuffled.spark.suite;

import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.sum;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.stream.IntStream;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.PairFlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

/**
 * The jobs every configuration runs. Each returns a fingerprint of its whole result (row count and
 * an order-independent 64-bit hash of the rows), so results of Spark's sort shuffle and of the
 * plugin can be compared exactly without collecting them.
 */
final class Jobs {
  private Jobs() {}

  interface Job {
    String run(SparkSession spark) throws Exception;
  }

  record Named(String name, Job job) {}

  static final Named REDUCE_BY_KEY = new Named("reduceByKey", Jobs::reduceByKey);
  static final Named GROUP_BY_KEY = new Named("groupByKey", Jobs::groupByKey);
  static final Named SQL_JOIN_AGG = new Named("sql-join-aggregate", Jobs::sqlJoinAggregate);
  static final Named SKEWED = new Named("skewed-key", Jobs::skewed);
  static final Named WIDE = new Named("2000-reduce-partitions", Jobs::wide);
  static final Named MULTI_BATCH = new Named("multi-batch-map-task", Jobs::multiBatch);
  static final Named SLOW = new Named("slow-map-stage", Jobs::slow);

  static final List<Named> ALL =
      List.of(REDUCE_BY_KEY, GROUP_BY_KEY, SQL_JOIN_AGG, SKEWED, WIDE, MULTI_BATCH, SLOW);

  /** pairs generated on the executors: slice s of n holds records [s*per, (s+1)*per). */
  static <K, V> JavaPairRDD<K, V> generate(
      SparkSession spark, int slices, int per, PairFlatMapFunction<Integer, K, V> perSlice) {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < slices; i++) {
      ids.add(i);
    }
    return sc.parallelize(ids, slices).flatMapToPair(perSlice);
  }

  static String reduceByKey(SparkSession spark) {
    int per = 50_000;
    JavaPairRDD<Integer, Long> pairs = generate(spark, 4, per, s -> {
      List<Tuple2<Integer, Long>> out = new ArrayList<>(per);
      for (int i = s * per; i < (s + 1) * per; i++) {
        out.add(new Tuple2<>(i % 5000, (long) i));
      }
      return out.iterator();
    });
    return fingerprint(pairs.reduceByKey(Long::sum, 8).map(t -> t._1() + "=" + t._2()));
  }

  static String groupByKey(SparkSession spark) {
    int per = 25_000;
    JavaPairRDD<String, Integer> pairs = generate(spark, 4, per, s -> {
      List<Tuple2<String, Integer>> out = new ArrayList<>(per);
      for (int i = s * per; i < (s + 1) * per; i++) {
        out.add(new Tuple2<>("k" + (i % 3000), i));
      }
      return out.iterator();
    });
    return fingerprint(pairs.groupByKey(6).map(t -> {
      long n = 0;
      long total = 0;
      for (int v : t._2()) {
        n++;
        total += v;
      }
      return t._1() + ":" + n + ":" + total;
    }));
  }

  static String sqlJoinAggregate(SparkSession spark) {
    Dataset<Row> facts = spark.range(0, 200_000, 1, 4).selectExpr("id % 2000 AS k", "id AS v");
    Dataset<Row> dims = spark.range(0, 2000, 1, 2)
        .selectExpr("id AS k", "concat('name', CAST(id % 97 AS STRING)) AS name");
    Dataset<Row> r = facts.join(dims, "k").groupBy("name")
        .agg(sum("v").as("s"), count("*").as("c"));
    List<String> rows = new ArrayList<>();
    for (Row row : r.collectAsList()) {
      rows.add(row.toString());
    }
    return fingerprint(rows.iterator());
  }

  /** Nine records in ten share one key: one reduce partition gets nearly everything. */
  static String skewed(SparkSession spark) {
    int per = 40_000;
    JavaPairRDD<Integer, String> pairs = generate(spark, 4, per, s -> {
      List<Tuple2<Integer, String>> out = new ArrayList<>(per);
      for (int i = s * per; i < (s + 1) * per; i++) {
        out.add(new Tuple2<>(i % 10 != 0 ? 0 : i, "v" + i));
      }
      return out.iterator();
    });
    return fingerprint(pairs.groupByKey(8).map(t -> {
      long n = 0;
      long h = 0;
      for (String v : t._2()) {
        n++;
        h += hash64(v);
      }
      return t._1() + ":" + n + ":" + h;
    }));
  }

  static String wide(SparkSession spark) {
    int per = 20_000;
    JavaPairRDD<Integer, Integer> pairs = generate(spark, 3, per, s -> {
      List<Tuple2<Integer, Integer>> out = new ArrayList<>(per);
      for (int i = s * per; i < (s + 1) * per; i++) {
        out.add(new Tuple2<>(i, i * 3));
      }
      return out.iterator();
    });
    return fingerprint(pairs.partitionBy(new HashPartitioner(2000))
        .mapPartitionsWithIndex((p, it) -> {
          List<String> out = new ArrayList<>();
          while (it.hasNext()) {
            Tuple2<Integer, Integer> t = it.next();
            out.add(p + ":" + t._1() + ":" + t._2());
          }
          return out.iterator();
        }, true)
        // 2000 partitions in every map output; the reduce side reads them in 8 tasks.
        .coalesce(8));
  }

  /** Two map tasks of about 5 MB each: many batches at a small spark.shuffled.batchBytes. */
  static String multiBatch(SparkSession spark) {
    int per = 50_000;
    JavaPairRDD<Integer, String> pairs = generate(spark, 2, per, s -> {
      List<Tuple2<Integer, String>> out = new ArrayList<>(per);
      for (int i = s * per; i < (s + 1) * per; i++) {
        out.add(new Tuple2<>(i, "value-" + i + "-" + "x".repeat(60 + i % 40)));
      }
      return out.iterator();
    });
    return fingerprint(pairs.groupByKey(16).map(t -> {
      StringBuilder b = new StringBuilder().append(t._1());
      for (String v : t._2()) {
        b.append('|').append(v);
      }
      return b.toString();
    }));
  }

  /** Map tasks that take a few seconds, so the daemon can be killed while they write. */
  static String slow(SparkSession spark) {
    int per = 20_000;
    JavaPairRDD<Integer, String> pairs = generate(spark, 8, per, s -> {
      Iterator<Integer> ids = IntStream.range(s * per, (s + 1) * per).iterator();
      return new Iterator<Tuple2<Integer, String>>() {
        @Override
        public boolean hasNext() {
          return ids.hasNext();
        }

        @Override
        public Tuple2<Integer, String> next() {
          int i = ids.next();
          if (i % 1000 == 0) {
            try {
              Thread.sleep(60);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new IllegalStateException(e);
            }
          }
          return new Tuple2<>(i % 7919, "s" + i + "-" + "y".repeat(i % 50));
        }
      };
    });
    return fingerprint(pairs.groupByKey(8).map(t -> {
      long n = 0;
      long h = 0;
      for (String v : t._2()) {
        n++;
        h += hash64(v);
      }
      return t._1() + ":" + n + ":" + h;
    }));
  }

  static String fingerprint(JavaRDD<String> rows) {
    List<long[]> parts = rows.mapPartitions(it -> {
      long n = 0;
      long h = 0;
      while (it.hasNext()) {
        n++;
        h += hash64(it.next());
      }
      return List.of(new long[] {n, h}).iterator();
    }).collect();
    long n = 0;
    long h = 0;
    for (long[] p : parts) {
      n += p[0];
      h += p[1];
    }
    return "rows=" + n + " hash=" + Long.toHexString(h);
  }

  static String fingerprint(Iterator<String> rows) {
    long n = 0;
    long h = 0;
    while (rows.hasNext()) {
      n++;
      h += hash64(rows.next());
    }
    return "rows=" + n + " hash=" + Long.toHexString(h);
  }

  /** FNV-1a over the UTF-16 units, then a murmur3 finalizer. */
  static long hash64(String s) {
    long h = 0xcbf29ce484222325L;
    for (int i = 0; i < s.length(); i++) {
      h ^= s.charAt(i);
      h *= 0x100000001b3L;
    }
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return h;
  }
}
