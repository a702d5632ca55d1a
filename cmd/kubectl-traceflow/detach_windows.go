//go:build windows

package main

import "syscall"

// detached starts the background cleanup in a process group of its own,
// so that the console's next Ctrl-C does not reach it.
func detached() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
