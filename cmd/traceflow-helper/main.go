// Command traceflow-helper is the node helper: it traces a probe packet
// through this node's Open vSwitch and reports JSON lines on stdout.
package main

func main() {}
