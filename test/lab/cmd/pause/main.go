// Command pause is the lab's sandbox image: it holds a pod's namespaces open
// and exits on SIGTERM or SIGINT. No registry exists in the lab, so the real
// registry.k8s.io/pause cannot be pulled; any static binary that sleeps will do.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of a pod that shares its PID namespace, reap orphans.
	chld := make(chan os.Signal, 8)
	signal.Notify(chld, syscall.SIGCHLD)
	for {
		select {
		case <-sig:
			return
		case <-chld:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
