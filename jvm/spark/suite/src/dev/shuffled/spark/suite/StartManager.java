package dev.shuffled.spark.suite;

import org.apache.spark.SparkConf;

/**
 * Starts the shuffle manager named by the argument as SparkEnv does on the driver (its
 * (SparkConf, boolean) constructor), and prints "started" or "refused: " with the first message of
 * what it threw. The Spark suite runs it with the plugin's jar for other Spark versions.
 */
public final class StartManager {
  private StartManager() {}

  public static void main(String[] args) throws Exception {
    try {
      Class.forName(args[0]).getConstructor(SparkConf.class, boolean.class)
          .newInstance(new SparkConf(false), true);
      System.out.println("started");
    } catch (java.lang.reflect.InvocationTargetException e) {
      Throwable t = e.getCause();
      while (t.getCause() != null && t.getMessage() == null) {
        t = t.getCause();
      }
      System.out.println("refused: " + t);
    } catch (Throwable e) {
      System.out.println("refused: " + e);
    }
  }
}
