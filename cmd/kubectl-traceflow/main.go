// Command kubectl-traceflow is the kubectl plugin: `kubectl traceflow SRC DST`.
package main

func main() {}
