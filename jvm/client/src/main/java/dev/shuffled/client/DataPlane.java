package dev.shuffled.client;

/** How a map output's batch payloads travel to the daemon. */
public enum DataPlane {
  /** The payload is copied through the socket. Every JDK and daemon. */
  INLINE,
  /**
   * The payload is copied once into a sealed memfd whose descriptor is passed with the frame; the
   * daemon maps it read-only. JDK 22+ (FFM API) on Linux, when the daemon announces the feature.
   */
  MEMFD
}
