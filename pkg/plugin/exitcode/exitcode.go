// Package exitcode carries the process exit code of kubectl traceflow inside
// the error that causes it, so that commands return errors and main alone
// decides what to print and how to exit (the CI contract in DESIGN.md).
package exitcode

import (
	"errors"
	"fmt"
)

// Code is a process exit code with a meaning for CI.
type Code int

// The exit codes of kubectl traceflow.
const (
	// OK: the verdict matches what was expected.
	OK Code = 0
	// Usage: bad usage or input; nothing was created.
	Usage Code = 1
	// Verdict: the trace completed and the packet was dropped or rejected,
	// or did not match --expect.
	Verdict Code = 2
	// Timeout: the trace did not complete in time.
	Timeout Code = 3
	// Setup: cluster or setup failure (RBAC, helper could not start, API
	// unreachable).
	Setup Code = 4
)

// meanings are the CI contract in words, as the README's exit-code table
// states it (a test keeps the two in step); package outcome implements it.
var meanings = map[Code]string{
	OK: "the verdict matches what was expected (default `--expect delivered`: delivered to the destination pod or " +
		"an endpoint of the destination Service; for a destination outside the cluster's pods, such as a node IP " +
		"or an external address, forwarded out of the pod network; with `--round-trip`, delivered and answered, " +
		"or with `--expect refused` delivered and refused)",
	Usage: "bad usage or input; nothing was created",
	Verdict: "the trace completed and the packet was dropped or rejected, or did not match `--expect` (a packet " +
		"to a pod or Service that left the pod network, e.g. through the gateway, and was not seen reaching it " +
		"was not delivered; with `--round-trip`, also a delivered packet whose answer was refused, lost on its way " +
		"back or never came)",
	Timeout: "the trace did not complete in time (a packet forwarded into a tunnel that no receiver reported on " +
		"is incomplete)",
	Setup: "cluster or setup failure (RBAC, helper could not start, API unreachable)",
}

// Meaning says what the code means to a CI user.
func (c Code) Meaning() string { return meanings[c] }

// Error is an error with the exit code it must end the process with.
type Error struct {
	Code Code
	Err  error
}

// Error returns the message of the wrapped error: the code is for the
// process, not for the reader.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Wrap attaches code to err. It returns nil for a nil err.
func Wrap(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Errorf formats a message (with %w as in fmt.Errorf) and attaches code.
func Errorf(code Code, format string, a ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, a...)}
}

// UsageErrorf is Errorf(Usage, ...): bad input, nothing was created.
func UsageErrorf(format string, a ...any) error {
	return Errorf(Usage, format, a...)
}

// Of returns the exit code for err: OK for nil, the code of the outermost
// *Error in its chain, and Setup for an error that carries none, because an
// error nobody classified cannot promise that nothing was created.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Setup
}
