package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fatalTB records a Fatalf instead of ending the test, so that a helper's
// failure path can be checked.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fatalTB) Helper() {}

// A daemon's socket file exists from bind() on; until listen() a client is
// refused. ovsdb-server leaves that gap (ovs-vsctl was refused in CI after
// the harness had seen the file), so the harness waits for a connection,
// not for the file.
func TestWaitListeningWaitsForListenNotForTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Close(fd) }()
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("bound but no file: %v", err)
	}
	c, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = syscall.Connect(c, &syscall.SockaddrUnix{Name: path})
	_ = syscall.Close(c)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connect to a bound socket that does not listen: %v, want ECONNREFUSED", err)
	}

	rec := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != rec {
				panic(r)
			}
		}()
		WaitListening(rec, path, 50*time.Millisecond)
	}()
	if rec.msg == "" {
		t.Fatal("WaitListening returned for a socket nobody listens on")
	}

	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	WaitListening(t, path, time.Minute)
}
