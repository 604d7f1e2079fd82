package org.apache.spark.shuffle.shuffled;

import java.util.LinkedHashSet;
import java.util.Set;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.ShuffleStatus;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDriverComponents;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's shuffle components under {@link ShuffledDataIO}: Spark's local-disk ones (which tell
 * the executors to remove a shuffle's blocks), and, when serving is on:
 *
 * <ul>
 *   <li>{@link #supportsReliableStorage()} is true: Spark keeps a lost executor's map outputs
 *       (DAGScheduler.handleExecutorLost, TaskSetManager.executorLost) and allows dynamic allocation
 *       without the external shuffle service or shuffle tracking (ExecutorAllocationManager).
 *   <li>{@link #removeShuffle} removes the shuffle from every daemon whose block server a map
 *       status of it names (its location's topology info, {@link SparkShim#daemonLocation}), with
 *       the daemon's remove message sent through Spark's own transport client ({@link
 *       DaemonRemoval}), so it authenticates as fetches do; {@link #cleanupApplication} removes the
 *       application from every daemon seen.
 * </ul>
 *
 * A removal that fails is logged and left to the daemon's retention; it never fails the job.
 */
final class ShuffledDriverComponents extends LocalDiskShuffleDriverComponents {
  private static final Logger LOG = LoggerFactory.getLogger(ShuffledDriverComponents.class);

  private final ShuffledConf conf;
  private final SparkConf sparkConf;
  /** Every daemon a map status named, for cleanupApplication; guarded by itself. */
  private final Set<DaemonRemoval.Address> seen = new LinkedHashSet<>();
  private DaemonRemoval removal; // guarded by this

  ShuffledDriverComponents(ShuffledConf conf, SparkConf sparkConf) {
    this.conf = conf;
    this.sparkConf = sparkConf;
  }

  @Override
  public boolean supportsReliableStorage() {
    return conf.serving;
  }

  @Override
  public void removeShuffle(int shuffleId, boolean blocking) {
    // Before Spark's removal: ContextCleaner unregisters the shuffle's map statuses after it.
    Set<DaemonRemoval.Address> daemons = conf.serving ? daemonsOf(shuffleId) : Set.of();
    super.removeShuffle(shuffleId, blocking);
    for (DaemonRemoval.Address a : daemons) {
      remove(a, shuffleId);
    }
  }

  @Override
  public void cleanupApplication() {
    try {
      super.cleanupApplication();
    } finally {
      if (conf.serving) {
        Set<DaemonRemoval.Address> all = new LinkedHashSet<>(allDaemons());
        synchronized (seen) {
          all.addAll(seen);
        }
        for (DaemonRemoval.Address a : all) {
          remove(a, DaemonRemoval.WHOLE_APPLICATION);
        }
        synchronized (this) {
          if (removal != null) {
            removal.close();
            removal = null;
          }
        }
      }
    }
  }

  private void remove(DaemonRemoval.Address a, int shuffleId) {
    String app = sparkConf.getAppId();
    String what = shuffleId == DaemonRemoval.WHOLE_APPLICATION
        ? "application " + app : "shuffle " + shuffleId + " of " + app;
    try {
      DaemonRemoval r;
      synchronized (this) {
        if (removal == null) {
          removal = new DaemonRemoval(sparkConf, SparkEnv.get().securityManager(), conf.authenticate);
        }
        r = removal;
      }
      long[] got = r.remove(a, app, shuffleId);
      LOG.debug("shuffled: removed {} from the daemon at {}: {} map outputs, {} bytes",
          what, a, got[0], got[1]);
    } catch (Exception e) { // IOException, InterruptedException, and Spark's RuntimeExceptions
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      LOG.warn("shuffled: removing {} from the daemon at {} failed ({}); its retention removes"
          + " what is left", what, a, e.toString());
    }
  }

  /** The daemons whose block servers the map statuses of {@code shuffleId} name. */
  private Set<DaemonRemoval.Address> daemonsOf(int shuffleId) {
    Set<DaemonRemoval.Address> out = new LinkedHashSet<>();
    MapOutputTrackerMaster m = tracker();
    if (m != null) {
      scala.Option<ShuffleStatus> s = m.shuffleStatuses().get(shuffleId);
      if (s.isDefined()) {
        collect(s.get(), out);
      }
    }
    synchronized (seen) {
      seen.addAll(out);
    }
    return out;
  }

  /** The daemons the map statuses of every shuffle still registered name. */
  private Set<DaemonRemoval.Address> allDaemons() {
    Set<DaemonRemoval.Address> out = new LinkedHashSet<>();
    MapOutputTrackerMaster m = tracker();
    if (m != null) {
      scala.collection.Iterator<ShuffleStatus> it = m.shuffleStatuses().valuesIterator();
      while (it.hasNext()) {
        collect(it.next(), out);
      }
    }
    return out;
  }

  private static void collect(ShuffleStatus status, Set<DaemonRemoval.Address> out) {
    for (MapStatus ms : status.mapStatuses()) {
      BlockManagerId loc = ms == null ? null : ms.location();
      if (loc != null && SparkShim.isDaemonLocation(loc)) {
        out.add(new DaemonRemoval.Address(loc.host(), loc.port()));
      }
    }
  }

  private static MapOutputTrackerMaster tracker() {
    SparkEnv env = SparkEnv.get();
    MapOutputTracker t = env == null ? null : env.mapOutputTracker();
    return t instanceof MapOutputTrackerMaster m ? m : null;
  }
}
