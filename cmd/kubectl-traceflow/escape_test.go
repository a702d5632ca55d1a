package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// The final error line quotes the cluster; nothing in it may drive the
// terminal.
func TestPrintErrorEscapesControlCharacters(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"helper on node evil\x1b[2J\x1b]0;owned\x07: failed", `helper on node evil\x1b[2J\x1b]0;owned\a: failed`},
		{"reason \r overwrite", `reason \r overwrite`},
		{"bidi \u202etxt.exe", `bidi \u202etxt.exe`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bad utf8 \xff", `bad utf8 \xff`},
		{"line one\n\tline two, ünïcode stays", "line one\n\tline two, ünïcode stays"},
	} {
		var b bytes.Buffer
		printError(&b, exitcode.Wrap(exitcode.Setup, fmt.Errorf("wrapped: %w", errors.New(tc.msg))))
		if got, want := b.String(), "error: wrapped: "+tc.want+"\n"; got != want {
			t.Errorf("printError(%q) = %q, want %q", tc.msg, got, want)
		}
		if strings.ContainsAny(b.String(), "\x1b\r\x07\u009b\u202e") {
			t.Errorf("a control character reached the terminal: %q", b.String())
		}
	}
}
