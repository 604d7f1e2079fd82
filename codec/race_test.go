//go:build race

package codec

// The race detector changes allocation counts and which code paths the
// compression libraries take.
const raceEnabled = true
