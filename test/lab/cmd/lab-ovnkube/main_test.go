package main

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       options
		wantErr string
	}{
		{"the lab's flags", options{kubeconfig: "k", nb: "unix:/s/nb.sock", sb: "unix:/s/sb.sock"}, ""},
		{"no sb is fine", options{kubeconfig: "k", nb: "unix:/s/nb.sock"}, ""},
		{"no kubeconfig", options{nb: "unix:/s/nb.sock"}, "-kubeconfig is required"},
		{"no nb", options{kubeconfig: "k"}, "-nb"},
		{"tcp nb", options{kubeconfig: "k", nb: "tcp:127.0.0.1:6641"}, "want unix:PATH"},
		{"bad sb", options{kubeconfig: "k", nb: "unix:/nb", sb: "/sb"}, "-sb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
