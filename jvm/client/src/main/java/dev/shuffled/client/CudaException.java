package dev.shuffled.client;

import java.io.IOException;

/**
 * A CUDA driver call failed, or the driver cannot be used here (no {@value CudaDriver#LIBRARY}, a
 * JDK before 22). {@link #result()} is the call's {@code CUresult}, or -1 when no call was made.
 */
public final class CudaException extends IOException {
  private static final long serialVersionUID = 1L;

  private final int result;

  public CudaException(String message, int result) {
    super(message);
    this.result = result;
  }

  /** The driver call's CUresult (0 is CUDA_SUCCESS, never thrown), or -1 when no call was made. */
  public int result() {
    return result;
  }
}
