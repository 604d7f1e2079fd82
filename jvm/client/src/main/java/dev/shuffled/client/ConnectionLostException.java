package dev.shuffled.client;

import java.io.IOException;

/**
 * The connection to the daemon failed or was closed: the daemon died, closed it, announced a
 * connection-level error, sent a frame that breaks the protocol, or {@link ShuffledClient#close()}
 * was called. Every request waiting at that moment fails with it, and so does every map output
 * that was open on the connection (the daemon discards them; nothing of them is committed). The
 * next {@link ShuffledClient#openMapOutput} connects again.
 */
public class ConnectionLostException extends IOException {
  private static final long serialVersionUID = 1L;

  public ConnectionLostException(String message, Throwable cause) {
    super(message, cause);
  }
}
