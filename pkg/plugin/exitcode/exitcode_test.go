package exitcode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"nil is OK", nil, OK},
		{"untyped is a setup failure", base, Setup},
		{"usage", UsageErrorf("bad %s", "port"), Usage},
		{"wrapped usage keeps its code", fmt.Errorf("context: %w", UsageErrorf("bad")), Usage},
		{"outermost code wins", Wrap(Timeout, Wrap(Verdict, base)), Timeout},
		{"verdict", Wrap(Verdict, base), Verdict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.err); got != tt.want {
				t.Errorf("Of(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestWrapNilAndMessage(t *testing.T) {
	if Wrap(Usage, nil) != nil {
		t.Error("Wrap(Usage, nil) != nil")
	}
	base := errors.New("boom")
	err := Errorf(Setup, "reaching the API: %w", base)
	if got, want := err.Error(), "reaching the API: boom"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if !errors.Is(err, base) {
		t.Error("errors.Is does not see the wrapped error")
	}
}

// TestREADMETableMatches keeps the README's exit-code table, which CI users
// read, in step with the codes: one row per code, in order, nothing more.
func TestREADMETableMatches(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Exit codes")
	if !ok {
		t.Fatal("README has no Exit codes section")
	}
	var codes []int
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(cells[1])); err == nil {
			codes = append(codes, n)
			if got, want := strings.TrimSpace(cells[2]), Code(n).Meaning(); got != want {
				t.Errorf("README says exit %d means\n  %s\nthe code says\n  %s", n, got, want)
			}
		}
	}
	want := []int{int(OK), int(Usage), int(Verdict), int(Timeout), int(Setup)}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("README lists exit codes %v, the code defines %v", codes, want)
	}
}
