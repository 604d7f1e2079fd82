package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import scala.runtime.BoxedUnit;

class FallbackReportsTest {
  @Test
  void summaryCountsExecutorsByKind() {
    FallbackReports.Driver d = new FallbackReports.Driver(null);
    assertNull(d.summary(), "no report, no line");
    d.add(new FallbackReports.Report("1", "h1", "RegisterExecutor refused: PERMISSION_DENIED",
        "local dir /tmp/a is not under an allowed root"));
    d.add(new FallbackReports.Report("2", "h2", "RegisterExecutor refused: PERMISSION_DENIED",
        "local dir /tmp/b is not under an allowed root"));
    // An executor counts once, with its first reason.
    d.add(new FallbackReports.Report("1", "h1", "OpenMapOutput refused: RESOURCE_EXHAUSTED",
        "too many open map outputs"));
    d.add(new FallbackReports.Report("3", "h1", "OpenMapOutput refused: RESOURCE_EXHAUSTED",
        "too many open map outputs"));
    assertEquals("3 executors of this application wrote shuffle output with Spark's own writer,"
        + " not the daemon: 2 for RegisterExecutor refused: PERMISSION_DENIED (executors 1, 2;"
        + " the first said: local dir /tmp/a is not under an allowed root); 1 for OpenMapOutput"
        + " refused: RESOURCE_EXHAUSTED (executors 3; the first said: too many open map outputs)",
        d.summary());
  }

  @Test
  void receiveTakesReportsOnly() {
    FallbackReports.Driver d = new FallbackReports.Driver(null);
    var pf = d.receive();
    assertTrue(pf.isDefinedAt(new FallbackReports.Report("7", "h", "k", "r")));
    assertTrue(!pf.isDefinedAt("something else"));
    assertEquals(BoxedUnit.UNIT, pf.apply(new FallbackReports.Report("7", "h", "k", "r")));
    assertTrue(d.summary().startsWith("1 executor of this application"), d.summary());
  }
}
