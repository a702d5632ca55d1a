// Package tracerun runs one trace end to end: from the resolved endpoints
// and the built record to the finished outcome. It finds the nodes the
// probe may reach, chooses the engine (Antrea's agents or helper pods),
// runs it through one small interface, retries with helper pods where
// Antrea's agents could not say where the packet ended, and returns one
// outcome.Ended. The trace command and check both call it; neither runs an
// engine of its own.
package tracerun
