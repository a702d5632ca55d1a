// Package view renders the outcome of a trace (package outcome): the live
// frame on a terminal, plain key=value lines for pipes and CI (and -o wide),
// the summary line, and the record that -o json|yaml prints. It only reads
// the model and writes to an io.Writer: it decides no verdict, maps no exit
// code and never talks to the cluster.
package view
