//go:build cuda

package gpu

/*
#include <stdlib.h>

// The driver gives each device CUDA_DEVICE_MAX_CONNECTIONS hardware work
// queues (8 unless set), read when it initializes. Streams beyond that
// share queues, and work on streams that share one runs in the order it
// was queued, whatever stream it is on: the daemon's staged copies and
// plan reads (a stream each) then waited behind other slots' compress
// kernels, milliseconds each. 32, the most the driver takes, gives the
// compressor's slots, the copy streams and the host readers queues of
// their own in the common case. gorgonia.org/cu calls cuInit while Go
// packages initialize, so this runs before that, as the program loads; a
// value already in the environment (an operator's) is kept.
__attribute__((constructor)) static void shuffledDeviceConnections(void) {
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
}

static const char *deviceConnections(void) {
	const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	return v ? v : "";
}
*/
import "C"

// DeviceConnections is CUDA_DEVICE_MAX_CONNECTIONS as the driver reads it:
// 32 unless the process started with a value of its own.
func DeviceConnections() string { return C.GoString(C.deviceConnections()) }
