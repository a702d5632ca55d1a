//go:build !windows

package main

import "syscall"

// detached starts the background cleanup in a session of its own, so that
// the terminal's next Ctrl-C does not reach it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
