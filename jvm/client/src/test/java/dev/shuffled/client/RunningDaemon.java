package dev.shuffled.client;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The real daemon for a test class, and a client connected to it and registered as one executor:
 * started before the class's tests, closed after them. A test class holds it in a static field
 * with {@code @RegisterExtension}.
 */
final class RunningDaemon implements BeforeAllCallback, AfterAllCallback {
  private final String app;
  private final String exec;
  private Daemon daemon;
  private ShuffledClient client;

  /** The client registers as executor {@code exec} of application {@code app}. */
  RunningDaemon(String app, String exec) {
    this.app = app;
    this.exec = exec;
  }

  @Override
  public void beforeAll(ExtensionContext context) throws Exception {
    daemon = Daemon.start();
    client = daemon.connect();
    client.register(app, exec);
  }

  @Override
  public void afterAll(ExtensionContext context) throws Exception {
    try {
      if (client != null) {
        client.close();
      }
    } finally {
      if (daemon != null) {
        daemon.close();
      }
    }
  }

  /** The daemon; between the class's first and last test. */
  Daemon daemon() {
    return daemon;
  }

  /** The registered client; between the class's first and last test. */
  ShuffledClient client() {
    return client;
  }
}
