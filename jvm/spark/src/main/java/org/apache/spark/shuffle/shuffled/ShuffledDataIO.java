package org.apache.spark.shuffle.shuffled;

import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;

/**
 * The plugin's {@code ShuffleDataIO} ({@code spark.shuffle.sort.io.plugin.class}), which the
 * driver's {@link ShuffledShuffleManager} sets when {@code spark.shuffled.serving.enabled=true} and
 * the setting is unset (or Spark's default). Executors get Spark's own local-disk components (the
 * writers Spark falls back to write as ever); the driver gets {@link ShuffledDriverComponents},
 * which report reliable storage when serving is on and remove shuffles and the application from
 * the daemons that serve them.
 */
public final class ShuffledDataIO implements ShuffleDataIO {
  private final SparkConf conf;

  /** The constructor Spark calls (ShuffleDataIOUtils.loadShuffleDataIO). */
  public ShuffledDataIO(SparkConf conf) {
    this.conf = conf;
  }

  @Override
  public ShuffleExecutorComponents executor() {
    return new LocalDiskShuffleDataIO(conf).executor();
  }

  @Override
  public ShuffleDriverComponents driver() {
    return new ShuffledDriverComponents(new ShuffledConf(conf), conf);
  }
}
