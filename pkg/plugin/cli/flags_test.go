package cli

import (
	"testing"
	"time"
)

func TestTimeoutValue(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"20s", 20 * time.Second, true},
		{"1s", time.Second, true},
		{"5m", 300 * time.Second, true},
		{"45", 45 * time.Second, true},
		{" 30s ", 30 * time.Second, true},
		{"0", 0, false},
		{"999ms", 0, false},
		{"1500ms", 0, false},
		{"301s", 0, false},
		{"-5s", 0, false},
		{"", 0, false},
		{"1h", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d time.Duration
			err := (&timeoutValue{&d}).Set(tt.in)
			if (err == nil) != tt.wantOK || (tt.wantOK && d != tt.want) {
				t.Errorf("Set(%q) = %v, %v; want %v, ok=%v", tt.in, d, err, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPortAndTTLValues(t *testing.T) {
	tests := []struct {
		in         string
		port, ttl  int32
		portOK, ok bool
	}{
		{"1", 1, 1, true, true},
		{"255", 255, 255, true, true},
		{"256", 256, 0, true, false},
		{"65535", 65535, 0, true, false},
		{"65536", 0, 0, false, false},
		{"0", 0, 0, false, false},
		{"-1", 0, 0, false, false},
		{"80a", 0, 0, false, false},
		{"+80", 0, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var port, ttl int32
			perr := (&portValue{&port, "--tcp 80"}).Set(tt.in)
			if (perr == nil) != tt.portOK || (tt.portOK && port != tt.port) {
				t.Errorf("port Set(%q) = %d, %v", tt.in, port, perr)
			}
			terr := (&ttlValue{&ttl}).Set(tt.in)
			if (terr == nil) != tt.ok || (tt.ok && ttl != tt.ttl) {
				t.Errorf("ttl Set(%q) = %d, %v", tt.in, ttl, terr)
			}
		})
	}
}

func TestDryRunValue(t *testing.T) {
	for in, want := range map[string]bool{"true": true, "client": true, "Client": true, "false": false, "none": false} {
		on := !want
		if err := (&dryRunValue{&on}).Set(in); err != nil || on != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, on, err, want)
		}
	}
	for _, in := range []string{"server", "yes", ""} {
		var on bool
		if err := (&dryRunValue{&on}).Set(in); err == nil {
			t.Errorf("Set(%q) succeeded", in)
		}
	}
}

// --tcp-flags takes names, none or a number, and keeps all eight bits: 0
// is no flags (not SYN), and ECE and CWR are not dropped.
func TestTCPFlagsValueKeepsEveryBit(t *testing.T) {
	for in, want := range map[string]int32{"0": 0, "none": 0, "ECE,CWR": 192, "0xc2": 194, "SYN": 2, "ACK": 16} {
		var flags int32
		if err := (&tcpFlagsValue{&flags}).Set(in); err != nil {
			t.Fatalf("--tcp-flags %s: %v", in, err)
		}
		if flags != want {
			t.Errorf("--tcp-flags %s = %d, want %d", in, flags, want)
		}
	}
}
