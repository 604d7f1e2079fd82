package dev.shuffled.client;

import java.io.IOException;

/**
 * Bytes that break docs/protocol.md: a bad frame header or a payload that does not decode. The
 * message names the message, the field and the value.
 */
final class ProtocolException extends IOException {
  private static final long serialVersionUID = 1L;

  ProtocolException(String message) {
    super(message);
  }
}
