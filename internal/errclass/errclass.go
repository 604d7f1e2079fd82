// Package errclass holds the error classes that the data planes below the
// server share with it: an error wraps one, and the server maps the class
// onto its wire code. Their texts are the ones a client reads before the
// details.
package errclass

import "errors"

var (
	// Invalid: the request is wrong (code InvalidArgument).
	Invalid = errors.New("invalid argument")
	// Unsupported: the request is right but this build does not serve it
	// (code Unsupported).
	Unsupported = errors.New("unsupported")
	// Exhausted: a bound was reached (code ResourceExhausted).
	Exhausted = errors.New("resource exhausted")
	// Precondition: the request does not fit the state it names (code
	// FailedPrecondition).
	Precondition = errors.New("failed precondition")
)
