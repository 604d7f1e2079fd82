package org.apache.spark.shuffle.shuffled;

import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.ThreadSafeRpcEndpoint;
import org.apache.spark.util.RpcUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Function1;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * Makes fallback loud on the driver: an executor whose shuffle output goes to Spark's own writer
 * (the daemon refused its registration or an Open, could not be reached, or the configuration needs
 * what the daemon does not do) tells the driver once per reason, through Spark's RPC; the driver
 * logs the first report at WARN, and when the application stops, how many executors fell back and
 * why, in one line.
 */
final class FallbackReports {
  private static final Logger LOG = LoggerFactory.getLogger(FallbackReports.class);

  /** The driver endpoint's name in Spark's RPC environment. */
  static final String ENDPOINT = "shuffled-fallback-reports";

  /** Kinds of fallback this executor has reported. */
  private static final Set<String> REPORTED = ConcurrentHashMap.newKeySet();

  private FallbackReports() {}

  /**
   * What an executor sends the driver: its id and host, the kind of fallback (what the driver
   * counts executors by) and the reason in full.
   */
  record Report(String executor, String host, String kind, String reason)
      implements Serializable {}

  /**
   * Tells the driver, once per {@code kind} in this process, that this executor writes (some of)
   * its shuffle output with Spark's own writer because of {@code reason}. Never throws: a driver
   * that cannot be told only misses a log line.
   */
  static void report(String kind, String reason) {
    if (TaskContext.get() == null || !REPORTED.add(kind)) {
      return; // not in a Spark task (a unit test), or reported already
    }
    try {
      SparkEnv env = SparkEnv.get();
      if (env == null) {
        return;
      }
      RpcEndpointRef driver = RpcUtils.makeDriverRef(ENDPOINT, env.conf(), env.rpcEnv());
      driver.send(
          new Report(env.executorId(), env.blockManager().blockManagerId().host(), kind, reason));
    } catch (Exception | LinkageError e) { // SparkException is checked and undeclared
      LOG.debug("shuffled: could not tell the driver about the fallback: {}", e.toString());
    }
  }

  /** The driver's side: collects the reports; {@link #summary} logs them. */
  static final class Driver implements ThreadSafeRpcEndpoint {
    private final RpcEnv rpcEnv;
    /** The first reason of each executor, by executor id, in arrival order. */
    private final Map<String, Report> byExecutor = new LinkedHashMap<>();

    Driver(RpcEnv rpcEnv) { // package-private for the tests
      this.rpcEnv = rpcEnv;
    }

    /** Registers the endpoint in the driver's RPC environment; null if that fails. */
    static Driver register(SparkEnv env) {
      try {
        Driver d = new Driver(env.rpcEnv());
        env.rpcEnv().setupEndpoint(ENDPOINT, d);
        return d;
      } catch (Exception e) { // SparkException (checked, undeclared) among others
        LOG.warn("shuffled: executors cannot report fallbacks to this driver: {}", e.toString());
        return null;
      }
    }

    @Override
    public RpcEnv rpcEnv() {
      return rpcEnv;
    }

    @Override
    public scala.PartialFunction<Object, BoxedUnit> receive() {
      return new AbstractPartialFunction<>() {
        @Override
        public boolean isDefinedAt(Object m) {
          return m instanceof Report;
        }

        @Override
        public <A1, B1> B1 applyOrElse(A1 m, Function1<A1, B1> otherwise) {
          if (m instanceof Report r) {
            add(r);
            @SuppressWarnings("unchecked")
            B1 unit = (B1) BoxedUnit.UNIT;
            return unit;
          }
          return otherwise.apply(m);
        }
      };
    }

    synchronized void add(Report r) {
      boolean first = byExecutor.isEmpty();
      if (byExecutor.putIfAbsent(r.executor(), r) != null) {
        return;
      }
      if (first) {
        LOG.warn("shuffled: executor {} on {} writes shuffle output with Spark's own writer, not"
            + " the daemon: {} (the application's count is logged when it stops)",
            r.executor(), r.host(), r.reason());
      } else {
        LOG.info("shuffled: executor {} on {} writes shuffle output with Spark's own writer: {}",
            r.executor(), r.host(), r.reason());
      }
    }

    /** One line: how many executors fell back and why; null when none did. */
    synchronized String summary() {
      if (byExecutor.isEmpty()) {
        return null;
      }
      Map<String, Set<String>> byKind = new LinkedHashMap<>();
      Map<String, String> example = new LinkedHashMap<>();
      for (Report r : byExecutor.values()) {
        byKind.computeIfAbsent(r.kind(), k -> new TreeSet<>()).add(r.executor());
        example.putIfAbsent(r.kind(), r.reason());
      }
      StringBuilder b = new StringBuilder();
      b.append(byExecutor.size()).append(byExecutor.size() == 1 ? " executor" : " executors")
          .append(" of this application wrote shuffle output with Spark's own writer, not the"
              + " daemon: ");
      String sep = "";
      for (Map.Entry<String, Set<String>> e : byKind.entrySet()) {
        b.append(sep).append(e.getValue().size()).append(" for ").append(e.getKey())
            .append(" (executors ").append(String.join(", ", e.getValue()))
            .append("; the first said: ").append(example.get(e.getKey())).append(')');
        sep = "; ";
      }
      return b.toString();
    }
  }
}
