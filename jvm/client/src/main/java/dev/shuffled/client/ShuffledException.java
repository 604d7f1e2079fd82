package dev.shuffled.client;

import java.io.IOException;

/**
 * The daemon answered a request with an Error: a stable {@link ErrorCode} and the daemon's
 * message, which names the field and value at fault. The connection stays usable; a map output
 * whose batch or commit failed this way is aborted on the daemon.
 */
public class ShuffledException extends IOException {
  private static final long serialVersionUID = 1L;

  private final long rawCode;
  private final String daemonMessage;

  /**
   * @param rawCode the code's number on the wire (u32)
   * @param daemonMessage the daemon's message
   * @param context what the client was doing, e.g. {@code "commit map output 3/7"}; may be empty
   */
  public ShuffledException(long rawCode, String daemonMessage, String context) {
    super(format(rawCode, daemonMessage, context));
    this.rawCode = rawCode;
    this.daemonMessage = daemonMessage;
  }

  private static String format(long rawCode, String daemonMessage, String context) {
    ErrorCode c = ErrorCode.ofWire(rawCode);
    String name = c.wireCode() == rawCode ? c.protocolName() : "Code(" + rawCode + ")";
    String prefix = context == null || context.isEmpty() ? "" : context + ": ";
    return prefix + "daemon answered " + name + ": " + daemonMessage;
  }

  /** The error code; {@link ErrorCode#INTERNAL} for a number this client does not know. */
  public ErrorCode code() {
    return ErrorCode.ofWire(rawCode);
  }

  /** The code's number as the daemon sent it. */
  public long rawCode() {
    return rawCode;
  }

  /** The daemon's message, as sent. */
  public String daemonMessage() {
    return daemonMessage;
  }
}
