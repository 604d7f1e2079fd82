package dev.shuffled.client;

/**
 * The stable error codes of the daemon's Error response (docs/protocol.md section 6). A code never
 * changes meaning; a code this client does not know is reported as {@link #INTERNAL} by {@link
 * ShuffledException#code()}, with its number in {@link ShuffledException#rawCode()}.
 */
public enum ErrorCode {
  /** A field out of bounds or inconsistent (bad offsets, unsealed memfd, name not plain). */
  INVALID_ARGUMENT(1),
  /** Unknown message type, payload kind, data plane, codec or checksum. */
  UNSUPPORTED(2),
  /** Unknown handle (never opened, committed, or aborted); unknown application or shuffle. */
  NOT_FOUND(3),
  /** A second RegisterExecutor on a connection. */
  ALREADY_EXISTS(4),
  /** Peer not allowed; local dir outside the allowed roots; another user's outputs. */
  PERMISSION_DENIED(5),
  /** Disk full; too many open map outputs; inline payload over the daemon's limit. */
  RESOURCE_EXHAUSTED(6),
  /** Valid but not now: before Hello or RegisterExecutor; a kind or partition count mismatch. */
  FAILED_PRECONDITION(7),
  /** The map output was aborted (an earlier error, Abort, disconnect, drain); nothing committed. */
  ABORTED(8),
  /** The daemon is draining or stopping; retry on a restarted daemon. */
  UNAVAILABLE(9),
  /** No protocol version in common. */
  VERSION_MISMATCH(10),
  /** An unexpected failure in the daemon (I/O error, bug), or a code this client does not know. */
  INTERNAL(11);

  private final int wire;

  ErrorCode(int wire) {
    this.wire = wire;
  }

  /** The code's number on the wire. */
  public int wireCode() {
    return wire;
  }

  /**
   * The code of a wire number: {@link #INTERNAL} for numbers this client does not know (0
   * included, which the daemon never sends).
   */
  public static ErrorCode ofWire(long code) {
    for (ErrorCode c : values()) {
      if (c.wire == code) {
        return c;
      }
    }
    return INTERNAL;
  }

  /** The code's name as docs/protocol.md spells it, e.g. {@code InvalidArgument}. */
  public String protocolName() {
    StringBuilder sb = new StringBuilder();
    for (String part : name().split("_")) {
      sb.append(part.charAt(0)).append(part.substring(1).toLowerCase(java.util.Locale.ROOT));
    }
    return sb.toString();
  }
}
