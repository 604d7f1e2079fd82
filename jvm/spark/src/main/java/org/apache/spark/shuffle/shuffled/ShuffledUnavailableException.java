package org.apache.spark.shuffle.shuffled;

/**
 * The daemon could not be reached for a map task and {@code spark.shuffled.fallback.enabled} is
 * false: the task fails with this, and Spark retries it.
 */
public final class ShuffledUnavailableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  ShuffledUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
